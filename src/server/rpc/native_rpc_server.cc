#include "etcdw/server/native_rpc_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "etcdw/common/logging.h"
#include "etcdw/common/thread_name.h"
#include "grpc_wire.h"
#include "h2_connection.h"
#include "http1_endpoints.h"
#include "method_table.h"
#include "tls_session.h"

namespace etcdw::server {

using rpc::H2Connection;

// The loops' parts (named, not anonymous: NativeRpcServer::Impl holds them).
namespace native {

// An answer on its way back to the event loop: a unary call's, or a stream's message or end.
struct Answered {
  // kHttp1: a whole HTTP/1.1 response (`framed`), after which the connection closes.
  enum Kind { kUnary, kStreamMessage, kStreamEnd, kHttp1 };
  Kind kind = kUnary;
  uint64_t conn = 0;
  int32_t stream = 0;
  Status st;
  std::string framed;
  rpc::Written written;  // kStreamMessage: optional
};

// Where answers are posted, from any thread. Shared with every pending call, so an answer
// arriving after the server stopped lands here harmlessly.
// A loop's inbox, written from any thread: answers, and connections the acceptor hands over.
// Shared with every pending call, so an answer arriving after the server stopped lands here
// harmlessly.
struct Mailbox {
  // An accepted connection handed to a loop; `tls` set for an https listener's.
  struct Accepted {
    int fd = -1;
    std::shared_ptr<rpc::TlsContext> tls;
  };
  struct Contents {
    std::vector<Answered> answers;
    std::vector<Accepted> connections;
  };
  std::mutex mu;
  Contents in;  // under mu
  int efd = -1;
  std::thread::id loop_thread;

  ~Mailbox() {
    if (efd >= 0) close(efd);
  }
  void Wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(efd, &one, sizeof one);
  }
  void Post(Answered a) {
    bool wake;
    {
      std::lock_guard lock(mu);
      // One wake-up per batch; and the loop looks after every dispatch, so answers given on
      // its own thread need none.
      wake =
          in.answers.empty() && in.connections.empty() && std::this_thread::get_id() != loop_thread;
      in.answers.push_back(std::move(a));
    }
    if (wake) Wake();
  }
  void PostConnection(Accepted a) {
    {
      std::lock_guard lock(mu);
      in.connections.push_back(std::move(a));
    }
    Wake();
  }
  // Whether anything waits: answers the loop's own thread posted while it was not dispatching
  // (a `written` callback in a flush) did not wake it.
  bool Pending() {
    std::lock_guard lock(mu);
    return !in.answers.empty() || !in.connections.empty();
  }
  Contents Take() {
    Contents out;
    std::lock_guard lock(mu);
    std::swap(out, in);
    return out;
  }
};

// A stream's answers, posted to its loop's mailbox.
class MailboxSink final : public rpc::StreamSink {
 public:
  MailboxSink(std::shared_ptr<Mailbox> mail, uint64_t conn, int32_t stream)
      : mail_(std::move(mail)), conn_(conn), stream_(stream) {}
  void Send(std::string framed, rpc::Written written) override {
    mail_->Post({Answered::kStreamMessage, conn_, stream_, Status::Ok(), std::move(framed),
                 std::move(written)});
  }
  void Finish(const Status& st) override {
    mail_->Post({Answered::kStreamEnd, conn_, stream_, st, {}});
  }

