// HttpServer and HttpClient against each other, plain and TLS, plus raw sockets for the
// malformed and slow cases.
#include "etcdw/common/http.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <thread>
#include <vector>

#include "support/await.h"
#include "support/files.h"
#include "test_certs.h"

namespace etcdw::common {
namespace {

using namespace std::chrono_literals;
using testing::TestCerts;

// Echoes what it saw, so tests can check the parsed request.
HttpResponse Echo(const HttpRequest& r) {
  HttpResponse resp;
  resp.headers["Content-Type"] = "text/plain";
  resp.body = r.method + " " + r.path;
  for (const auto& [k, v] : r.query) resp.body += " " + k + "=" + v;
  resp.body += r.remote_is_loopback ? " loopback" : " remote";
  resp.body += r.client_cert_verified ? " verified" : " anonymous";
  if (r.path == "/missing") resp.status = 404;
  return resp;
}

std::string Local(int port) { return "127.0.0.1:" + std::to_string(port); }

std::unique_ptr<HttpClient> PlainClient(std::chrono::milliseconds timeout = 5s) {
  HttpClientOptions o;
  o.timeout = timeout;
  auto c = HttpClient::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

// Connects a raw TCP socket to the server.
int RawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// A loopback listener whose connections wait in the backlog until the test accepts them (never,
// for a server that does not answer).
class LoopbackListener {
 public:
  LoopbackListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 4) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~LoopbackListener() { ::close(fd_); }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;
  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int port_ = -1;
};

TEST(HttpTest, SplitHostPortAcceptsEmptyHostAndRejectsBadPorts) {
  auto a = SplitHostPort(":8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->first, "");
  EXPECT_EQ(a->second, 8080);
  auto b = SplitHostPort("[::1]:9");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->first, "::1");
  EXPECT_FALSE(SplitHostPort("localhost").ok());
  EXPECT_FALSE(SplitHostPort("h:0").ok());
  EXPECT_FALSE(SplitHostPort("h:70000").ok());
  EXPECT_FALSE(SplitHostPort("h:8x").ok());
}

TEST(HttpTest, PlainGetAndPostReachTheHandlerWithPathAndQuery) {
  auto server = HttpServer::Start({.host = "127.0.0.1"}, Echo);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_FALSE((*server)->tls());
  auto client = PlainClient();
  auto r = client->Get(Local((*server)->port()), "/initialization/start?mode=full&x=a%20b+c");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "GET /initialization/start mode=full x=a b c loopback anonymous");
  EXPECT_EQ(r->headers["Content-Type"], "text/plain");
  auto p = client->Request("POST", Local((*server)->port()), "/stop");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->body, "POST /stop loopback anonymous");
  auto m = client->Get(Local((*server)->port()), "/missing");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->status, 404);
}

TEST(HttpTest, ASlowHandlerHoldsOnlyItsOwnThreadAndStillAnswersAfterTheReadTimeout) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> in_slow{false};
  HttpServerOptions o{.host = "127.0.0.1", .read_timeout = 300ms, .threads = 2};
  auto server = HttpServer::Start(o, [&](const HttpRequest& r) {
    if (r.path == "/slow") {
      in_slow = true;
      released.wait_for(10s);
    }
    return HttpResponse{.body = r.path};
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string addr = Local((*server)->port());
  auto slow = std::async(std::launch::async, [&] { return PlainClient(20s)->Get(addr, "/slow"); });
  ASSERT_TRUE(testsupport::WaitUntil([&] { return in_slow.load(); }));  // /slow holds a thread
  auto fast = PlainClient()->Get(addr, "/fast");
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  EXPECT_EQ(fast->body, "/fast");
  EXPECT_EQ(slow.wait_for(0s), std::future_status::timeout) << "/slow did not wait";
  // The handler outlasts the read timeout: its answer is still written.
  std::this_thread::sleep_for(600ms);
  release.set_value();
  auto r = slow.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "/slow");
}

