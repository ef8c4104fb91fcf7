// etcd's HTTP endpoints, for clients that speak HTTP/1.x (curl, monitoring probes, Prometheus):
// on the client port, where etcd serves gRPC and HTTP telling them apart by the first bytes,
// GET /health, /livez and /readyz (health_checks.h), GET /version and /metrics
// (server_metrics.h); on listen-metrics-urls, the health endpoints and /metrics only, without the
// client port's CORS headers. Anything else is answered 404 as Go's HTTP server
// does. Connections are kept alive as Go's server keeps them (Http1Framing).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "etcdw/member/etcd_server.h"
#include "gateway.h"
#include "http1_request.h"

namespace etcdw::client_api {
class MethodTable;
}

namespace etcdw::client_api {

// HTTP/2's client connection preface, which its first frame (SETTINGS) follows.
constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kHttp2FrameHeaderBytes = 9;

// The protocol a connection's first bytes announce: HTTP/2 starts with its preface ("PRI * "),
// anything else is taken for HTTP/1.x. nullopt until enough bytes arrived to tell.
enum class Protocol { kHttp2, kHttp1 };
std::optional<Protocol> SniffProtocol(std::string_view first_bytes);

// Request heads larger than this are refused (431) without waiting for their end.
constexpr size_t kMaxHttp1HeadBytes = 8 << 10;

// Which port a request came to.
enum class HttpPort { kClient, kMetrics };

// What the server answers HTTP/1.x requests with.
struct Http1Context {
  member::EtcdServer& server;
  const MethodTable& methods;  // the gateway calls them
  size_t max_message_bytes;    // the largest request message the gRPC server takes
  bool gateway = true;         // enable-grpc-gateway
  // The largest request body taken (the gateway's JSON: base64 makes bytes a third larger).
  size_t MaxBody() const { return 4 * max_message_bytes + (64 << 10); }
};

// The answer to a request that could not be parsed (`why`: 400, 413 or 431, as Go's server
// writes them itself).
std::string Http1ParseError(Http1Parse::Result why);

// The answer to an HTTP/1.1 request without a Host header (Go's server refuses it) or with
// several (`several`).
std::string Http1HostError(bool several);

// The answer to a request not received within `timeout` (NativeRpcOptions::
// request_read_timeout), after which the connection closes.
std::string Http1TimeoutError(std::chrono::milliseconds timeout);

// How an answer is framed for the request it answers, as Go's server frames it. The answers
// made here (AnswerHttp1, GatewayHttpResponse, GatewayStreamHead) are laid out for an HTTP/1.1
// client that closes: "HTTP/1.1", "Connection: close". Adapt rewrites one (or a stream's head)
// for the request: HTTP/1.1 that keeps the connection: no Connection header; HTTP/1.0: status
// line "HTTP/1.0", "Connection: keep-alive" where it asked for it and the length is known, and
// a chunked body sent as its bare data (`raw_body`: a stream's chunks too), closing after it.
struct Http1Framing {
  bool http10 = false;      // the request was HTTP/1.0
  bool keep_alive = false;  // the request lets the connection stay open
  // Rewrites `response` (whole, or a stream's head when `head_only`); returns whether the
  // connection stays open after it.
  bool Adapt(std::string* response, bool head_only = false) const;
  // HTTP/1.0 gets a chunked answer's data bare.
  bool raw_body() const { return http10; }
};

// The interim answer to "Expect: 100-continue".
constexpr std::string_view kHttp1Continue = "HTTP/1.1 100 Continue\r\n\r\n";

// A gateway answer (gateway.h) laid out as etcd's: grpc-gateway's headers, then Go's.
std::string GatewayHttpResponse(const GatewayAnswer& a);
// The head of a streaming gateway answer (chunked; its chunks are Http1Chunk's, ended by
// "0\r\n\r\n"); `answered`: a message comes with it (grpc-gateway then forwards the stream's
// gRPC headers).
std::string GatewayStreamHead(int code, bool answered);
// `data` as one chunk of a chunked body ("" for no data: an empty chunk would end the body).
std::string Http1Chunk(std::string_view data);

// An answer of AnswerHttp1 taken apart for HTTP/2: the status code, the headers (names
// lower-case, without HTTP/1's connection-level Connection, Transfer-Encoding and Trailer; as Go's
// HTTP/2 server orders them: the handler's, then Content-Length when known, then Date), and the
// body, de-chunked.
struct SplitResponse {
  std::string status;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};
SplitResponse SplitHttp1Response(std::string_view response);

// Answers `req`; `done` receives the whole response (status line, headers, body), once, from
// any thread.
void AnswerHttp1(const Http1Context& ctx, HttpPort port, const Http1Request& req,
                 std::function<void(std::string response)> done);

}  // namespace etcdw::client_api
