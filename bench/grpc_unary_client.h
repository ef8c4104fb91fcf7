// gRPC unary calls for the load generator: HTTP/2 (nghttp2) over plaintext loopback connections,
// every connection served by one event-loop thread.
//
// Why not the gRPC library's client: it spent 45-70 us of CPU per call on the same two cores as
// the server under test, more than our server's own work per put, so the figures measured the
// client. This client does only what a benchmark call needs (no deadlines, retries, name
// resolution or compression) and answers both servers alike: the same bytes on the wire as any
// gRPC client (request headers, length-prefixed messages, trailers with grpc-status).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "load.h"

namespace etcdw::bench {

class GrpcUnaryClient {
 public:
  // The answer to one call: ok with the response message's bytes, or the error (the gRPC status
  // and message, or what broke the connection).
  using Reply = std::function<void(bool ok, const std::string& error, std::string_view message)>;

  // One connection per endpoint ("ip:port"); nullptr with *error when one cannot be opened.
  static std::unique_ptr<GrpcUnaryClient> Connect(const std::vector<std::string>& endpoints,
                                                  std::string* error);
  // Stops the loop and closes the connections; replies still due are dropped, not run.
  ~GrpcUnaryClient();
  GrpcUnaryClient(const GrpcUnaryClient&) = delete;
  GrpcUnaryClient& operator=(const GrpcUnaryClient&) = delete;

  size_t connections() const { return conns_.size(); }

  // Calls `path` (e.g. "/etcdserverpb.KV/Put") with a serialized request on connection
  // `conn % connections()`. `reply` runs exactly once, on the loop thread (unless the client is
  // destroyed first). From any thread, including from a reply.
  void Call(size_t conn, const char* path, const std::string& request, Reply reply);

  // The same with protobuf messages: `*response` is filled before `done` runs.
  template <typename Request, typename Response>
  void Call(size_t conn, const char* path, const Request& request, Response* response, Done done) {
    Call(conn, path, request.SerializeAsString(),
         [response, done = std::move(done)](bool ok, const std::string& error,
                                            std::string_view message) {
           if (!ok) return done(false, error);
           if (!response->ParseFromArray(message.data(), static_cast<int>(message.size()))) {
             return done(false, "undecodable response");
           }
           done(true, std::string());
         });
  }

  struct Conn;  // one HTTP/2 connection (grpc_unary_client.cc)

 private:
  struct Submit {
    size_t conn;
    const char* path;
    std::string body;  // the length-prefixed request message
    Reply reply;
  };

  GrpcUnaryClient() = default;
  void Run();
  // On the loop thread: starts the call on its connection, or fails it after this round.
  void Start(Submit s);
  void Flush(Conn& c);
  void OnReadable(Conn& c);
  void Fail(Conn& c, const std::string& why);

  std::vector<std::unique_ptr<Conn>> conns_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Submit> submitted_;  // from other threads, under mu_
  // Replies to run after the current round: calls that failed at once (a dead connection) and
  // calls nghttp2 completed inside its callbacks (a reply may start the next call).
  struct Completion {
    Reply reply;
    bool ok = false;
    std::string error;
    std::string message;
  };
  std::vector<Completion> due_;
  void RunDue();
};

}  // namespace etcdw::bench
