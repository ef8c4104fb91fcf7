// HTTP/1.x connections kept alive as etcd 3.4.23's (Go's net/http) keeps them: requests one
// after the other on one connection, pipelined ones answered in order, a gateway stream that
// ends followed by more requests, HTTP/1.0's keep-alive, "Connection: close", a missing Host.
// Each side gets the same bytes on one raw TCP connection; the answers are compared whole
// (Connection and Content-Length headers included), with dates, IDs and versions masked.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "diff_fixture.h"

namespace etcdw::testing {
namespace {

// One client connection, read answer by answer.
class RawHttp {
 public:
  explicit RawHttp(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawHttp() { close(fd_); }
  RawHttp(const RawHttp&) = delete;
  RawHttp& operator=(const RawHttp&) = delete;

  void Send(const std::string& bytes) {
    ASSERT_TRUE(connected_);
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  // The next answer, whole: its head, then a body framed by Content-Length, by chunks (through
  // the trailer section), or by the end of the connection. What came before a timeout (5 s),
  // marked "<cut>", if it did not end.
  std::string NextAnswer() {
    size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return Take(buf_.size()) + "<cut>";
    }
    const std::string head = buf_.substr(0, head_end + 4);
    const size_t cl = head.find("Content-Length: ");
    if (cl != std::string::npos) {
      const size_t total = head_end + 4 + std::stoul(head.substr(cl + 16));
      while (buf_.size() < total) {
        if (!Fill()) return Take(buf_.size()) + "<cut>";
      }
      return Take(total);
    }
    if (head.find("Transfer-Encoding: chunked") != std::string::npos) {
      size_t at = head_end + 4;
      while (true) {  // chunks, up to the last (empty) one
        size_t eol;
        while ((eol = buf_.find("\r\n", at)) == std::string::npos) {
          if (!Fill()) return Take(buf_.size()) + "<cut>";
        }
        const size_t n = std::stoul(buf_.substr(at, eol - at), nullptr, 16);
        if (n == 0) {
          at = eol + 2;
          break;
        }
        while (buf_.size() < eol + 2 + n + 2) {
          if (!Fill()) return Take(buf_.size()) + "<cut>";
        }
        at = eol + 2 + n + 2;
      }
      size_t end;  // the trailer section ends with an empty line
      while ((end = buf_.find("\r\n", at)) == std::string::npos || end != at) {
        if (end != std::string::npos) {
          at = end + 2;
          continue;
        }
        if (!Fill()) return Take(buf_.size()) + "<cut>";
      }
      return Take(at + 2);
    }
    if (head.rfind("HTTP/1.1 100 ", 0) == 0) return Take(head_end + 4);
    while (Fill()) {
    }
    return Take(buf_.size()) + (eof_ ? "<closed>" : "<cut>");
  }

  // Whether the server closed the connection (within `wait_ms`), nothing more arriving before.
  bool ClosedByServer(int wait_ms = 5000) {
    while (!eof_) {
      if (!Fill(wait_ms)) break;
    }
    return eof_ && buf_.empty();
  }

 private:
  bool Fill(int wait_ms = 5000) {
    if (eof_) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) return false;
    char b[16384];
    const ssize_t n = recv(fd_, b, sizeof b, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }
  std::string Take(size_t n) {
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

// Dates, member and cluster IDs, versions, and so lengths masked.
std::string Masked(std::string answer) {
  static const std::regex date("Date: [^\r]*\r\n");
  static const std::regex length("Content-Length: [0-9]+\r\n");
  static const std::regex chunk_size("\r\n[1-9a-f][0-9a-f]*\r\n");
  answer = std::regex_replace(answer, length, "Content-Length: N\r\n");
  answer = std::regex_replace(answer, chunk_size, "\r\nN\r\n");
  static const std::regex ids(R"re("(cluster_id|member_id)":"[0-9]+")re");
  static const std::regex versions(R"re(3\.[45]\.[0-9]+)re");
  answer = std::regex_replace(answer, date, "Date: D\r\n");
  answer = std::regex_replace(answer, ids, "\"$1\":\"X\"");
  return std::regex_replace(answer, versions, "V");
}

// Sends each of `requests` on `conn` once the one before is answered; the answers, masked.
std::vector<std::string> OneByOne(RawHttp& conn, const std::vector<std::string>& requests) {
  std::vector<std::string> answers;
  for (const std::string& r : requests) {
    conn.Send(r);
    answers.push_back(Masked(conn.NextAnswer()));
  }
  return answers;
}

std::string Post(const std::string& path, const std::string& body, const std::string& extra = "",
                 const std::string& version = "HTTP/1.1") {
  return "POST " + path + " " + version + "\r\nHost: 127.0.0.1\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string HttpGet(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + "\r\n";
}

// Requests of every kind of answer: a message, an error (chunked, with a trailer), a bad body,
// a 404, a 405, the plain HTTP endpoints.
std::vector<std::string> MixedRequests() {
  return {
      Post("/v3/kv/put", R"({"key":"a2E=","value":"dg=="})"),
      Post("/v3/kv/range", R"({"key":"a2E="})"),
      Post("/v3/kv/range", "{}"),
      Post("/v3/kv/range", "{bad"),
      HttpGet("/version"),
      HttpGet("/health"),
      Post("/v3/nothing", "{}"),
      HttpGet("/v3/kv/range"),
      Post("/v3/kv/range", R"({"key":"a2E=","keys_only":true})"),
  };
}

TEST_F(DiffTest, GatewayKeepsConnectionsAliveLikeEtcd) {
  StartBoth();
  const std::vector<std::string> requests = MixedRequests();
  // One after the other: each answered before the next is sent.
  std::vector<std::string> seen[2];
  for (int side = 0; side < 2; ++side) {
    Member& m = side == 0 ? etcd() : ours();
    RawHttp conn(m.client_port());
    seen[side] = OneByOne(conn, requests);
    EXPECT_FALSE(conn.ClosedByServer(500)) << m.name() << ": the connection stays open";
  }
  ASSERT_EQ(seen[0].size(), seen[1].size());
  for (size_t i = 0; i < seen[0].size(); ++i) {
    EXPECT_EQ(seen[0][i], seen[1][i]) << "request " << i << ": " << requests[i];
  }
}

TEST_F(DiffTest, GatewayAnswersPipelinedRequestsInOrderLikeEtcd) {
  StartBoth();
  std::vector<std::string> requests = MixedRequests();
  for (int i = 0; i < 20; ++i) {
    requests.push_back(Post("/v3/kv/put", R"({"key":"cA==","value":")" +
                                              std::string(i % 3 == 0 ? "MQ==" : "Mg==") + "\"}"));
  }
  requests.push_back(Post("/v3/kv/range", R"({"key":"cA=="})", "Connection: close\r\n"));
  std::string all;
  for (const std::string& r : requests) all += r;
  std::vector<std::string> seen[2];
  for (int side = 0; side < 2; ++side) {
    Member& m = side == 0 ? etcd() : ours();
    RawHttp conn(m.client_port());
    conn.Send(all);  // every request at once
    for (size_t i = 0; i < requests.size(); ++i) seen[side].push_back(Masked(conn.NextAnswer()));
    EXPECT_TRUE(conn.ClosedByServer()) << m.name() << ": Connection: close closes";
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(seen[0][i], seen[1][i]) << "request " << i << ": " << requests[i];
  }
}

TEST_F(DiffTest, GatewayConnectionOutlivesAStreamLikeEtcds) {
  StartBoth();
  const std::vector<std::string> requests = {
      Post("/v3/lease/grant", R"({"TTL":"600","ID":"4321"})"),
      // A stream that ends once its messages are answered, then requests on the same
      // connection (a lease TTL could differ by a second: it is not compared).
      Post("/v3/lease/keepalive", R"({"ID":"4321"} {"ID":"999"})"),
      Post("/v3/kv/range", R"({"key":"a2E="})"),
      // Refused on its first message: an answer like a unary error.
      Post("/v3/watch", "{bad"),
      HttpGet("/version"),
  };
  static const std::regex ttl(R"re("TTL":"[0-9]+")re");
  std::vector<std::string> seen[2];
  for (int side = 0; side < 2; ++side) {
    Member& m = side == 0 ? etcd() : ours();
    RawHttp conn(m.client_port());
    seen[side] = OneByOne(conn, requests);
    for (std::string& a : seen[side]) a = std::regex_replace(a, ttl, "\"TTL\":\"T\"");
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(seen[0][i], seen[1][i]) << "request " << i << ": " << requests[i];
  }
}

TEST_F(DiffTest, GatewayHttp10AndHostRulesLikeEtcds) {
  StartBoth();
  const std::string keep = "Connection: keep-alive\r\n";
  // Each list runs on one connection; the server closes it after the last answer.
  const std::vector<std::vector<std::string>> conversations = {
      {"GET /version HTTP/1.0\r\n\r\n"},
      {"GET /version HTTP/1.0\r\n" + keep + "\r\n", "GET /health HTTP/1.0\r\n" + keep + "\r\n",
       Post("/v3/kv/range", R"({"key":"a2E="})", keep, "HTTP/1.0"),
       // An error is chunked for HTTP/1.1; HTTP/1.0 gets its bare data, and the end closes.
       Post("/v3/kv/range", "{}", keep, "HTTP/1.0")},
      {Post("/v3/kv/range", "{bad", "", "HTTP/1.0")},
      {"GET /version HTTP/1.1\r\n\r\n"},
      {"POST /v3/kv/range HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"},
      {"GET /version HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"},
      // Requests Go's server refuses itself.
      {"POST /v3/kv/range HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"},
      {"POST /v3/kv/range HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n"
       "\r\n{}"},
      {"POST /v3/kv/range HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n"
       "\r\n{}",
       HttpGet("/health", "Connection: close\r\n")},
      {"GET /version HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"},
      {HttpGet("/version", "Connection: close\r\n")},
  };
  for (const auto& conversation : conversations) {
    std::vector<std::string> seen[2];
    for (int side = 0; side < 2; ++side) {
      Member& m = side == 0 ? etcd() : ours();
      RawHttp conn(m.client_port());
      seen[side] = OneByOne(conn, conversation);
      seen[side].push_back(conn.ClosedByServer() ? "closed" : "open");
    }
    EXPECT_EQ(seen[0], seen[1]) << conversation.front();
  }
}

}  // namespace
}  // namespace etcdw::testing
