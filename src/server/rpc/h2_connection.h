// One client connection's HTTP/2 session (libnghttp2), free of I/O: the caller feeds it the
// bytes read from the socket and writes what Drain returns. Requests are handed over once the
// client has sent all of them; answers are given per stream and may come in any order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "etcdw/common/status.h"

struct nghttp2_session;

namespace etcdw::server::rpc {

class H2Connection {
 public:
  struct Request {
    int32_t stream = 0;
    std::string path;          // ":path": /package.Service/Method
    std::string content_type;  // application/grpc[+proto]
    std::string encoding;      // grpc-encoding, empty when absent
    std::string body;          // the DATA frames, at most body_limit bytes
    bool body_over_limit = false;
  };
  // Called once per request, when its END_STREAM arrives, on the thread calling Feed.
  using OnRequest = std::function<void(Request&)>;

  // Bodies beyond `body_limit` bytes are not kept (body_over_limit is set instead).
  H2Connection(size_t body_limit, OnRequest on_request);
  ~H2Connection();
  H2Connection(const H2Connection&) = delete;
  H2Connection& operator=(const H2Connection&) = delete;

  // Bytes from the client. An error is a protocol violation: the caller drains the GOAWAY
  // nghttp2 queued and closes the connection.
  Status Feed(const char* data, size_t n);
  // Answers stream `stream`: with `framed` (one length-prefixed message) and grpc-status 0
  // when `st` is OK; otherwise with a trailers-only response carrying the error. Ignored when
  // the stream is gone (the client cancelled it or went away).
  void Respond(int32_t stream, const Status& st, std::string framed);
  // Appends the bytes the session has to send, stopping once `out` holds `limit` bytes or more.
  Status Drain(std::string& out, size_t limit);
  // Starts a graceful close: GOAWAY naming the last stream accepted; streams in flight finish.
  void GoAway();
  // True when neither side will send anything more: the socket can be closed.
  bool Finished() const;
  size_t open_streams() const { return streams_.size(); }

 private:
  struct Stream {
    Request req;
    std::string response;  // the framed message being sent
    size_t sent = 0;
  };
  friend struct H2Callbacks;

  nghttp2_session* session_ = nullptr;
  size_t body_limit_;
  OnRequest on_request_;
  std::unordered_map<int32_t, Stream> streams_;
};

}  // namespace etcdw::server::rpc
