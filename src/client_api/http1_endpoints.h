// etcd's HTTP endpoints, for clients that speak HTTP/1.x (curl, monitoring probes, Prometheus):
// on the client port, where etcd serves gRPC and HTTP telling them apart by the first bytes,
// GET /health, /livez and /readyz (health_checks.h), GET /version and /metrics
// (server_metrics.h); on listen-metrics-urls, the health endpoints and /metrics only, without the
// client port's CORS headers. Anything else is answered 404 as Go's HTTP server
// does. One request per connection: the answer says "Connection: close".
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "etcdw/member/etcd_server.h"

namespace etcdw::client_api {

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

// Which port a request came to.
enum class HttpPort { kClient, kMetrics };

// Answers the request whose head `in` starts with; `done` receives the whole response (status
// line, headers, body), once, from any thread.
void AnswerHttp1(member::EtcdServer& server, HttpPort port, std::string_view in,
                 std::function<void(std::string response)> done);

}  // namespace etcdw::client_api
