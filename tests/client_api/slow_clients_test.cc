// Slow clients on the client and metrics ports (NativeRpcOptions::request_read_timeout): a
// connection that does not show its protocol in time is closed, an HTTP/1.x request whose head
// does not arrive whole in time, or whose body pauses too long, is answered 408 and its
// connection closed; idle keep-alive connections, gRPC clients and everyone else are served on.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "native_rpc_fixture.h"
#include "test_certs.h"

namespace etcdw::client_api {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class SlowClientsTest : public NativeRpcServerTest {
 protected:
  static constexpr auto kTimeout = 300ms;

  NativeRpcOptions Options() const {
    NativeRpcOptions o;
    o.request_read_timeout = kTimeout;
    return o;
  }

  // Sends `bytes` one at a time, `pause` apart.
  static void Trickle(int fd, const std::string& bytes, std::chrono::milliseconds pause) {
    for (char b : bytes) {
      if (!SendAll(fd, std::string(1, b))) return;
      std::this_thread::sleep_for(pause);
    }
  }

  // What the server sent before it closed the connection, and how long that took; `closed` is
  // false when it did not close it within 5 s.
  struct Ending {
    std::string got;
    bool closed = false;
    Clock::duration took{};
  };
  static Ending AwaitClose(int fd, Clock::time_point since) {
    Ending e;
    e.closed = ReadUntilClosed(fd, &e.got);
    e.took = Clock::now() - since;
    close(fd);
    return e;
  }
};

TEST_F(SlowClientsTest, AConnectionThatSendsNothingIsClosed) {
  StartNative(Options());
  const auto start = Clock::now();
  int fd = ConnectRaw();
  ASSERT_GE(fd, 0);
  Ending e = AwaitClose(fd, start);
  EXPECT_TRUE(e.closed);
  EXPECT_EQ(e.got, "") << "nothing is sent before the client shows its protocol";
  EXPECT_GE(e.took, kTimeout);
  EXPECT_LT(e.took, 3s);
}

TEST_F(SlowClientsTest, AnHttp1HeadThatDoesNotEndInTimeIsAnswered408) {
  StartNative(Options());
  int fd = ConnectRaw();
  ASSERT_GE(fd, 0);
  const auto start = Clock::now();
  // Bytes keep coming, 50 ms apart: the head has a deadline, not an idle timeout.
  Trickle(fd, "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: abcdefghijklmnopqrstuvwxyz", 50ms);
  Ending e = AwaitClose(fd, start);
  EXPECT_TRUE(e.closed);
  EXPECT_EQ(e.got.rfind("HTTP/1.1 408 Request Timeout: the request was not received within 300ms"
                        "\r\n",
                        0),
            0u)
      << e.got;
  EXPECT_NE(e.got.find("Connection: close\r\n"), std::string::npos) << e.got;
  EXPECT_LT(e.took, 3s);
}

TEST_F(SlowClientsTest, ABodyMayPauseShorterThanTheTimeoutButNotLonger) {
  StartNative(Options());
  ASSERT_TRUE(Put(*kv_, "key", "value").ok());
  const std::string head =
      "POST /v3/kv/range HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 14\r\n\r\n";
  const std::string body = R"({"key":"a2V5"})";
  // 14 bytes 100 ms apart: longer than the timeout in all, every pause shorter.
  int fd = ConnectRaw();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, head));
  Trickle(fd, body, 100ms);
  Ending e = AwaitClose(fd, Clock::now());
  EXPECT_EQ(e.got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << e.got;
  EXPECT_NE(e.got.find(R"("value":"dmFsdWU=")"), std::string::npos) << e.got;

  fd = ConnectRaw();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, head + body.substr(0, 5)));
  const auto paused = Clock::now();
  e = AwaitClose(fd, paused);
  EXPECT_TRUE(e.closed);
  EXPECT_EQ(e.got.rfind("HTTP/1.1 408 ", 0), 0u) << e.got;
  EXPECT_GE(e.took, kTimeout);
}

TEST_F(SlowClientsTest, AKeptAliveConnectionMayIdleBetweenRequests) {
  StartNative(Options());
  int fd = ConnectRaw();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::this_thread::sleep_for(4 * kTimeout);
  ASSERT_TRUE(SendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  Ending e = AwaitClose(fd, Clock::now());
  EXPECT_TRUE(e.closed);
  const size_t first = e.got.find("HTTP/1.1 200 OK\r\n");
  ASSERT_EQ(first, 0u) << e.got;
  EXPECT_NE(e.got.find("HTTP/1.1 200 OK\r\n", first + 1), std::string::npos)
      << "both requests answered: " << e.got;
}

TEST_F(SlowClientsTest, GrpcClientsSilentLongerThanTheTimeoutAreServed) {
  StartNative(Options());
  ASSERT_TRUE(Put(*kv_, "k", "1").ok());
  std::this_thread::sleep_for(4 * kTimeout);
  EXPECT_TRUE(Put(*kv_, "k", "2").ok()) << "HTTP/2 connections are the keepalive's";
}

TEST_F(SlowClientsTest, TheMetricsPortAndTlsHandshakesHaveTheTimeoutToo) {
  testing::TestCerts certs;
  ASSERT_TRUE(certs.AddCa("ca") && certs.Issue("server", "ca")) << certs.log();
  NativeRpcOptions o = Options();
  o.urls = {common::Url{"https", "127.0.0.1", 0}};
  o.metrics_urls = {common::Url{"http", "127.0.0.1", 0}};
  o.tls.cert_file = certs.Crt("server");
  o.tls.key_file = certs.Key("server");
  StartNative(o);
  for (size_t listener : {0, 1}) {
    const auto start = Clock::now();
    int fd = ConnectRaw(listener);
    ASSERT_GE(fd, 0);
    // The start of a TLS record (a handshake), or of an HTTP/1.1 request line.
    ASSERT_TRUE(SendAll(fd, listener == 0 ? std::string("\x16\x03\x01", 3) : "GET /metr"));
    Ending e = AwaitClose(fd, start);
    EXPECT_TRUE(e.closed) << "listener " << listener;
    EXPECT_LT(e.took, 3s) << "listener " << listener;
    if (listener == 1) {
      EXPECT_EQ(e.got.rfind("HTTP/1.1 408 ", 0), 0u) << e.got;
    }
  }
}

TEST_F(SlowClientsTest, ManySlowClientsLeaveTheOthersServed) {
  NativeRpcOptions o = Options();
  o.request_read_timeout = 2s;
  StartNative(o);
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    int fd = ConnectRaw();
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, i % 2 == 0 ? "GET /health HTTP/1.1\r\nHo" : "PRI * HTTP/2"));
    slow.push_back(fd);
  }
  // Served while they wait, over HTTP/2 and HTTP/1.1.
  EXPECT_TRUE(Put(*kv_, "k", "v").ok());
  int fd = ConnectRaw();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  Ending e = AwaitClose(fd, Clock::now());
  EXPECT_EQ(e.got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << e.got;
  int closed = 0;
  for (int s : slow) closed += AwaitClose(s, Clock::now()).closed ? 1 : 0;
  EXPECT_EQ(closed, 200) << "each slow client is closed once its time is up";
}

}  // namespace
}  // namespace etcdw::client_api
