#include "etcdw/client_api/native_rpc_server.h"

#include <absl/base/thread_annotations.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "etcdw/common/logging.h"
#include "etcdw/common/open_files.h"
#include "etcdw/common/thread_name.h"
#include "event_loop.h"
#include "method_table.h"
#include "tls_session.h"

namespace etcdw::client_api {

// The loops' host: the listeners (watched by loops[0], which hands connections out
// round-robin), the loops, and the stop request.
struct NativeRpcServer::Impl final : LoopHost {
  // A listen-client-url's socket.
  struct Listener {
    int fd = -1;
    std::shared_ptr<TlsContext> tls;  // https URLs
    bool metrics_only = false;        // a listen-metrics-url
  };
  std::vector<Listener> listeners;  // opts.urls, then opts.metrics_urls
  std::vector<int> ports;
  std::vector<std::unique_ptr<EventLoop>> loops;
  size_t next_loop = 0;  // loops[0]'s thread only

  // Connections open (accepted, not yet closed), at most `max_connections`. At the limit, or
  // out of file descriptors, loops[0] stops watching the listeners until `resume_at` has
  // passed and there is room; a connection closing while it waits for room wakes it.
  const size_t max_connections;
  std::atomic<size_t> open_connections{0};
  std::atomic<bool> waiting_for_room{false};
  bool accept_paused = false;  // loops[0]'s thread only, as resume_at
  std::chrono::steady_clock::time_point resume_at{};

  std::mutex stop_mu;
  bool stop_requested ABSL_GUARDED_BY(stop_mu) = false;
  std::chrono::steady_clock::time_point drain_deadline ABSL_GUARDED_BY(stop_mu);

  Impl(member::EtcdServer& s, const NativeRpcOptions& o)
      : LoopHost(s, o), max_connections(o.ConnectionLimit()) {}
  ~Impl() override { CloseListeners(); }
  Status Listen(const common::Url& url, bool metrics_only);
  void CloseListeners() {
    for (Listener& l : listeners) {
      if (l.fd >= 0) close(l.fd);
      l.fd = -1;
    }
  }

