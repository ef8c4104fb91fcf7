#include "grpc_unary_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_set>

namespace etcdw::bench {

namespace {

// The gRPC message prefix: a compressed flag and a big-endian length.
constexpr size_t kPrefixBytes = 5;

std::string Framed(const std::string& message) {
  std::string out(kPrefixBytes, '\0');
  const auto n = static_cast<uint32_t>(message.size());
  for (int i = 0; i < 4; ++i) out[1 + i] = static_cast<char>(n >> (24 - 8 * i));
  return out + message;
}

// "127.0.0.1:2379" -> a connected, non-blocking TCP socket, or -1 with *error.
int Dial(const std::string& endpoint, std::string* error) {
  const size_t colon = endpoint.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(endpoint.c_str() + colon + 1)));
  if (colon == std::string::npos ||
      inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    *error = "not an IPv4 endpoint: " + endpoint;
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = "connect " + endpoint + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// The client whose loop runs on this thread, if any.
thread_local const void* t_loop_client = nullptr;

}  // namespace

struct GrpcUnaryClient::Conn {
  // One call in flight: nghttp2's stream user data.
  struct Stream {
    std::string body;  // the framed request
    size_t sent = 0;
    std::string response;
    int http_status = 0;
    int grpc_status = -1;  // from the trailers
    std::string grpc_message;
    Reply reply;
  };

  GrpcUnaryClient* client = nullptr;
  size_t index = 0;  // in conns_, and its epoll data
  std::string authority;
  int fd = -1;
  nghttp2_session* session = nullptr;
  std::string out;                   // bytes nghttp2 produced and the socket has not taken
  bool writable_wait = false;        // EPOLLOUT armed
  bool dirty = false;                // nghttp2 may have bytes to send
  std::string dead;                  // why the connection broke; empty while it works
  std::unordered_set<Stream*> live;  // the calls in flight

  ~Conn() {
    if (session) nghttp2_session_del(session);
    if (fd >= 0) close(fd);
    for (Stream* s : live) delete s;  // their replies are dropped
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                          nghttp2_data_source* source, void*) {
    auto* s = static_cast<Stream*>(source->ptr);
    const size_t n = std::min(length, s->body.size() - s->sent);
    std::memcpy(buf, s->body.data() + s->sent, n);
    s->sent += n;
    if (s->sent == s->body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void*) {
    auto* s =
        static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
    if (s == nullptr) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") s->http_status = std::atoi(v.c_str());
    if (n == "grpc-status") s->grpc_status = std::atoi(v.c_str());
    if (n == "grpc-message") s->grpc_message = v;
    return 0;
  }

  static int OnData(nghttp2_session* session, uint8_t, int32_t stream_id, const uint8_t* data,
                    size_t len, void*) {
    auto* s = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, stream_id));
    if (s != nullptr) s->response.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  static int OnClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code, void* user) {
    auto* c = static_cast<Conn*>(user);
    auto* s = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, stream_id));
    if (s == nullptr) return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, nullptr);
    c->live.erase(s);
    Completion done{std::move(s->reply), false, {}, {}};
    if (error_code != NGHTTP2_NO_ERROR) {
      done.error = std::string("stream reset: ") + nghttp2_http2_strerror(error_code);
    } else if (s->http_status != 200) {
      done.error = "HTTP status " + std::to_string(s->http_status);
    } else if (s->grpc_status != 0) {
      done.error = s->grpc_status < 0
                       ? "no grpc-status"
                       : "grpc-status " + std::to_string(s->grpc_status) + ": " + s->grpc_message;
    } else if (s->response.size() < kPrefixBytes) {
      done.error = "no response message";
    } else {
      done.ok = true;
      done.message = s->response.substr(kPrefixBytes);
    }
    delete s;
    c->client->due_.push_back(std::move(done));
    return 0;
  }
};

std::unique_ptr<GrpcUnaryClient> GrpcUnaryClient::Connect(const std::vector<std::string>& endpoints,
                                                          std::string* error) {
  std::unique_ptr<GrpcUnaryClient> client(new GrpcUnaryClient());
  client->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  client->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.u64 = UINT64_MAX;
  epoll_ctl(client->epoll_fd_, EPOLL_CTL_ADD, client->wake_fd_, &wake);

  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_header_callback(cbs, Conn::OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, Conn::OnData);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, Conn::OnClose);
  for (size_t i = 0; i < endpoints.size(); ++i) {
    auto c = std::make_unique<Conn>();
    c->client = client.get();
    c->index = i;
    c->authority = endpoints[i];
    c->fd = Dial(endpoints[i], error);
    if (c->fd < 0) break;
    nghttp2_session_client_new(&c->session, cbs, c.get());
    // Large windows: answers never wait for a window update.
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24}};
    nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, 1);
    nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, 1 << 30);
    c->dirty = true;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    epoll_ctl(client->epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev);
    client->conns_.push_back(std::move(c));
  }
  nghttp2_session_callbacks_del(cbs);
  if (client->conns_.size() != endpoints.size()) return nullptr;
  client->thread_ = std::thread([raw = client.get()] { raw->Run(); });
  return client;
}

