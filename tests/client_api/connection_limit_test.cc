// How many client connections the native server holds (NativeRpcOptions::max_connections):
// at the limit, or out of file descriptors, new clients wait in the listen backlog, without the
// server spinning, and are served once connections close.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/common/open_files.h"
#include "native_rpc_fixture.h"

namespace etcdw::client_api {
namespace {

using namespace std::chrono_literals;

class ConnectionLimitTest : public NativeRpcServerTest {
 protected:
  static constexpr char kHealth[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

  // Whatever arrives on `fd` within `wait` (the connection is left open).
  static std::string ReadFor(int fd, std::chrono::milliseconds wait) {
    timeval tv{0, static_cast<suseconds_t>(std::chrono::microseconds(wait).count())};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }

  // CPU seconds the whole process used (the server's threads included).
  static double CpuSeconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  }
};

TEST_F(ConnectionLimitTest, ConnectionsBeyondTheLimitWaitUntilOneCloses) {
  NativeRpcOptions o;
  o.max_connections = 3;
  StartNative(o);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(ConnectRaw());
    ASSERT_GE(held.back(), 0);
  }
  std::this_thread::sleep_for(200ms);  // accepted
  int waiting = ConnectRaw();          // the kernel completes the handshake; we do not accept
  ASSERT_GE(waiting, 0);
  ASSERT_TRUE(SendAll(waiting, kHealth));
  EXPECT_EQ(ReadFor(waiting, 700ms), "") << "not served beyond the limit";
  // One of the three serves on, then closes: the waiting client is taken.
  ASSERT_TRUE(SendAll(held[0], kHealth));
  std::string got;
  EXPECT_TRUE(ReadUntilClosed(held[0], &got));
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  close(held[0]);
  got.clear();
  EXPECT_TRUE(ReadUntilClosed(waiting, &got));
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << "served once a connection closed: " << got;
  close(waiting);
  close(held[1]);
  close(held[2]);
}

TEST_F(ConnectionLimitTest, OutOfFileDescriptorsTheServerWaitsWithoutSpinningAndRecovers) {
#if defined(__SANITIZE_ADDRESS__)
  // UBSan's vptr check opens a pipe to see whether memory is readable: without a descriptor it
  // reports every virtual call as a bad one. The Release build runs this test.
  GTEST_SKIP() << "needs descriptors the sanitizers take";
#endif
  StartNative();
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // Room for a few dozen more descriptors: the clients below take them all.
  int probe = dup(0);
  ASSERT_GE(probe, 0);
  close(probe);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(probe) + 40;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  struct Restore {
    rlimit limit;
    ~Restore() { setrlimit(RLIMIT_NOFILE, &limit); }
  } restore{saved};
  std::vector<int> clients;
  for (int i = 0; i < 200; ++i) {
    int fd = ConnectRaw();
    if (fd < 0) break;
    clients.push_back(fd);
  }
  EXPECT_LT(clients.size(), 40u) << "the clients ran out of descriptors";
  std::this_thread::sleep_for(300ms);  // the server tries to accept the last ones and cannot
  const double before = CpuSeconds();
  std::this_thread::sleep_for(1s);
  const double used = CpuSeconds() - before;
  EXPECT_LT(used, 0.3) << "the server's accept loop must not spin on EMFILE";
  // Descriptors come back: the server accepts again and serves a new client.
  for (size_t i = 0; i < clients.size() / 2; ++i) close(clients[i]);
  clients.erase(clients.begin(), clients.begin() + static_cast<ptrdiff_t>(clients.size() / 2));
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  int fd = ConnectRaw();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, kHealth));
  std::string got;
  EXPECT_TRUE(ReadUntilClosed(fd, &got));
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  close(fd);
  for (int c : clients) close(c);
}

TEST(NativeRpcOptionsTest, TheDefaultConnectionLimitLeavesDescriptorsForTheStore) {
  NativeRpcOptions o;
  const uint64_t files = common::OpenFileLimit();
  ASSERT_GT(files, 0u);
  EXPECT_LT(o.ConnectionLimit(), files);
  EXPECT_GE(files - o.ConnectionLimit(), std::min<uint64_t>(512, files / 2));
  o.max_connections = 7;
  EXPECT_EQ(o.ConnectionLimit(), 7u);
}

}  // namespace
}  // namespace etcdw::client_api
