// Differential tests of the HTTP/1.1 endpoints etcd serves on its client port beside gRPC:
// status lines, headers (but Date) and bodies compared with etcd's, versions normalized.

#include <cstring>
#include <sstream>

#include "diff_fixture.h"

namespace etcdw::testing {
namespace {

// Sends `request` to `m`'s client port and returns the whole answer, the Date header dropped
// and the version numbers replaced by "V".
std::string Ask(Member& m, const std::string& request) {
  const std::string got = HttpExchange(m.client_port(), request);
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
           std::string("GET /health?exclude=NOSPACE&serializable=true HTTP/1.1\r\nHost: x\r\n\r\n"),
           std::string("GET /version HTTP/1.1\r\nHost: x\r\n\r\n"),
           std::string("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"),
           std::string("POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"),
       }) {
    EXPECT_EQ(Ask(etcd(), req), Ask(ours(), req)) << req;
  }
}

}  // namespace
}  // namespace etcdw::testing
