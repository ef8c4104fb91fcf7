// etcd's HTTP endpoints on the client port, for clients that speak HTTP/1.x there (curl,
// monitoring probes): etcd serves gRPC and HTTP on one port, telling them apart by the first
// bytes. Served: GET /health (etcd 3.4's check: no alarm, a known leader, and a linearizable
// read) and GET /version; anything else is answered 404 as Go's HTTP server does. One request
// per connection: the answer says "Connection: close".
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "etcdw/server/etcd_server.h"

namespace etcdw::server::rpc {

// The protocol a connection's first bytes announce: HTTP/2 starts with its preface ("PRI * "),
// anything else is taken for HTTP/1.x. nullopt until enough bytes arrived to tell.
enum class Protocol { kHttp2, kHttp1 };
std::optional<Protocol> SniffProtocol(std::string_view first_bytes);

// Request heads larger than this are refused (431) without waiting for their end.
constexpr size_t kMaxHttp1HeadBytes = 8 << 10;

// The answer to a request head over kMaxHttp1HeadBytes (431, as Go's server).
std::string HeadTooLarge();

// Whether `in` holds a whole request head (through its blank line).
bool HasHttp1Head(std::string_view in);

// Answers the request whose head `in` starts with; `done` receives the whole response (status
// line, headers, body), once, from any thread.
void AnswerHttp1(EtcdServer& server, std::string_view in,
                 std::function<void(std::string response)> done);

}  // namespace etcdw::server::rpc