 private:
  std::shared_ptr<Mailbox> mail_;
  uint64_t conn_;
  int32_t stream_;
};

struct Conn {
  // What the client speaks, known from its first bytes (rpc::SniffProtocol). Nothing is sent
  // before: HTTP/2's server preface would garble an HTTP/1.1 answer.
  enum class Mode { kSniffing, kHttp2, kHttp1 };
  uint64_t id = 0;
  int fd = -1;
  Mode mode = Mode::kSniffing;
  std::string first;             // the bytes read while sniffing; HTTP/1.1: the request so far
  bool http1_asked = false;      // HTTP/1.1: its one request is being answered
  bool close_after_out = false;  // HTTP/1.1: answered; close once `out` is sent
  std::unique_ptr<rpc::TlsSession> tls;  // https listeners' connections
  // Open streams' calls; told OnGone before the connection goes.
  std::unordered_map<int32_t, std::unique_ptr<rpc::StreamCall>> calls;
  std::unique_ptr<H2Connection> h2;
  std::string out;  // bytes for the socket; those before out_sent are sent
  size_t out_sent = 0;
  bool waiting_out = false;  // registered for EPOLLOUT
  // Keepalive: when the client last sent anything, and our unanswered probe, if any.
  std::chrono::steady_clock::time_point last_read;
  std::chrono::steady_clock::time_point probe_sent{};
};

}  // namespace native

namespace {

using native::Answered;
using native::Conn;
using native::Mailbox;

// epoll tags: connections count up from 1; listener i is kListenerTag + i.
constexpr uint64_t kListenerTag = uint64_t{1} << 62;
constexpr uint64_t kMailboxTag = ~uint64_t{0};

// Moves bytes between a connection's socket and `buf`, through TLS when it has it: > 0 bytes
// moved, kWouldBlock, or kClosed (the peer left, or the connection failed).
constexpr ssize_t kWouldBlock = rpc::TlsSession::kWouldBlock;
constexpr ssize_t kClosed = rpc::TlsSession::kClosed;

ssize_t ReadSome(native::Conn& c, char* buf, size_t n) {
  if (c.tls) return c.tls->Read(buf, n);
  ssize_t r = recv(c.fd, buf, n, 0);
  if (r > 0) return r;
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return kWouldBlock;
  return kClosed;
}

ssize_t WriteSome(native::Conn& c, const char* buf, size_t n) {
  if (c.tls) return c.tls->Write(buf, n);
  ssize_t r = send(c.fd, buf, n, MSG_NOSIGNAL);
  if (r > 0) return r;
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return kWouldBlock;
  return kClosed;
}

Status Errno(const std::string& what) {
  return Status(Code::kUnavailable, what + ": " + std::strerror(errno));
}

// grpc-go's answer for a path ("/etcdserverpb.KV/Put") no method has.
Status UnknownMethod(const rpc::MethodTable& methods, const std::string& path) {
  const size_t slash = path.find('/', 1);
  if (path.empty() || path[0] != '/' || slash == std::string::npos) {
    return Status(Code::kUnimplemented, "malformed method name: \"" + path + "\"");
  }
  const std::string service = path.substr(1, slash - 1);
  if (!methods.HasService(service)) {
    return Status(Code::kUnimplemented, "unknown service " + service);
  }
  return Status(Code::kUnimplemented,
                "unknown method " + path.substr(slash + 1) + " for service " + service);
}

}  // namespace

namespace native {

// One event-loop thread: its connections, read, dispatched and answered on it.
struct EventLoop {
  NativeRpcServer::Impl& server;
  int epfd = -1;
  std::shared_ptr<Mailbox> mail = std::make_shared<Mailbox>();
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  uint64_t next_id = 1;
  size_t in_flight = 0;      // dispatched, not yet answered
  std::vector<Conn*> dirty;  // connections with bytes to send
  bool draining = false;
  std::thread thread;

  explicit EventLoop(NativeRpcServer::Impl& s) : server(s) {}
  ~EventLoop() {
    if (epfd >= 0) close(epfd);
  }

