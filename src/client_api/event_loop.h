// An event loop of the client API server (NativeRpcServer): one thread, its connections read,
// dispatched and answered on it, answers from other threads arriving through its Mailbox.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "etcdw/client_api/native_rpc_server.h"
#include "etcdw/member/etcd_server.h"
#include "gateway.h"
#include "h2_connection.h"
#include "http1_endpoints.h"
#include "mailbox.h"
#include "method_table.h"
#include "tls_session.h"

namespace etcdw::client_api {

// epoll tags: connections count up from 1; listener i is kListenerTag + i.
constexpr uint64_t kListenerTag = uint64_t{1} << 62;
constexpr uint64_t kMailboxTag = ~uint64_t{0};

struct EventLoop;

// What the event loops share, owned by the server that runs them (NativeRpcServer::Impl).
class LoopHost {
 public:
  LoopHost(member::EtcdServer& e, const NativeRpcOptions& o) : etcd(e), opts(o) {}
  virtual ~LoopHost() = default;

  // Whether Shutdown was asked for, and until when calls in flight may be answered.
  virtual bool StopRequested(std::chrono::steady_clock::time_point* deadline) = 0;
  // Accepts listener `index`'s waiting connections; called by the loop that listens (it
  // watches the listeners under tags kListenerTag + index).
  virtual void Accept(size_t index) = 0;
  // Draining: the listening loop stops watching the listeners, which close.
  virtual void StopAccepting(EventLoop& loop) = 0;
  // A connection the loops held (an adopted one, or one waiting in a mailbox) is closed.
  virtual void ConnectionClosed() = 0;
  // Called by each loop once a round: the listening loop resumes accepting once it may again.
  virtual void Tick(EventLoop& loop) = 0;

  member::EtcdServer& etcd;
  const NativeRpcOptions opts;
  MethodTable methods;  // filled before the loops start
};

// A client connection, owned by one loop.
struct Conn {
  // What the client speaks, known from its first bytes (SniffProtocol). Nothing is sent
  // before: HTTP/2's server preface would garble an HTTP/1.1 answer.
  enum class Mode { kSniffing, kHttp2, kHttp1 };
  uint64_t id = 0;
  int fd = -1;
  Mode mode = Mode::kSniffing;
  // The bytes read while sniffing; HTTP/1.x: those of requests not taken yet (pipelined ones).
  std::string first;
  bool metrics_only = false;  // a listen-metrics-url's: HTTP/1.1 only, its endpoints only
  // HTTP/1.x, kept alive as Go's server keeps connections: one request at a time is answered
  // (`http1_asked`), in order; the next is parsed once its answer is queued.
  bool http1_asked = false;
  bool http1_continued = false;  // "100 Continue" sent for the request being read
  Http1Framing http1_framing;    // how the answer being made is framed for its request
  bool http1_adapt = false;      // whether it is (Go writes its parse errors as they are)
  int32_t http1_seq = 0;         // the request's number: its gateway stream's answers carry it
  // HTTP/1.1: a streaming gateway call (/v3/watch ...), and whether its answer's head is sent.
  std::unique_ptr<GatewayStream> gateway;
  bool gateway_head_sent = false;
  bool close_after_out = false;  // HTTP/1.x: answered; close once `out` is sent
  // HTTP/1.x: the gateway stream's last message, when more than kHttp1StreamBacklog bytes were
  // waiting for the client: told written once they fall to that. Its producer (a watch) sends
  // no more until then, so a slow reader's watchers fall back to catching up from history
  // instead of the connection buffering without bound.
  Written http1_parked;
  std::unique_ptr<TlsSession> tls;  // https listeners' connections
  // Open streams' calls; told OnGone before the connection goes.
  std::unordered_map<int32_t, std::unique_ptr<StreamCall>> calls;
  // HTTP/2 over TLS: streaming gateway calls by stream, and whether their answer's head is sent.
  struct H2Gateway {
    std::unique_ptr<GatewayStream> stream;
    bool head_sent = false;
  };
  std::unordered_map<int32_t, H2Gateway> h2_gateways;
  std::unique_ptr<H2Connection> h2;
  std::string out;  // bytes for the socket; those before out_sent are sent
  size_t out_sent = 0;
  uint32_t events = 0;  // what epoll watches (EPOLLIN, EPOLLOUT)
  // Keepalive: when the client last sent anything, and our unanswered probe, if any.
  std::chrono::steady_clock::time_point last_read;
  std::chrono::steady_clock::time_point probe_sent{};
  // NativeRpcOptions::request_read_timeout: when the bytes the connection waits for (its
  // protocol, an HTTP/1.x request's head, the next of its body) must have come; unset (zero)
  // while it waits for none of them.
  std::chrono::steady_clock::time_point read_deadline{};
  // HTTP/2: bytes still to come before the protocol counts as shown (the preface and the
  // header of the first frame).
  size_t h2_opening_left = kHttp2Preface.size() + kHttp2FrameHeaderBytes;
};

// One event-loop thread: its connections, read, dispatched and answered on it.
struct EventLoop {
  LoopHost& host;
  int epfd = -1;
  std::shared_ptr<Mailbox> mail = std::make_shared<Mailbox>();
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  uint64_t next_id = 1;
  size_t in_flight = 0;      // dispatched, not yet answered
  std::vector<Conn*> dirty;  // connections with bytes to send
  bool draining = false;
  std::thread thread;