TEST(HttpTest, EmptyHostDialsTheLocalMachine) {
  auto server = HttpServer::Start({}, Echo);  // all interfaces
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto r = PlainClient()->Get(":" + std::to_string((*server)->port()), "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "GET /x loopback anonymous");
}

TEST(HttpTest, BindFailureNamesTheAddress) {
  auto first = HttpServer::Start({.host = "127.0.0.1"}, Echo);
  ASSERT_TRUE(first.ok());
  auto second = HttpServer::Start({.host = "127.0.0.1", .port = (*first)->port()}, Echo);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string((*first)->port())),
            std::string::npos)
      << second.status().message();
}

TEST(HttpTest, ConnectionRefusedIsAnError) {
  int port;
  {
    auto s = HttpServer::Start({.host = "127.0.0.1"}, Echo);
    ASSERT_TRUE(s.ok());
    port = (*s)->port();
  }
  auto r = PlainClient()->Get(Local(port), "/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("connect"), std::string::npos) << r.status().message();
}

TEST(HttpTest, MalformedRequestGets400AndTheServerKeepsServing) {
  auto server = HttpServer::Start({.host = "127.0.0.1"}, Echo);
  ASSERT_TRUE(server.ok());
  int fd = RawConnect((*server)->port());
  const char junk[] = "NOT HTTP AT ALL\r\n\r\n";
  ASSERT_GT(::write(fd, junk, sizeof junk - 1), 0);
  std::string reply = ReadAll(fd);
  ::close(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  auto r = PlainClient()->Get(Local((*server)->port()), "/after");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST(HttpTest, SilentConnectionIsClosedAfterTheReadTimeout) {
  auto server = HttpServer::Start({.host = "127.0.0.1", .read_timeout = 200ms}, Echo);
  ASSERT_TRUE(server.ok());
  int fd = RawConnect((*server)->port());
  auto start = std::chrono::steady_clock::now();
  std::string reply = ReadAll(fd);  // returns when the server closes
  ::close(fd);
  EXPECT_EQ(reply, "");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(HttpTest, OversizedBodyGets413) {
  auto server = HttpServer::Start({.host = "127.0.0.1", .max_body_bytes = 10}, Echo);
  ASSERT_TRUE(server.ok());
  int fd = RawConnect((*server)->port());
  std::string req =
      "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x');
  ASSERT_GT(::write(fd, req.data(), req.size()), 0);
  std::string reply = ReadAll(fd);
  ::close(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
}

TEST(HttpTest, ClientTimesOutOnAServerThatNeverAnswers) {
  LoopbackListener silent;
  ASSERT_GT(silent.port(), 0);
  auto start = std::chrono::steady_clock::now();
  auto r = PlainClient(300ms)->Get(Local(silent.port()), "/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(HttpTest, CancelFlagAbortsARequest) {
  LoopbackListener silent;
  ASSERT_GT(silent.port(), 0);
  std::atomic<bool> cancel{false};
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    cancel = true;
  });
  auto r = PlainClient(30s)->Get(Local(silent.port()), "/", &cancel);
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCanceled);
}

class HttpTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TestCerts();
    ASSERT_TRUE(certs_->AddCa("ca") && certs_->AddCa("other-ca") &&
                certs_->Issue("server", "ca", {"sidecar.local"}) && certs_->Issue("client", "ca") &&
                certs_->Issue("stranger", "other-ca"))
        << certs_->log();
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  static HttpServerOptions ServerOptions(bool ask_client_cert = false) {
    HttpServerOptions o;
    o.host = "127.0.0.1";
    o.cert_file = certs_->Crt("server");
    o.key_file = certs_->Key("server");
    if (ask_client_cert) o.client_ca_file = certs_->Crt("ca");
    return o;
  }
  static HttpClientOptions ClientOptions(const std::string& ca = "ca") {
    HttpClientOptions o;
    o.tls = true;
    o.ca_file = certs_->Crt(ca);
    o.timeout = 5s;
    return o;
  }
  static Result<HttpResponse> Get(const HttpClientOptions& o, int port, const std::string& t) {
    auto c = HttpClient::Create(o);
    if (!c.ok()) return c.status();
    return (*c)->Get(Local(port), t);
  }

  static TestCerts* certs_;
};
TestCerts* HttpTlsTest::certs_ = nullptr;

TEST_F(HttpTlsTest, ServerVerifiedAgainstTheCaBundle) {
  auto server = HttpServer::Start(ServerOptions(), Echo);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_TRUE((*server)->tls());
  auto r = Get(ClientOptions(), (*server)->port(), "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "GET /x loopback anonymous");
  // The name checked against the certificate can differ from the address dialed.
  auto o = ClientOptions();
  o.server_name = "sidecar.local";
  auto named = Get(o, (*server)->port(), "/y");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
}

TEST_F(HttpTlsTest, WrongCaOrWrongNameFailsTheHandshake) {
  auto server = HttpServer::Start(ServerOptions(), Echo);
  ASSERT_TRUE(server.ok());
  auto r = Get(ClientOptions("other-ca"), (*server)->port(), "/");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("TLS handshake"), std::string::npos) << r.status().message();
  auto o = ClientOptions();
  o.server_name = "not-in-the-cert.example";
  auto n = Get(o, (*server)->port(), "/");
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("TLS handshake"), std::string::npos) << n.status().message();
}

TEST_F(HttpTlsTest, PlainClientAgainstTlsServerFailsCleanly) {
  auto server = HttpServer::Start(ServerOptions(), Echo);
  ASSERT_TRUE(server.ok());
  auto r = PlainClient(2s)->Get(Local((*server)->port()), "/");
  EXPECT_FALSE(r.ok() && r->status == 200);
  // And the server still serves TLS clients.
  EXPECT_TRUE(Get(ClientOptions(), (*server)->port(), "/").ok());
}

TEST_F(HttpTlsTest, ClientCertificateIsReportedOnlyWhenItVerifies) {
  auto server = HttpServer::Start(ServerOptions(/*ask_client_cert=*/true), Echo);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto none = Get(ClientOptions(), (*server)->port(), "/stop");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->body, "GET /stop loopback anonymous");

  auto o = ClientOptions();
  o.cert_file = certs_->Crt("client");
  o.key_file = certs_->Key("client");
  auto good = Get(o, (*server)->port(), "/stop");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->body, "GET /stop loopback verified");

  // A certificate from another CA: the handshake still succeeds, but it is not "verified".
  o.cert_file = certs_->Crt("stranger");
  o.key_file = certs_->Key("stranger");
  auto bad = Get(o, (*server)->port(), "/stop");
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_EQ(bad->body, "GET /stop loopback anonymous");
}