  Status Init();
  void Run();
  void Adopt(Mailbox::Accepted a);
  void OnReadable(Conn& c);
  // Takes `n` bytes the client sent; false when the connection was closed.
  bool Take(Conn& c, const char* data, size_t n);
  void OnHttp1(Conn& c);
  void OnRequest(Conn& c, H2Connection::Request& req);
  void OnStreamOpen(Conn& c, H2Connection::Request& req);
  // Checks every request's headers; an error is the answer.
  static Status CheckHeaders(const H2Connection::Request& req);
  void DeliverMail();
  void Flush(Conn& c);
  void Close(uint64_t id);
  void StartDrain();
  // Probes connections silent for keepalive_time; closes those silent keepalive_timeout after.
  void CheckKeepalive();
  // How often keepalive is checked: often enough for both the silence and the probe's timeout
  // to be noticed within a quarter of their length, at most every second.
  std::chrono::milliseconds KeepalivePeriod() const;
  std::chrono::steady_clock::time_point next_keepalive_check{};
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

}  // namespace native

using native::EventLoop;

struct NativeRpcServer::Impl {
  // A listen-client-url's socket, accepted on loops[0].
  struct Listener {
    int fd = -1;
    std::shared_ptr<rpc::TlsContext> tls;  // https URLs
  };
  EtcdServer& server;
  NativeRpcOptions opts;
  rpc::MethodTable methods;
  std::vector<Listener> listeners;  // in opts.urls order
  std::vector<int> ports;
  std::vector<std::unique_ptr<EventLoop>> loops;
  size_t next_loop = 0;  // loops[0]'s thread only

  std::mutex stop_mu;
  bool stop_requested = false;                           // under stop_mu
  std::chrono::steady_clock::time_point drain_deadline;  // under stop_mu

