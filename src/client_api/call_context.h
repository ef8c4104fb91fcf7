// What a call of the client API knows about its caller besides the request message: the
// metadata etcd's interceptors and auth read. Filled by the transport (HTTP/2 headers, the
// gateway's HTTP headers, the TLS session) and handed to every method.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace etcdw::client_api {

struct CallContext {
  // The auth token: metadata "token" (etcd's clients), else "authorization" (the gateway's
  // header, as etcd also reads it). Absent when the client sent neither.
  std::optional<std::string> token;
  // The Common Name of the client certificate the TLS session verified; empty without one.
  std::string cert_common_name;
  // Metadata "hasleader: true" (etcd's WithRequireLeader).
  bool require_leader = false;
  // Header "grpc-timeout": how long the client waits for the answer of a unary call. The event
  // loop turns it into `deadline` when the call is dispatched.
  std::optional<std::chrono::nanoseconds> timeout;
  // When the client gives up: a unary call not answered by then ends with DEADLINE_EXCEEDED,
  // and one whose deadline has passed when it would start is not started.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

}  // namespace etcdw::client_api
