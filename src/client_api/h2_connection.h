// One client connection's HTTP/2 session (libnghttp2), free of I/O: the caller feeds it the
// bytes read from the socket and writes what Drain returns. A unary request is handed over
// whole once the client has sent all of it; a stream's request messages are handed over one
// by one as they arrive. Answers are given per stream, in any order across streams.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "call_context.h"
#include "etcdw/common/status.h"

struct nghttp2_session;

namespace etcdw::client_api {

// Told once whether a stream's answer message was handed to the transport (true: all of it is
// in DATA frames the client's flow-control window admitted) or dropped (false: the stream or
// its connection went first). It is how a stream's producer slows down to its client's pace.
using Written = std::function<void(bool ok)>;

// How often a client may ping, as etcd's server enforces it (grpc-go's keepalive
// EnforcementPolicy with etcd's settings): every `min_interval` while it has calls open,
// every `idle_interval` when it has none. A ping that comes sooner is a strike, unless we sent
// headers or data since the last ping; after `max_strikes` strikes the next one ends the
// connection with GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (grpc-go clients then ping less).
struct PingPolicy {
  std::chrono::steady_clock::duration min_interval = std::chrono::seconds(5);
  std::chrono::steady_clock::duration idle_interval = std::chrono::hours(2);
  int max_strikes = 2;
};

class H2Connection {
 public:
  struct Request {
    int32_t stream = 0;
    std::string method;        // ":method"
    std::string path;          // ":path": /package.Service/Method
    std::string content_type;  // application/grpc[+proto]
    std::string encoding;      // grpc-encoding, empty when absent
    CallContext ctx;           // token, require-leader (the TLS CN is the caller's to add)
    std::string body;          // unary: the DATA frames, at most body_limit bytes
    bool body_over_limit = false;
    // The regular headers, names lower-case (at most 64), for requests that are not gRPC.
    std::vector<std::pair<std::string, std::string>> headers;
  };
  struct Handler {
    // Whether `path` names a streaming method (its messages are delivered one by one).
    std::function<bool(const std::string& path)> is_stream;
    // A unary request, complete (its END_STREAM arrived).
    std::function<void(Request&)> on_request;
    // A stream's headers arrived (body empty); then its messages, then maybe its half-close.
    std::function<void(Request&)> on_stream_open;
    std::function<void(int32_t stream, std::string_view payload)> on_message;
    std::function<void(int32_t stream)> on_half_close;
    // A stream opened with on_stream_open is gone: finished, reset by the client, or its
    // message broke the rules (answered with the error already). Called once per stream.
    std::function<void(int32_t stream)> on_stream_gone;
  };

  // Bodies and stream messages beyond `body_limit` bytes are not kept.
  H2Connection(size_t body_limit, Handler handler, PingPolicy pings = {});
  ~H2Connection();
  H2Connection(const H2Connection&) = delete;
  H2Connection& operator=(const H2Connection&) = delete;

  // Bytes from the client. An error is a protocol violation: the caller drains the GOAWAY
  // nghttp2 queued and closes the connection.
  Status Feed(const char* data, size_t n);
  // Answers a unary request: with `framed` (one length-prefixed message) and grpc-status 0
  // when `st` is OK, otherwise with a trailers-only response carrying the error. Ignored when
  // the stream is gone (the client cancelled it or went away).
  void Respond(int32_t stream, const Status& st, std::string framed);
  // Answers a request that is not gRPC (the gateway, /health over HTTP/2) as plain HTTP:
  // `status` ("200"), lower-case `headers`, `body`, no trailers. Ignored when gone.
  void RespondHttp(int32_t stream, const std::string& status,
                   const std::vector<std::pair<std::string, std::string>>& headers,
                   std::string body);
  // A plain HTTP answer whose body follows in parts (a gateway stream over HTTP/2): `status`
  // and `headers` now, then Send's bytes as DATA as they come, then FinishHttp's END_STREAM (no
  // trailers). Ignored when gone.
  void StartHttp(int32_t stream, const std::string& status,
                 const std::vector<std::pair<std::string, std::string>>& headers);
  void FinishHttp(int32_t stream);
  // Reports the end of the (unary) stream `stream` through on_stream_gone, as a streaming
  // call's is: the caller serves it as a stream of its own (a gateway stream).
  void TrackGone(int32_t stream);
  // Resets the stream with PROTOCOL_ERROR (what grpc-go does with a request that is not gRPC).
  void Refuse(int32_t stream);
  // A stream's answer messages, then its end (grpc-status from `st`). Ignored when gone (then
  // `written` is told false at once). `written` is called on this connection's thread, never
  // from inside nghttp2: at the end of the Feed or Drain that sent (or dropped) the message.
  void Send(int32_t stream, std::string framed, Written written = nullptr);
  void Finish(int32_t stream, const Status& st);
  // Appends the bytes the session has to send, stopping once `out` holds `limit` bytes or more.
  Status Drain(std::string& out, size_t limit);
  // Starts a graceful close: GOAWAY naming the last stream accepted; streams in flight finish.
  void GoAway();
  // Sends a PING (the server's keepalive probe; any bytes from the client answer it).
  void Ping();
  // True when neither side will send anything more: the socket can be closed.
  bool Finished() const;
  size_t open_streams() const { return streams_.size(); }
  // Whether the HTTP/2 session still holds stream `stream` (open, or closed and retained).
  bool KnowsStream(int32_t stream) const;

 private:
  struct Outbound {
    std::string framed;
    Written written;  // may be empty
  };
  struct Stream {
    Request req;
    bool streaming = false;
    std::string inbound;            // a stream's bytes not yet forming a whole message
    std::deque<Outbound> outbound;  // framed messages not yet sent
    size_t sent = 0;                // of outbound.front()
    bool headers_submitted = false;
    bool deferred = false;  // the data source ran dry; resume when more is queued
    std::optional<Status> finish;
    bool plain = false;       // answered by RespondHttp or StartHttp
    bool track_gone = false;  // TrackGone: its end goes to on_stream_gone
  };
  friend struct H2Callbacks;

  void SubmitHeaders(int32_t stream, Stream& st);
  // Submits a plain HTTP answer's headers, its body to come from the stream's queue.
  void SubmitHttpHeaders(int32_t stream, Stream& st, const std::string& status,
                         const std::vector<std::pair<std::string, std::string>>& headers);
  void ResumeIfDeferred(int32_t stream, Stream& st);
  // A PING from the client, checked against the policy.
  void OnClientPing();
  // Tells the `written` callbacks collected during an nghttp2 call.
  void RunWritten();

  nghttp2_session* session_ = nullptr;
  size_t body_limit_;
  Handler handler_;
  std::unordered_map<int32_t, Stream> streams_;
  PingPolicy pings_;
  std::chrono::steady_clock::time_point last_ping_{};
  int ping_strikes_ = 0;
  bool sent_since_ping_ = false;  // headers or data sent since the client's last ping
  bool calm_down_ = false;        // too many pings: nothing more is read; closes once sent
  std::vector<std::pair<Written, bool>> written_;  // to tell after the nghttp2 call
};

}  // namespace etcdw::client_api
