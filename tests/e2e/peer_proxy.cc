#include "e2e/peer_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <sstream>

#include "peer_transport/frame.h"

namespace etcdw::testing {

// One proxied connection. The fds are closed by its pump thread only, under `mu`, so that
// another thread may shut them down (to wake a pump blocked in send) without racing a reuse.
struct PeerProxy::Conn {
  std::mutex mu;
  int client = -1;  // the dialing member's side
  int server = -1;  // the fronted member's side
  int receiver = -1;
  std::atomic<uint64_t> sender_id{0};  // from the handshake; 0 until it is read
  std::atomic<bool> damaged{false};
  std::atomic<bool> close{false};
  std::atomic<bool> done{false};

  void Shutdown() {
    std::lock_guard<std::mutex> lock(mu);
    if (client >= 0) ::shutdown(client, SHUT_RDWR);
    if (server >= 0) ::shutdown(server, SHUT_RDWR);
  }
  void CloseAll() {
    std::lock_guard<std::mutex> lock(mu);
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
    client = server = -1;
    done = true;
  }
};

namespace {

constexpr int kPollMs = 50;

int ListenLoopback(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

int ConnectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendBytes(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

PeerProxy::PeerProxy(int members) : fronts_(static_cast<size_t>(members)) {
  for (auto& f : fronts_) {
    f.listen_fd = ListenLoopback(&f.port);
    if (f.listen_fd < 0) ok_ = false;
  }
  if (!ok_) return;
  for (int i = 0; i < members; ++i) acceptors_.emplace_back([this, i] { Accept(i); });
}

PeerProxy::~PeerProxy() {
  stop_ = true;
  for (auto& t : acceptors_) t.join();
  for (auto& f : fronts_) {
    if (f.listen_fd >= 0) ::close(f.listen_fd);
  }
  Reap(true);
}

void PeerProxy::SetTarget(int i, int real_port) {
  std::lock_guard<std::mutex> lock(mu_);
  fronts_[static_cast<size_t>(i)].target_port = real_port;
}

void PeerProxy::SetMemberId(int i, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  ids_[id] = i;
}

void PeerProxy::Block(int from, int to) {
  std::lock_guard<std::mutex> lock(mu_);
  blocked_.insert({from, to});
}

void PeerProxy::Unblock(int from, int to) {
  std::lock_guard<std::mutex> lock(mu_);
  blocked_.erase({from, to});
  CloseDamagedLocked();
}

void PeerProxy::Cut(const std::vector<int>& a, const std::vector<int>& b) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int x : a) {
    for (int y : b) {
      blocked_.insert({x, y});
      blocked_.insert({y, x});
    }
  }
}

void PeerProxy::Heal() {
  std::lock_guard<std::mutex> lock(mu_);
  blocked_.clear();
  CloseDamagedLocked();
}

void PeerProxy::CloseDamagedLocked() {
  for (auto& [c, t] : conns_) {
    auto id = ids_.find(c->sender_id);
    const int sender = id == ids_.end() ? -1 : id->second;
    const std::pair<int, int> there{sender, c->receiver};
    const std::pair<int, int> back{c->receiver, sender};
    if (c->damaged && blocked_.count(there) == 0 && blocked_.count(back) == 0) {
      c->close = true;
      c->Shutdown();
    }
  }
}

std::string PeerProxy::Describe() {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream s;
  for (const auto& [from, to] : blocked_) s << (s.tellp() > 0 ? " " : "") << from << "->" << to;
  return s.str();
}

bool PeerProxy::Blocked(int from, int to) {
  if (from < 0 || to < 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return blocked_.count({from, to}) > 0;
}

int PeerProxy::MemberOf(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(id);
  return it == ids_.end() ? -1 : it->second;
}

void PeerProxy::Reap(bool all) {
  std::vector<std::pair<std::shared_ptr<Conn>, std::thread>> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (all || it->first->done) {
        finished.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [c, t] : finished) {
    c->close = true;
    c->Shutdown();
    t.join();
  }
}

void PeerProxy::Accept(int member) {
  const int lfd = fronts_[static_cast<size_t>(member)].listen_fd;
  while (!stop_) {
    pollfd p{lfd, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) > 0) {
      int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        auto c = std::make_shared<Conn>();
        c->client = fd;
        c->receiver = member;
        std::lock_guard<std::mutex> lock(mu_);
        conns_.emplace_back(c, std::thread([this, c] { Pump(c); }));
      }
    }
    Reap(false);
  }
}

void PeerProxy::Pump(const std::shared_ptr<Conn>& c) {
  int target = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    target = fronts_[static_cast<size_t>(c->receiver)].target_port;
  }
  int server = ConnectLoopback(target);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->server = server;
  }
  if (server < 0) return c->CloseAll();
  const int client = c->client;

  // The handshake names the sender; until it is whole nothing is forwarded.
  std::array<uint8_t, peer_transport::kHandshakeSize> hello{};
  size_t got = 0;
  while (got < hello.size()) {
    if (stop_ || c->close) return c->CloseAll();
    pollfd p{client, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    ssize_t n = ::recv(client, hello.data() + got, hello.size() - got, 0);
    if (n <= 0) return c->CloseAll();
    got += static_cast<size_t>(n);
  }
  auto h = peer_transport::DecodeHandshake(hello);
  if (h.ok()) c->sender_id = h->sender_id;
  if (Blocked(MemberOf(c->sender_id), c->receiver)) {
    dropped_ += hello.size();
    c->damaged = true;
  } else if (!SendBytes(server, hello.data(), hello.size())) {
    return c->CloseAll();
  }

  std::array<uint8_t, 64 * 1024> buf{};
  while (!stop_ && !c->close) {
    pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(p, 2, kPollMs) <= 0) continue;
    for (int side = 0; side < 2; ++side) {
      if (p[side].revents == 0) continue;
      const int from_fd = side == 0 ? client : server;
      const int to_fd = side == 0 ? server : client;
      ssize_t n = ::recv(from_fd, buf.data(), buf.size(), 0);
      if (n <= 0) return c->CloseAll();
      // Looked up each time: the IDs of the members may become known after the handshake.
      const int sender = MemberOf(c->sender_id);
      const int from = side == 0 ? sender : c->receiver;
      const int to = side == 0 ? c->receiver : sender;
      if (Blocked(from, to)) {
        dropped_ += static_cast<uint64_t>(n);
        c->damaged = true;
      } else if (c->damaged) {
        return c->CloseAll();  // it lost bytes: what follows is not a frame
      } else if (!SendBytes(to_fd, buf.data(), static_cast<size_t>(n))) {
        return c->CloseAll();
      }
    }
  }
  c->CloseAll();
}

}  // namespace etcdw::testing