  bool StopRequested(std::chrono::steady_clock::time_point* deadline) override {
    std::lock_guard lock(stop_mu);
    *deadline = drain_deadline;
    return stop_requested;
  }
  void Accept(size_t listener) override;
  void ConnectionClosed() override {
    open_connections.fetch_sub(1);
    if (waiting_for_room.load()) loops[0]->mail->Wake();
  }
  // Stops or starts watching the listeners (loops[0]'s thread).
  void WatchListeners(bool watch);
  void PauseAccepting(bool for_room, std::chrono::milliseconds at_least);
  void Tick(EventLoop& loop) override;
  void StopAccepting(EventLoop& loop) override {
    if (&loop != loops[0].get()) return;
    for (const Listener& l : listeners) {
      if (l.fd >= 0) epoll_ctl(loop.epfd, EPOLL_CTL_DEL, l.fd, nullptr);
    }
    CloseListeners();
  }
};

// Binds `url` as Go's net.Listen does: the first address its host resolves to.
Status NativeRpcServer::Impl::Listen(const common::Url& url, bool metrics_only) {
  auto fail = [&](const std::string& why) {
    return Unavailable(std::string(metrics_only ? "listen-metrics-urls" : "listen-client-urls") +
                       ": cannot listen on " + url.ToString() + ": " + why);
  };
  Listener l;
  l.metrics_only = metrics_only;
  if (url.tls()) {
    ETCDW_ASSIGN_OR_RETURN(l.tls, TlsContext::ForServer(opts.tls, /*http2=*/!metrics_only));
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

void NativeRpcServer::Impl::WatchListeners(bool watch) {
  for (size_t i = 0; i < listeners.size(); ++i) {
    if (listeners[i].fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerTag + i;
    epoll_ctl(loops[0]->epfd, watch ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, listeners[i].fd, &ev);
  }
}

void NativeRpcServer::Impl::PauseAccepting(bool for_room, std::chrono::milliseconds at_least) {
  if (accept_paused) return;
  accept_paused = true;
  resume_at = std::chrono::steady_clock::now() + at_least;
  waiting_for_room.store(for_room);
  WatchListeners(false);
  if (for_room) {
    log::Warn("client connection limit reached: new connections wait until one closes",
              {log::F("max-connections", max_connections)});
  } else {
    log::Warn("out of file descriptors: not accepting client connections for now",
              {log::F("open-connections", open_connections.load())});
  }
}

void NativeRpcServer::Impl::Tick(EventLoop& loop) {
  if (!accept_paused || &loop != loops[0].get() || loop.draining) return;
  if (open_connections.load() >= max_connections) return;
  if (std::chrono::steady_clock::now() < resume_at) return;
  accept_paused = false;
  waiting_for_room.store(false);
  WatchListeners(true);  // level-triggered: clients waiting in the backlog are accepted at once
}

// Connections are spread over the loops round-robin; a loop adopts the ones handed to it.
void NativeRpcServer::Impl::Accept(size_t listener) {
  while (listeners[listener].fd >= 0) {
    if (open_connections.load() >= max_connections) {
      return PauseAccepting(/*for_room=*/true, std::chrono::milliseconds(0));
    }
    int fd = accept4(listeners[listener].fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors (or kernel memory), the listener stays readable: watching it would
      // spin. Anything else (EAGAIN, a client gone before it was accepted) leaves it watched.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        PauseAccepting(/*for_room=*/false, std::chrono::milliseconds(100));
      }
      return;
    }
    open_connections.fetch_add(1);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    EventLoop& to = *loops[next_loop++ % loops.size()];
    Mailbox::Accepted a{fd, listeners[listener].tls, listeners[listener].metrics_only};
    if (&to == loops[0].get()) {
      to.Adopt(std::move(a));
    } else {
      to.mail->PostConnection(std::move(a));
    }
  }
}

Result<std::unique_ptr<NativeRpcServer>> NativeRpcServer::Start(member::EtcdServer& server,
                                                                const NativeRpcOptions& opts) {
  std::unique_ptr<NativeRpcServer> s(new NativeRpcServer());
  s->impl_ = std::make_unique<Impl>(server, opts);
  Impl& impl = *s->impl_;
  AddKvMethods(impl.methods, server);
  AddLeaseMethods(impl.methods, server);
  AddClusterMethods(impl.methods, server);
  AddMaintenanceMethods(impl.methods, server);
  AddWatchMethods(impl.methods, server);
  AddAuthMethods(impl.methods, server);
  AddHealthMethods(impl.methods, server);
  const int threads = opts.threads > 0 ? opts.threads : 1;
  for (int i = 0; i < threads; ++i) {
    impl.loops.push_back(std::make_unique<EventLoop>(impl));
    ETCDW_RETURN_IF_ERROR(impl.loops.back()->Init());
  }
  for (const common::Url& url : opts.urls) ETCDW_RETURN_IF_ERROR(impl.Listen(url, false));
  for (const common::Url& url : opts.metrics_urls) ETCDW_RETURN_IF_ERROR(impl.Listen(url, true));
  for (auto& loop : impl.loops) {
    EventLoop* l = loop.get();
    l->thread = common::NamedThread("rpc-loop", [l] { l->Run(); });
  }
  for (size_t i = 0; i < opts.urls.size(); ++i) {
    log::Info("serving client requests",
              {log::F("address", opts.urls[i].ToString()), log::F("port", impl.ports[i])});
  }
  for (size_t i = 0; i < opts.metrics_urls.size(); ++i) {
    log::Info("serving metrics", {log::F("address", opts.metrics_urls[i].ToString()),
                                  log::F("port", impl.ports[opts.urls.size() + i])});
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

size_t NativeRpcOptions::ConnectionLimit() const {
  if (max_connections > 0) return max_connections;
  const uint64_t files = common::OpenFileLimit();
  if (files == 0) return size_t{1} << 16;  // unknown
  const uint64_t reserve = std::max<uint64_t>(512, files / 8);
  return files > 2 * reserve ? static_cast<size_t>(files - reserve)
                             : static_cast<size_t>(files / 2);
}

NativeRpcOptions NativeRpcOptions::FromConfig(const common::EtcdConfig& cfg) {
  NativeRpcOptions o;
  o.urls = cfg.listen_client_urls;
  o.metrics_urls = cfg.listen_metrics_urls;
  o.tls = cfg.client_tls;
  o.max_request_message_bytes = cfg.max_request_bytes + (size_t{512} << 10);
  o.enable_grpc_gateway = cfg.enable_grpc_gateway;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // etcd hands gRPC only the values > 0; gRPC's own defaults stand for the others.
  o.keepalive_min_time = cfg.grpc_keepalive_min_time.count() > 0 ? cfg.grpc_keepalive_min_time
                                                                 : std::chrono::minutes(5);
  if (cfg.grpc_keepalive_interval.count() > 0 && cfg.grpc_keepalive_timeout.count() > 0) {
    o.keepalive_time = cfg.grpc_keepalive_interval;
    o.keepalive_timeout = cfg.grpc_keepalive_timeout;
  }
  return o;
}

}  // namespace etcdw::client_api
