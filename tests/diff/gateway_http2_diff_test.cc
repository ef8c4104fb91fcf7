// The gateway's paths asked over HTTP/2 with prior knowledge (h2c) on the plain client port:
// etcd 3.4.23 hands plain-text HTTP/2 to its gRPC server alone (cmux), which resets a stream
// whose content-type is not gRPC's (PROTOCOL_ERROR) and answers a gRPC one for "/v3/kv/range"
// as a method of service "v3/kv". The same curl commands against both, their exit status and
// output compared. (Over TLS, HTTP/2 clients reach the gateway: native_rpc_tls_test.cc.)

#include <regex>
#include <string>
#include <vector>

#include "diff_fixture.h"
#include "process.h"

namespace etcdw::testing {
namespace {

// curl's exit status and its output (head and body, the date masked).
std::string CurlH2c(Member& m, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"curl",       "-s", "-i", "--http2-prior-knowledge",
                                   "--max-time", "10"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.back() = "http://127.0.0.1:" + std::to_string(m.client_port()) + argv.back();
  std::string out;
  const int rc = RunCommand(argv, &out);
  static const std::regex date("date: [^\r]*\r\n");
  return "rc=" + std::to_string(rc) + "\n" + std::regex_replace(out, date, "date: D\r\n");
}

TEST_F(DiffTest, GatewayOverH2cIsRefusedLikeEtcds) {
  StartBoth();
  const std::vector<std::vector<std::string>> asks = {
      {"-d", R"({"key":"Zm9v"})", "/v3/kv/range"},
      {"-H", "content-type: application/json", "-d", "{}", "/v3/kv/put"},
      {"-H", "content-type: application/grpc-web", "-d", "{}", "/v3/kv/range"},
      // No body: the answer comes after the request's end (with one, each server may reset the
      // stream it answered before curl sent it, a race).
      {"-X", "POST", "-H", "content-type: application/grpc", "/v3/kv/range"},
      {"-X", "POST", "-H", "content-type: application/grpc", "/v3/watch"},
      {"-d", R"({"create_request":{"key":"Zm9v"}})", "/v3/watch"},
      {"/health"},
      {"/version"},
  };
  for (const auto& args : asks) {
    EXPECT_EQ(CurlH2c(etcd(), args), CurlH2c(ours(), args)) << args.back();
  }
}

}  // namespace
}  // namespace etcdw::testing