TEST_F(HttpTlsTest, BadTlsFilesAreRejectedWithTheirNames) {
  auto o = ServerOptions();
  o.cert_file = certs_->dir() + "/nope.crt";
  auto s = HttpServer::Start(o, Echo);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("nope.crt"), std::string::npos) << s.status().message();

  o = ServerOptions();
  o.key_file = certs_->Key("client");  // does not match the server certificate
  s = HttpServer::Start(o, Echo);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("does not match"), std::string::npos) << s.status().message();

  // A CA bundle without any certificate.
  std::ofstream(certs_->Crt("empty")) << "not a certificate\n";
  auto c = HttpClient::Create(ClientOptions("empty"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("no PEM certificate"), std::string::npos)
      << c.status().message();
  HttpClientOptions missing = ClientOptions();
  missing.ca_file = certs_->dir() + "/absent.pem";
  c = HttpClient::Create(missing);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("absent.pem"), std::string::npos) << c.status().message();
  HttpClientOptions no_ca;
  no_ca.tls = true;
  EXPECT_FALSE(HttpClient::Create(no_ca).ok());
}

// --- HttpClient::Send: headers, bodies from text and files, responses into files. ---

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
  return s;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/http_test_" + std::to_string(::getpid()) + "_" + name;
}

// Answers each of `answers`, in turn, on one accepted connection each: reads the request head,
// writes the answer's head, then its body, then closes (as an HTTP/1.0 server such as Python's
// http.server does).
class ScriptedHttpServer {
 public:
  explicit ScriptedHttpServer(std::vector<std::string> answers) {
    thread_ = std::thread([this, answers = std::move(answers)] {
      for (const std::string& answer : answers) {
        const int c = ::accept(listener_.fd(), nullptr, nullptr);
        if (c < 0) return;
        std::string head;
        char ch;
        while (head.find("\r\n\r\n") == std::string::npos && ::read(c, &ch, 1) == 1) {
          head.push_back(ch);
        }
        // The head and the body in separate writes, a moment apart, as Python's server writes.
        const size_t head_end = answer.find("\r\n\r\n") + 4;
        (void)!::write(c, answer.data(), head_end);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        (void)!::write(c, answer.data() + head_end, answer.size() - head_end);
        ::close(c);
      }
    });
  }
  ~ScriptedHttpServer() {
    ::shutdown(listener_.fd(), SHUT_RDWR);  // ends a pending accept
    thread_.join();
  }
  int port() const { return listener_.port(); }