  explicit EventLoop(LoopHost& h) : host(h) {}
  ~EventLoop() {
    if (epfd >= 0) close(epfd);
  }

  Status Init();
  void Run();
  void Adopt(Mailbox::Accepted a);
  void OnReadable(Conn& c);
  // Takes `n` bytes the client sent; false when the connection was closed.
  bool Take(Conn& c, const char* data, size_t n);
  // Parses and answers the HTTP/1.x request `c.first` starts with, if one is complete and none
  // is being answered.
  void OnHttp1(Conn& c);
  // The answer to the HTTP/1.x request is queued: the connection closes after it, or takes the
  // next request (now when `take_next`, else at its next Flush).
  void Http1Answered(Conn& c, bool stays_open, bool take_next = true);
  // Whether the connection is not read for now: an HTTP/1.x client that sends requests ahead
  // of reading the answers is held back once kHttp1ReadAhead bytes of them wait.
  static bool ReadPaused(const Conn& c);
  // Opens the streaming gateway call `req` asks for, and writes its answers.
  void OnGatewayStream(Conn& c, const Http1Request& req);
  void OnGatewayStreamAnswer(Conn& c, Answered& a);
  void OnRequest(Conn& c, H2Connection::Request& req);
  void OnStreamOpen(Conn& c, H2Connection::Request& req);
  // An HTTP/2 request that is not gRPC: the HTTP handlers answer it.
  void OnHttp2Plain(Conn& c, H2Connection::Request& req);
  // A streaming gateway call over HTTP/2 (`req`, on stream `stream`), and its answers: the
  // lines grpc-gateway writes, as the DATA of a plain HTTP answer. False: `a` is not one's.
  void OnH2GatewayStream(Conn& c, int32_t stream, const Http1Request& req);
  bool OnH2GatewayAnswer(Conn& c, Answered& a);
  // Whether the request's content-type is gRPC's ("application/grpc", or followed by '+' or
  // ';'), as grpc-go 1.26 (etcd 3.4.23's) checks it; it resets other requests' streams with
  // PROTOCOL_ERROR.
  static bool IsGrpcContentType(const std::string& content_type);
  // Checks the headers of a gRPC request (IsGrpcContentType): its grpc-encoding; an error is
  // the answer.
  static Status CheckHeaders(const H2Connection::Request& req);
  void DeliverMail();
  // Answers DEADLINE_EXCEEDED for the unary calls whose grpc-timeout passed before their answer.
  void CheckDeadlines();
  // Milliseconds until the next call's deadline, at most `cap`.
  int MsUntilNextDeadline(int cap) const;
  // Unary calls with a deadline, not yet answered: the first of the deadline and the answer
  // takes `taken` and answers; the other does nothing.
  struct DeadlineCall {
    uint64_t conn;
    int32_t stream;
    std::shared_ptr<std::atomic<bool>> taken;
    CallStats stats;
  };
  std::multimap<std::chrono::steady_clock::time_point, DeadlineCall> deadlines;
  size_t deadlines_sweep_at = 4096;  // entries beyond which answered calls' are dropped early
  void Flush(Conn& c);
  void Close(uint64_t id);
  void StartDrain();
  // Every ConnectionCheckPeriod: probes connections silent for keepalive_time, closes those
  // silent keepalive_timeout after, and ends those past their read_deadline (ReadTimedOut).
  void CheckConnections();
  // Often enough for the keepalive's silence and probe timeout and the request read timeout to
  // be noticed within a quarter of their length, at most every second.
  std::chrono::milliseconds ConnectionCheckPeriod() const;
  std::chrono::steady_clock::time_point next_connection_check{};
  // A connection past its read_deadline: closed, or, speaking HTTP/1.x, answered 408 first.
  void ReadTimedOut(Conn& c);
  void MarkDirty(Conn& c) {
    if (std::find(dirty.begin(), dirty.end(), &c) == dirty.end()) dirty.push_back(&c);
  }
  void FlushDirty() {
    std::vector<uint64_t> ids;
    for (Conn* c : dirty) ids.push_back(c->id);
    dirty.clear();
    for (uint64_t id : ids) {
      auto it = conns.find(id);
      if (it != conns.end()) Flush(*it->second);
    }
  }
};

}  // namespace etcdw::client_api