  Impl(EtcdServer& s, const NativeRpcOptions& o) : server(s), opts(o) {}
  ~Impl() { CloseListeners(); }
  Status Listen(const common::Url& url);
  void Accept(size_t listener);
  void CloseListeners() {
    for (Listener& l : listeners) {
      if (l.fd >= 0) close(l.fd);
      l.fd = -1;
    }
  }
  bool StopRequested(std::chrono::steady_clock::time_point* deadline) {
    std::lock_guard lock(stop_mu);
    *deadline = drain_deadline;
    return stop_requested;
  }
};

// Binds `url` as Go's net.Listen does: the first address its host resolves to.
Status NativeRpcServer::Impl::Listen(const common::Url& url) {
  auto fail = [&](const std::string& why) {
    return Unavailable("listen-client-urls: cannot listen on " + url.ToString() + ": " + why);
  };
  Listener l;
  if (url.tls()) {
    ETCDW_ASSIGN_OR_RETURN(l.tls, rpc::TlsContext::ForServer(opts.tls));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(url.port);
  if (int rc =
          getaddrinfo(url.host.empty() ? nullptr : url.host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return fail(gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> addrs(found, freeaddrinfo);
  l.fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l.fd < 0) return fail(std::strerror(errno));
  listeners.push_back(l);  // closed by the destructor from here on
  const int one = 1;
  setsockopt(l.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l.fd, found->ai_addr, found->ai_addrlen) != 0 || listen(l.fd, 1024) != 0) {
    return fail(std::strerror(errno));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(l.fd, reinterpret_cast<sockaddr*>(&bound), &len);
  ports.push_back(ntohs(bound.ss_family == AF_INET6
                            ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerTag + listeners.size() - 1;
  epoll_ctl(loops[0]->epfd, EPOLL_CTL_ADD, l.fd, &ev);
  return Status::Ok();
}

// Connections are spread over the loops round-robin; a loop adopts the ones handed to it.
void NativeRpcServer::Impl::Accept(size_t listener) {
  while (listeners[listener].fd >= 0) {
    int fd = accept4(listeners[listener].fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a failed accept (the listener stays)
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    EventLoop& to = *loops[next_loop++ % loops.size()];
    Mailbox::Accepted a{fd, listeners[listener].tls};
    if (&to == loops[0].get()) {
      to.Adopt(std::move(a));
    } else {
      to.mail->PostConnection(std::move(a));
    }
  }
}

Status EventLoop::Init() {
  epfd = epoll_create1(EPOLL_CLOEXEC);
  mail->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epfd < 0 || mail->efd < 0) return Errno("native rpc: epoll/eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kMailboxTag;
  epoll_ctl(epfd, EPOLL_CTL_ADD, mail->efd, &ev);
  return Status::Ok();
}

void EventLoop::Adopt(Mailbox::Accepted a) {
  if (draining) {
    close(a.fd);
    return;
  }
  auto c = std::make_unique<Conn>();
  c->id = next_id++;
  c->fd = a.fd;
  if (a.tls) c->tls = std::make_unique<rpc::TlsSession>(a.tls, a.fd);
  Conn* raw = c.get();
  H2Connection::Handler h;
  h.is_stream = [this](const std::string& path) {
    return server.methods.FindStream(path) != nullptr;
  };
  h.on_request = [this, raw](H2Connection::Request& req) { OnRequest(*raw, req); };
  h.on_stream_open = [this, raw](H2Connection::Request& req) { OnStreamOpen(*raw, req); };
  h.on_message = [raw](int32_t stream, std::string_view payload) {
    if (auto it = raw->calls.find(stream); it != raw->calls.end()) it->second->OnMessage(payload);
  };
  h.on_half_close = [raw](int32_t stream) {
    if (auto it = raw->calls.find(stream); it != raw->calls.end()) it->second->OnHalfClose();
  };
  h.on_stream_gone = [raw](int32_t stream) {
    auto it = raw->calls.find(stream);
    if (it == raw->calls.end()) return;
    std::unique_ptr<rpc::StreamCall> call = std::move(it->second);
    raw->calls.erase(it);
    call->OnGone();
  };
  rpc::PingPolicy pings;
  pings.min_interval = server.opts.keepalive_min_time;
  c->h2 = std::make_unique<H2Connection>(
      rpc::kMessagePrefixBytes + server.opts.max_request_message_bytes, std::move(h), pings);
  c->last_read = std::chrono::steady_clock::now();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = c->id;
  epoll_ctl(epfd, EPOLL_CTL_ADD, a.fd, &ev);
  conns.emplace(c->id, std::move(c));
}

void EventLoop::OnRequest(Conn& c, H2Connection::Request& req) {
  auto answer_now = [&](const Status& st) {
    c.h2->Respond(req.stream, st, {});
    MarkDirty(c);
  };
  if (Status st = CheckHeaders(req); !st.ok()) return answer_now(st);
  const rpc::MethodTable::Unary* method = server.methods.Find(req.path);
  if (!method) return answer_now(UnknownMethod(server.methods, req.path));
  auto payload = rpc::SingleMessage(req.body, server.opts.max_request_message_bytes);
  if (!payload.ok()) return answer_now(payload.status());
  if (req.body_over_limit) {  // a small first message, and more after it
    return answer_now(
        Status(Code::kInternal, "grpc: a unary request carried more than one message"));
  }
  ++in_flight;
  (*method)(*payload,
            [mail = mail, conn = c.id, stream = req.stream](const Status& st, std::string framed) {
              mail->Post({Answered::kUnary, conn, stream, st, std::move(framed)});
            });
}

Status EventLoop::CheckHeaders(const H2Connection::Request& req) {
  if (req.content_type.rfind("application/grpc", 0) != 0) {
    return Status(Code::kInternal,
                  "invalid gRPC request content-type \"" + req.content_type + "\"");
  }
  if (!req.encoding.empty() && req.encoding != "identity") {
    return rpc::UnsupportedEncoding(req.encoding);
  }
  return Status::Ok();
}

void EventLoop::OnStreamOpen(Conn& c, H2Connection::Request& req) {
  MarkDirty(c);
  if (Status st = CheckHeaders(req); !st.ok()) return c.h2->Finish(req.stream, st);
  const rpc::MethodTable::OpenStream* open = server.methods.FindStream(req.path);
  auto sink = std::make_shared<MailboxSink>(mail, c.id, req.stream);
  if (auto call = (*open)(req, sink)) c.calls[req.stream] = std::move(call);
}

void EventLoop::DeliverMail() {
  Mailbox::Contents got = mail->Take();
  for (Mailbox::Accepted& a : got.connections) Adopt(std::move(a));
  for (Answered& a : got.answers) {
    if (a.kind == Answered::kUnary || a.kind == Answered::kHttp1) --in_flight;
    auto it = conns.find(a.conn);
    if (it == conns.end()) {  // the client went away
      if (a.written) a.written(false);
      continue;
    }
    H2Connection& h2 = *it->second->h2;
    switch (a.kind) {
      case Answered::kUnary:
        h2.Respond(a.stream, a.st, std::move(a.framed));
        break;
      case Answered::kStreamMessage:
        h2.Send(a.stream, std::move(a.framed), std::move(a.written));
        break;
      case Answered::kStreamEnd:
        h2.Finish(a.stream, a.st);
        break;
      case Answered::kHttp1:
        it->second->out.append(a.framed);
        it->second->close_after_out = true;
        break;
    }
    MarkDirty(*it->second);
  }
}

void EventLoop::OnReadable(Conn& c) {
  char buf[64 * 1024];
  const uint64_t id = c.id;
  while (true) {
    ssize_t n = ReadSome(c, buf, sizeof buf);
    if (n == kWouldBlock) break;
    c.last_read = std::chrono::steady_clock::now();
    c.probe_sent = {};
    if (n == kClosed) {
      if (c.tls && !c.tls->error().empty()) {
        log::Debug("native rpc: TLS connection failed", {log::F("reason", c.tls->error())});
      }
      return Close(id);
    }
    if (!Take(c, buf, static_cast<size_t>(n))) return;
    // A short read emptied the socket; TLS hands over one record at a time, so it reads on
    // until it would block.
    if (!c.tls && static_cast<size_t>(n) < sizeof buf) break;
  }
  MarkDirty(c);
}

bool EventLoop::Take(Conn& c, const char* data, size_t n) {
  if (c.mode == Conn::Mode::kSniffing) {
    c.first.append(data, n);
    auto protocol = rpc::SniffProtocol(c.first);
    if (!protocol) return true;
    if (*protocol == rpc::Protocol::kHttp1) {
      c.mode = Conn::Mode::kHttp1;
      OnHttp1(c);
      return true;
    }
    c.mode = Conn::Mode::kHttp2;
    std::string first = std::move(c.first);
    c.first.clear();
    return Take(c, first.data(), first.size());
  }
  if (c.mode == Conn::Mode::kHttp1) {
    if (!c.http1_asked) c.first.append(data, n);
    OnHttp1(c);
    return true;
  }
  if (Status st = c.h2->Feed(data, n); !st.ok()) {
    log::Debug("native rpc: closing a connection", {log::F("reason", st.message())});
    Flush(c);  // nghttp2's GOAWAY, best effort
    Close(c.id);
    return false;
  }
  return true;
}

void EventLoop::OnHttp1(Conn& c) {
  if (c.http1_asked) return;  // one request per connection; what follows is ignored
  const bool whole = rpc::HasHttp1Head(c.first);
  if (!whole && c.first.size() <= rpc::kMaxHttp1HeadBytes) return;
  c.http1_asked = true;
  ++in_flight;
  auto answer = [mail = mail, conn = c.id](std::string response) {
    mail->Post({Answered::kHttp1, conn, 0, Status::Ok(), std::move(response)});
  };
  if (!whole) {
    return answer(rpc::HeadTooLarge());
  }
  rpc::AnswerHttp1(server.server, c.first, std::move(answer));
}

// Bytes taken from a session per send: everything a round of answers produces fits, and a
// connection whose client reads slowly holds at most this much beyond its flow-control windows.
constexpr size_t kSendChunk = 256 << 10;

void EventLoop::Flush(Conn& c) {
  while (true) {
    if (c.out_sent == c.out.size()) {
      c.out.clear();
      c.out_sent = 0;
      // HTTP/2 only: nothing is sent before the client's protocol is known, and an HTTP/1.1
      // connection sends only its answer.
      if (c.mode == Conn::Mode::kHttp2) {
        if (Status st = c.h2->Drain(c.out, kSendChunk); !st.ok()) return Close(c.id);
      }
      if (c.out.empty()) break;
    }
    ssize_t n = WriteSome(c, c.out.data() + c.out_sent, c.out.size() - c.out_sent);
    if (n == kWouldBlock) break;
    if (n == kClosed) return Close(c.id);
    c.out_sent += static_cast<size_t>(n);
  }
  // Waiting for the socket to take bytes; a TLS handshake may instead wait for the client's
  // (the connection is always watched for reading, which flushes again).
  const bool want_out = c.out_sent < c.out.size() && (!c.tls || c.tls->wants_write());
  const bool finished =
      c.mode == Conn::Mode::kHttp2 ? c.h2->Finished() : c.close_after_out && c.out.empty();
  if (!want_out && finished) return Close(c.id);
  if (want_out != c.waiting_out) {
    c.waiting_out = want_out;
    epoll_event ev{};
    ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0u);
    ev.data.u64 = c.id;
    epoll_ctl(epfd, EPOLL_CTL_MOD, c.fd, &ev);
  }
}

void EventLoop::Close(uint64_t id) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  for (auto& [stream, call] : it->second->calls) call->OnGone();
  epoll_ctl(epfd, EPOLL_CTL_DEL, it->second->fd, nullptr);
  close(it->second->fd);
  dirty.erase(std::remove(dirty.begin(), dirty.end(), it->second.get()), dirty.end());
  conns.erase(it);
}

std::chrono::milliseconds EventLoop::KeepalivePeriod() const {
  const auto shortest = std::min(server.opts.keepalive_time, server.opts.keepalive_timeout);
  return std::clamp<std::chrono::milliseconds>(shortest / 4, std::chrono::milliseconds(1),
                                               std::chrono::seconds(1));
}

void EventLoop::CheckKeepalive() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_keepalive_check) return;
  next_keepalive_check = now + KeepalivePeriod();
  std::vector<uint64_t> dead;
  for (auto& [id, c] : conns) {
    if (c->probe_sent != std::chrono::steady_clock::time_point{}) {
      if (now - c->probe_sent >= server.opts.keepalive_timeout) dead.push_back(id);
    } else if (now - c->last_read >= server.opts.keepalive_time) {
      c->h2->Ping();
      c->probe_sent = now;
      MarkDirty(*c);
    }
  }
  for (uint64_t id : dead) {
    log::Debug("native rpc: closing a connection that did not answer a keepalive ping");
    Close(id);
  }
}

void EventLoop::StartDrain() {
  draining = true;
  if (this == server.loops[0].get()) {
    for (auto& l : server.listeners) {
      if (l.fd >= 0) epoll_ctl(epfd, EPOLL_CTL_DEL, l.fd, nullptr);
    }
    server.CloseListeners();
  }
  for (auto& [id, c] : conns) {
    c->h2->GoAway();
    MarkDirty(*c);
  }
  FlushDirty();
}

void EventLoop::Run() {
  mail->loop_thread = std::this_thread::get_id();
  epoll_event events[128];
  while (true) {
    std::chrono::steady_clock::time_point deadline;
    if (server.StopRequested(&deadline)) {
      if (!draining) StartDrain();
      if (in_flight == 0 || std::chrono::steady_clock::now() >= deadline) break;
    }
    const int wait_ms = draining          ? 10
                        : mail->Pending() ? 0
                                          : static_cast<int>(KeepalivePeriod().count());
    int n = epoll_wait(epfd, events, 128, wait_ms);
    // A request of this batch that needs the Raft step (a write on a single member) gets it on
    // this thread once the answers ready now are sent, if it is the loop's only call in flight
    // and the Raft thread is not stepping. With more calls in flight the Raft thread batches.
    RaftNode::CallerStep raft_step(server.server.node());
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kMailboxTag) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = read(mail->efd, &count, sizeof count);
      } else if (tag >= kListenerTag) {
        server.Accept(tag - kListenerTag);
      } else if (auto it = conns.find(tag); it != conns.end()) {
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          OnReadable(*it->second);
        } else if (events[i].events & EPOLLOUT) {
          MarkDirty(*it->second);
        }
      }
    }
    DeliverMail();
    CheckKeepalive();
    FlushDirty();
    if (raft_step.Finish(/*may_step=*/in_flight <= 1)) {
      DeliverMail();  // the step's answers
      FlushDirty();
    }
  }
  std::vector<uint64_t> ids;
  for (auto& [id, c] : conns) ids.push_back(id);
  for (uint64_t id : ids) Close(id);
  // Messages still on their way are dropped; their producers are told so (and may post their
  // streams' ends, dropped in turn).
  while (mail->Pending()) {
    Mailbox::Contents left = mail->Take();
    for (Mailbox::Accepted& a : left.connections) close(a.fd);
    for (Answered& a : left.answers) {
      if (a.written) a.written(false);
    }
  }
}