 private:
  LoopbackListener listener_;
  std::thread thread_;
};

// HTTP/1.0 answers are valid: with a Content-Length, and without one (the body ends with the
// connection), and so is HTTP/1.1 with "Connection: close" and no length.
TEST(HttpSendTest, ReadsHttp10AnswersWithAndWithoutALength) {
  const std::string body = "{\"health\": true}\n";
  ScriptedHttpServer server({
      "HTTP/1.0 200 OK\r\nServer: BaseHTTP/0.6 Python/3.11.2\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body,
      "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body,
      "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n" + body,
  });
  ASSERT_GT(server.port(), 0);
  for (int status : {200, 200, 503}) {
    HttpClientRequest req;
    req.method = "GET";
    req.host_port = Local(server.port());
    req.target = "/healthz";
    auto r = PlainClient()->Send(req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, status);
    EXPECT_EQ(r->body, body);
  }
}

TEST(HttpSendTest, CarriesMethodHeadersAndATextBody) {
  HttpRequest seen;
  std::mutex mu;
  auto server = HttpServer::Start({.host = "127.0.0.1"}, [&](const HttpRequest& r) {
    std::lock_guard lock(mu);
    seen = r;
    return HttpResponse{.status = 201, .body = "made", .headers = {{"ETag", "\"abc\""}}};
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  HttpClientRequest req;
  req.method = "PUT";
  req.host_port = Local((*server)->port());
  req.target = "/bucket/key?partNumber=1";
  req.headers = {{"Host", "bucket.example"}, {"X-Amz-Date", "20150830T123600Z"}};
  req.body = "hello";
  auto r = PlainClient()->Send(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "made");
  EXPECT_EQ(HeaderValue(*r, "etag"), "\"abc\"");
  EXPECT_EQ(HeaderValue(*r, "x-missing"), "");
  std::lock_guard lock(mu);
  EXPECT_EQ(seen.method, "PUT");
  EXPECT_EQ(seen.target, "/bucket/key?partNumber=1");
  EXPECT_EQ(seen.body, "hello");
  EXPECT_EQ(seen.headers["host"], "bucket.example");
  EXPECT_EQ(seen.headers["x-amz-date"], "20150830T123600Z");
  EXPECT_EQ(seen.headers["content-length"], "5");
}

TEST(HttpSendTest, StreamsAFileRangeAsTheBody) {
  const std::string content = Pattern(3 << 20);
  const std::string path = TempPath("range");
  std::ofstream(path, std::ios::binary) << content;
  std::string seen;
  std::mutex mu;
  auto server = HttpServer::Start({.host = "127.0.0.1", .max_body_bytes = 4 << 20},
                                  [&](const HttpRequest& r) {
                                    std::lock_guard lock(mu);
                                    seen = r.body;
                                    return HttpResponse{};
                                  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  HttpClientRequest req;
  req.method = "PUT";
  req.host_port = Local((*server)->port());
  req.target = "/x";
  req.body_file = path;
  req.body_offset = 12345;
  req.body_length = (2 << 20) + 77;  // several read slices, the last one partial
  auto r = PlainClient()->Send(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::lock_guard lock(mu);
  EXPECT_TRUE(seen == content.substr(12345, (2 << 20) + 77)) << "got " << seen.size() << " bytes";

  req.body_offset = content.size() - 10;
  req.body_length = 11;
  auto beyond = PlainClient()->Send(req);
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status().code(), Code::kInvalidArgument);
  req.body_file = TempPath("absent");
  auto absent = PlainClient()->Send(req);
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("absent"), std::string::npos);
  ::unlink(path.c_str());
}

TEST(HttpSendTest, WritesA2xxBodyToTheResponseFileAndKeepsErrorsInMemory) {
  const std::string content = Pattern(5 << 20);
  auto server = HttpServer::Start({.host = "127.0.0.1"}, [&](const HttpRequest& r) {
    if (r.path == "/missing")
      return HttpResponse{.status = 404, .body = "<Error>NoSuchKey</Error>"};
    if (r.path == "/empty") return HttpResponse{};
    return HttpResponse{.body = content};
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string path = TempPath("download");
  std::ofstream(path) << "old content that must be replaced";
  HttpClientRequest req;
  req.host_port = Local((*server)->port());
  req.target = "/object";
  req.response_file = path;
  req.stall_timeout = 5s;
  auto r = PlainClient()->Send(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body.empty());
  const std::string got = testsupport::ReadFile(path);
  EXPECT_TRUE(got == content) << "file holds " << got.size() << " bytes";

  const std::string not_created = TempPath("not-created");
  req.target = "/missing";
  req.response_file = not_created;
  auto m = PlainClient()->Send(req);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->status, 404);
  EXPECT_EQ(m->body, "<Error>NoSuchKey</Error>");
  EXPECT_NE(::access(not_created.c_str(), F_OK), 0);

  // An empty 2xx body still replaces the file's content.
  req.target = "/empty";
  req.response_file = path;
  auto e = PlainClient()->Send(req);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(std::filesystem::file_size(path), 0u);

  req.target = "/object";
  req.response_file = TempPath("no-such-dir") + "/file";
  auto bad = PlainClient()->Send(req);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInternal);
  EXPECT_NE(bad.status().message().find("no-such-dir"), std::string::npos)
      << bad.status().message();
  ::unlink(path.c_str());
}

TEST(HttpSendTest, StallTimeoutFailsARequestThatMakesNoProgress) {
  LoopbackListener silent;
  ASSERT_GT(silent.port(), 0);
  HttpClientRequest req;
  req.host_port = Local(silent.port());
  req.target = "/";
  req.stall_timeout = 300ms;
  auto start = std::chrono::steady_clock::now();
  auto r = PlainClient(30s)->Send(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("no data moved"), std::string::npos) << r.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(HttpSendTest, NamesUnderLocalhostAreDialedOnLoopback) {
  auto server = HttpServer::Start({.host = "127.0.0.1"}, Echo);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto r = PlainClient()->Get("bucket.s3.localhost:" + std::to_string((*server)->port()), "/k");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "GET /k loopback anonymous");
}

TEST_F(HttpTlsTest, CaBundleAsTextAndInsecureSkipVerify) {
  auto server = HttpServer::Start(ServerOptions(), Echo);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string pem = testsupport::ReadFile(certs_->Crt("ca"));
  HttpClientOptions o;
  o.tls = true;
  o.ca_pem = pem;
  o.timeout = 5s;
  auto r = Get(o, (*server)->port(), "/pem");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "GET /pem loopback anonymous");

  // The system store does not know the test CA.
  HttpClientOptions sys;
  sys.tls = true;
  sys.system_roots = true;
  sys.timeout = 5s;
  auto refused = Get(sys, (*server)->port(), "/");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUnauthenticated) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("TLS handshake"), std::string::npos);

  // Skipping verification accepts a server from any CA, under any name.
  HttpClientOptions insecure = ClientOptions("other-ca");
  insecure.insecure_skip_verify = true;
  insecure.server_name = "not-in-the-cert.example";
  auto any = Get(insecure, (*server)->port(), "/any");
  ASSERT_TRUE(any.ok()) << any.status().ToString();
  insecure.ca_file.clear();
  EXPECT_TRUE(Get(insecure, (*server)->port(), "/none").ok());

  HttpClientOptions junk = o;
  junk.ca_pem = "not a certificate";
  auto c = HttpClient::Create(junk);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("no PEM certificate"), std::string::npos);
}

}  // namespace
}  // namespace etcdw::common
