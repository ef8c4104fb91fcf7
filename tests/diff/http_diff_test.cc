// Differential tests of the HTTP/1.1 endpoints etcd serves on its client port beside gRPC:
// status lines, headers (but Date) and bodies compared with etcd's, versions normalized.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "diff_fixture.h"

namespace etcdw::testing {
namespace {

// Sends `request` to `m`'s client port and returns the whole answer, the Date header dropped
// and the version numbers replaced by "V".
std::string Ask(Member& m, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(m.client_port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "connect failed";
  }
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  ssize_t n;
  // Until the whole body (Content-Length) is in: etcd keeps the connection open.
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
    got.append(buf, static_cast<size_t>(n));
    const size_t head_end = got.find("\r\n\r\n");
    const size_t cl = got.find("Content-Length: ");
    if (head_end != std::string::npos && cl != std::string::npos && cl < head_end &&
        got.size() >= head_end + 4 + std::stoul(got.substr(cl + 16))) {
      break;
    }
  }
  close(fd);
  std::istringstream lines(got);
  std::string line, out;
  while (std::getline(lines, line)) {
    if (line.rfind("Date: ", 0) == 0 || line.rfind("Connection: ", 0) == 0) continue;
    out += line + "\n";
  }
  for (const char* v : {"3.4.23", "3.4.0", "3.5.27", "3.5.0"}) {
    for (size_t at; (at = out.find(v)) != std::string::npos;) out.replace(at, strlen(v), "V");
  }
  return out;
}

TEST_F(DiffTest, HttpEndpointsOnTheClientPortAnswerLikeEtcd) {
  StartBoth();
  for (const std::string& req : {
           std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
           std::string("GET /version HTTP/1.1\r\nHost: x\r\n\r\n"),
           std::string("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"),
           std::string("POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"),
       }) {
    EXPECT_EQ(Ask(etcd(), req), Ask(ours(), req)) << req;
  }
}

}  // namespace
}  // namespace etcdw::testing
