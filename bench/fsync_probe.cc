#include "fsync_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace etcdw::bench {

namespace {

using Clock = std::chrono::steady_clock;

// A new file under test, empty or preallocated with synced zeros, that 256 B records are written
// to one after the other, each followed by fdatasync. Removed when destroyed.
class SyncedRecords {
 public:
  SyncedRecords(std::string path, size_t zeros, std::string* error) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      *error = "open " + path_ + ": " + std::strerror(errno);
      return;
    }
    const std::string chunk(1 << 20, '\0');
    for (size_t done = 0; done < zeros; done += chunk.size()) {
      if (::pwrite(fd_, chunk.data(), chunk.size(), static_cast<off_t>(done)) !=
          static_cast<ssize_t>(chunk.size())) {
        *error = "preallocate " + path_ + ": " + std::strerror(errno);
        return;
      }
    }
    if (::fdatasync(fd_) != 0) {
      *error = "sync " + path_ + ": " + std::strerror(errno);
      return;
    }
    ok_ = true;
  }
  ~SyncedRecords() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  SyncedRecords(const SyncedRecords&) = delete;
  SyncedRecords& operator=(const SyncedRecords&) = delete;

  bool ok() const { return ok_; }

  // Writes the next record and syncs it; false with *error.
  bool WriteOne(std::string* error) {
    char record[256];
    std::memset(record, 'f', sizeof record);
    if (::pwrite(fd_, record, sizeof record, offset_) != static_cast<ssize_t>(sizeof record) ||
        ::fdatasync(fd_) != 0) {
      *error = std::string("write/fdatasync: ") + std::strerror(errno);
      return false;
    }
    offset_ += static_cast<off_t>(sizeof record);
    return true;
  }

 private:
  const std::string path_;
  int fd_ = -1;
  off_t offset_ = 0;
  bool ok_ = false;
};

double PerSecond(uint64_t ops, Clock::time_point t0) {
  return static_cast<double>(ops) / std::chrono::duration<double>(Clock::now() - t0).count();
}

// Records written and synced back to back for `duration`: per second, or -1 with *error.
double SyncRate(SyncedRecords& file, std::chrono::milliseconds duration, std::string* error) {
  uint64_t ops = 0;
  const auto t0 = Clock::now();
  while (Clock::now() < t0 + duration) {
    if (!file.WriteOne(error)) return -1;
    ++ops;
  }
  return PerSecond(ops, t0);
}

// The sizes of a put of 256 B over gRPC and of its answer, roughly.
constexpr size_t kRequestBytes = 320;
constexpr size_t kAnswerBytes = 64;

bool SendAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool RecvAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// An owned socket.
struct Socket {
  int fd = -1;
  explicit Socket(int f) : fd(f) {}
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
};

void NoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// One client's requests over loopback TCP, each answered by a server thread once it has written
// and synced a record: requests per second, or -1 with *error.
double RoundTripRate(SyncedRecords& file, std::chrono::milliseconds duration, std::string* error) {
  Socket listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  Socket client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.fd < 0 || client.fd < 0 ||
      ::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener.fd, 1) != 0 ||
      ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      ::connect(client.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = std::string("loopback connection: ") + std::strerror(errno);
    return -1;
  }
  // The connection is established (the listener's backlog holds it): accept cannot block.
  Socket served(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (served.fd < 0) {
    *error = std::string("accept: ") + std::strerror(errno);
    return -1;
  }
  NoDelay(client.fd);
  NoDelay(served.fd);

  std::string server_error;
  std::thread server([&] {
    char request[kRequestBytes];
    const char answer[kAnswerBytes] = {};
    // Ends when the client shuts its side down (recv returns 0) or on an error.
    while (RecvAll(served.fd, request, sizeof request)) {
      if (!file.WriteOne(&server_error) || !SendAll(served.fd, answer, sizeof answer)) break;
    }
    ::shutdown(served.fd, SHUT_RDWR);  // a client waiting for an answer sees the end
  });
  const char request[kRequestBytes] = {};
  char answer[kAnswerBytes];
  uint64_t ops = 0;
  bool ok = true;
  const auto t0 = Clock::now();
  while (ok && Clock::now() < t0 + duration) {
    ok = SendAll(client.fd, request, sizeof request) && RecvAll(client.fd, answer, sizeof answer);
    if (ok) ++ops;
  }
  const double rate = PerSecond(ops, t0);
  ::shutdown(client.fd, SHUT_WR);
  server.join();
  if (!ok) {
    *error =
        "loopback round trip: " + (server_error.empty() ? "the connection broke" : server_error);
    return -1;
  }
  return rate;
}

}  // namespace

bool MeasureDiskSyncRates(const std::string& dir, std::chrono::milliseconds duration,
                          DiskSyncRates* out, std::string* error) {
  const std::string path = dir + "/fsync-probe." + std::to_string(::getpid());
  {
    SyncedRecords file(path, 0, error);
    if (!file.ok() || (out->append = SyncRate(file, duration, error)) < 0) return false;
  }
  // 64 MiB: room for 256 B records at 40k syncs/s for both loops of the longest probe (3 s each).
  SyncedRecords file(path, size_t{64} << 20, error);
  if (!file.ok() || (out->overwrite = SyncRate(file, duration, error)) < 0) return false;
  out->round_trip = RoundTripRate(file, duration, error);
  return out->round_trip >= 0;
}

}  // namespace etcdw::bench