GrpcUnaryClient::~GrpcUnaryClient() {
  stop_ = true;
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  conns_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

void GrpcUnaryClient::Call(size_t conn, const char* path, const std::string& request, Reply reply) {
  Submit s{conn % conns_.size(), path, Framed(request), std::move(reply)};
  if (t_loop_client == this) return Start(std::move(s));
  {
    std::lock_guard lock(mu_);
    submitted_.push_back(std::move(s));
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void GrpcUnaryClient::Start(Submit s) {
  Conn& c = *conns_[s.conn];
  if (!c.dead.empty()) {
    due_.push_back({std::move(s.reply), false, c.dead, {}});
    return;
  }
  auto* stream = new Conn::Stream{.body = std::move(s.body), .reply = std::move(s.reply)};
  auto nv = [](const char* name, const std::string_view value) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())),
                      std::strlen(name), value.size(), NGHTTP2_NV_FLAG_NONE};
  };
  const nghttp2_nv headers[] = {
      nv(":method", "POST"),
      nv(":scheme", "http"),
      nv(":path", s.path),
      nv(":authority", c.authority),
      nv("content-type", "application/grpc"),
      nv("te", "trailers"),
  };
  nghttp2_data_provider body{};
  body.source.ptr = stream;
  body.read_callback = Conn::ReadBody;
  if (nghttp2_submit_request(c.session, nullptr, headers, std::size(headers), &body, stream) < 0) {
    due_.push_back({std::move(stream->reply), false, "cannot start a stream", {}});
    delete stream;
    return;
  }
  c.live.insert(stream);
  c.dirty = true;
}

void GrpcUnaryClient::Flush(Conn& c) {
  c.dirty = false;
  if (!c.dead.empty()) return;
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(c.session, &data);
    if (n < 0) return Fail(c, std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n == 0) break;
    c.out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  size_t off = 0;
  while (off < c.out.size()) {
    const ssize_t w = send(c.fd, c.out.data() + off, c.out.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) break;
    if (w < 0) return Fail(c, std::string("send: ") + std::strerror(errno));
    off += static_cast<size_t>(w);
  }
  c.out.erase(0, off);
  const bool wait = !c.out.empty();
  if (wait != c.writable_wait) {
    c.writable_wait = wait;
    epoll_event ev{};
    ev.events = EPOLLIN | (wait ? EPOLLOUT : 0u);
    ev.data.u64 = c.index;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  }
}

void GrpcUnaryClient::OnReadable(Conn& c) {
  if (!c.dead.empty()) return;
  char buf[64 * 1024];
  for (;;) {
    const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0)
      return Fail(c, n == 0 ? "connection closed by the server"
                            : std::string("recv: ") + std::strerror(errno));
    const ssize_t used =
        nghttp2_session_mem_recv(c.session, reinterpret_cast<const uint8_t*>(buf), n);
    if (used < 0)
      return Fail(c, std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(used)));
    c.dirty = true;  // acknowledgements, window updates
    if (static_cast<size_t>(n) < sizeof buf) return;
  }
}

void GrpcUnaryClient::Fail(Conn& c, const std::string& why) {
  if (!c.dead.empty()) return;
  c.dead = why;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  nghttp2_session_del(c.session);  // runs no callbacks
  c.session = nullptr;
  // Every call in flight on it fails.
  for (Conn::Stream* s : c.live) {
    due_.push_back({std::move(s->reply), false, why, {}});
    delete s;
  }
  c.live.clear();
}

void GrpcUnaryClient::RunDue() {
  // Only the replies due now: those they cause wait for the next round, so that calls failing
  // at once on a dead connection cannot hold the loop.
  std::vector<Completion> now;
  now.swap(due_);
  for (auto& d : now) d.reply(d.ok, d.error, d.message);
}

void GrpcUnaryClient::Run() {
  t_loop_client = this;
  epoll_event events[64];
  while (!stop_.load()) {
    for (auto& c : conns_) {
      if (c->dirty) Flush(*c);
    }
    const int n = epoll_wait(epoll_fd_, events, 64, due_.empty() ? 100 : 0);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == UINT64_MAX) {
        uint64_t count = 0;
        (void)!read(wake_fd_, &count, sizeof count);
        std::vector<Submit> batch;
        {
          std::lock_guard lock(mu_);
          batch.swap(submitted_);
        }
        for (auto& s : batch) Start(std::move(s));
        continue;
      }
      Conn& c = *conns_[events[i].data.u64];
      if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) OnReadable(c);
      if (events[i].events & EPOLLOUT) c.dirty = true;
    }
    if (stop_.load()) break;
    RunDue();
  }
}

}  // namespace etcdw::bench