Result<std::unique_ptr<NativeRpcServer>> NativeRpcServer::Start(EtcdServer& server,
                                                                const NativeRpcOptions& opts) {
  std::unique_ptr<NativeRpcServer> s(new NativeRpcServer());
  s->impl_ = std::make_unique<Impl>(server, opts);
  Impl& impl = *s->impl_;
  rpc::AddKvMethods(impl.methods, server);
  rpc::AddLeaseMethods(impl.methods, server);
  rpc::AddClusterMethods(impl.methods, server);
  rpc::AddMaintenanceMethods(impl.methods, server);
  rpc::AddWatchMethods(impl.methods, server);
  const int threads = opts.threads > 0 ? opts.threads : 1;
  for (int i = 0; i < threads; ++i) {
    impl.loops.push_back(std::make_unique<EventLoop>(impl));
    ETCDW_RETURN_IF_ERROR(impl.loops.back()->Init());
  }
  for (const common::Url& url : opts.urls) ETCDW_RETURN_IF_ERROR(impl.Listen(url));
  for (auto& loop : impl.loops) {
    EventLoop* l = loop.get();
    l->thread = common::NamedThread("rpc-loop", [l] { l->Run(); });
  }
  for (size_t i = 0; i < opts.urls.size(); ++i) {
    log::Info("serving client requests",
              {log::F("address", opts.urls[i].ToString()), log::F("port", impl.ports[i])});
  }
  return s;
}

void NativeRpcServer::Shutdown(std::chrono::milliseconds grace) {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->stop_mu);
    if (impl_->stop_requested) return;
    impl_->stop_requested = true;
    impl_->drain_deadline = std::chrono::steady_clock::now() + grace;
  }
  for (auto& loop : impl_->loops) loop->mail->Wake();
  for (auto& loop : impl_->loops) {
    if (loop->thread.joinable()) loop->thread.join();
  }
}

NativeRpcServer::~NativeRpcServer() { Shutdown(std::chrono::milliseconds(0)); }

const std::vector<int>& NativeRpcServer::ports() const { return impl_->ports; }

NativeRpcOptions NativeRpcOptions::FromConfig(const common::EtcdConfig& cfg) {
  NativeRpcOptions o;
  o.urls = cfg.listen_client_urls;
  o.tls = cfg.client_tls;
  o.max_request_message_bytes = cfg.max_request_bytes + 512 * 1024;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

}  // namespace etcdw::server
