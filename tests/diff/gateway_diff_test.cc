// Differential tests of the gRPC gateway: the same JSON requests POSTed to etcd 3.4.23's and to
// etcd-wrapper's client port, answers compared whole (status line, headers but Date and
// Content-Length, body) after member-specific values (IDs, URLs, names) are masked.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <tuple>
#include <vector>

#include "diff_fixture.h"

namespace etcdw::testing {
namespace {

// The answer to `request`, normalized: no Date, Connection or Content-Length header, cluster and
// member IDs, member names and URLs masked, versions as "V".
std::string AskGatewayOf(Member& m, const std::string& request) {
  std::string got = HttpExchange(m.client_port(), request);
  // A chunked body as its data, then its trailer section (chunk boundaries are each server's).
  const size_t head_end = got.find("\r\n\r\n");
  if (head_end != std::string::npos &&
      got.substr(0, head_end).find("Transfer-Encoding: chunked") != std::string::npos) {
    std::string data;
    size_t at = head_end + 4;
    while (true) {
      const size_t eol = got.find("\r\n", at);
      if (eol == std::string::npos) break;
      const size_t n = std::stoul(got.substr(at, eol - at), nullptr, 16);
      at = eol + 2;
      if (n == 0) break;
      data += got.substr(at, n);
      at += n + 2;
    }
    got =
        got.substr(0, head_end + 4) + data + "\n[trailer]\n" + got.substr(std::min(at, got.size()));
  }
  std::istringstream lines(got);
  std::string line, out;
  while (std::getline(lines, line)) {
    if (line.rfind("Date: ", 0) == 0 || line.rfind("Connection: ", 0) == 0 ||
        line.rfind("Content-Length: ", 0) == 0) {
      continue;
    }
    out += line + "\n";
  }
  static const std::regex ids(R"re("(cluster_id|member_id|ID)":"[0-9]+")re");
  static const std::regex urls(R"re("(peerURLs|clientURLs)":\[[^\]]*\])re");
  static const std::regex names(R"re("name":"[^"]*")re");
  static const std::regex versions(R"re(3\.[45]\.[0-9]+)re");
  out = std::regex_replace(out, ids, "\"$1\":\"X\"");
  out = std::regex_replace(out, urls, "\"$1\":[X]");
  out = std::regex_replace(out, names, "\"name\":\"X\"");
  return std::regex_replace(out, versions, "V");
}

std::string GatewayPost(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// With an Authorization header (the auth token, as etcd's gateway takes it).
std::string GatewayPostAs(const std::string& token, const std::string& path,
                          const std::string& body) {
  std::string req = GatewayPost(path, body);
  if (!token.empty()) req.insert(req.find("\r\n") + 2, "Authorization: " + token + "\r\n");
  return req;
}

// The Auth service through the gateway: management calls, authenticate (each side's token kept
// and masked in the answer), then requests carrying the token in the Authorization header.
TEST_F(DiffTest, GatewayAuthAnswersLikeEtcds) {
  StartBoth();
  const std::vector<std::pair<std::string, std::string>> setup = {
      {"/v3/auth/user/add", R"({"name":"root","password":"rootpw"})"},
      {"/v3/auth/role/add", R"({"name":"root"})"},
      {"/v3/auth/user/grant", R"({"user":"root","role":"root"})"},
      {"/v3/auth/user/add", R"({"name":"alice","password":"alicepw"})"},
      {"/v3/auth/role/add", R"({"name":"reader"})"},
      {"/v3/auth/role/grant", R"({"name":"reader","perm":{"permType":"READ","key":"YQ==",)"
                              R"("range_end":"Yg=="}})"},
      {"/v3/auth/user/grant", R"({"user":"alice","role":"reader"})"},
      {"/v3/kv/put", R"({"key":"YQ==","value":"MQ=="})"},
      {"/v3/auth/enable", "{}"},
      {"/v3/auth/authenticate", R"({"name":"alice","password":"wrong"})"},
  };
  for (const auto& [path, body] : setup) {
    const std::string req = GatewayPost(path, body);
    EXPECT_EQ(AskGatewayOf(etcd(), req), AskGatewayOf(ours(), req)) << path << " " << body;
  }
  static const std::regex token_re(R"re("token":"([^"]+)")re");
  std::map<std::string, std::map<Member*, std::string>> tokens;
  for (const auto& [user, pw] :
       std::vector<std::pair<std::string, std::string>>{{"alice", "alicepw"}, {"root", "rootpw"}}) {
    const std::string req = GatewayPost("/v3/auth/authenticate",
                                        R"({"name":")" + user + R"(","password":")" + pw + "\"}");
    std::string answers[2];
    int i = 0;
    for (Member* m : both()) {
      std::string got = AskGatewayOf(*m, req);
      std::smatch match;
      EXPECT_TRUE(std::regex_search(got, match, token_re)) << got;
      if (!match.empty()) tokens[user][m] = match[1];
      answers[i++] = std::regex_replace(got, token_re, R"("token":"T")");
    }
    EXPECT_EQ(answers[0], answers[1]) << "authenticate " << user;
  }
  const std::vector<std::tuple<std::string, std::string, std::string>> calls = {
      {"", "/v3/kv/range", R"({"key":"YQ=="})"},
      {"alice", "/v3/kv/range", R"({"key":"YQ=="})"},
      {"alice", "/v3/kv/range", R"({"key":"Yg=="})"},
      {"alice", "/v3/kv/put", R"({"key":"YQ==","value":"Mg=="})"},
      {"alice", "/v3/auth/user/list", "{}"},
      {"alice", "/v3/auth/user/get", R"({"name":"alice"})"},
      {"root", "/v3/auth/user/list", "{}"},
      {"root", "/v3/auth/role/get", R"({"role":"reader"})"},
      {"root", "/v3/kv/put", R"({"key":"Yg==","value":"Mg=="})"},
      {"root", "/v3/auth/disable", "{}"},
      {"", "/v3/kv/range", R"({"key":"Yg=="})"},
  };
  for (const auto& [user, path, body] : calls) {
    const std::string a = AskGatewayOf(etcd(), GatewayPostAs(tokens[user][&etcd()], path, body));
    const std::string b = AskGatewayOf(ours(), GatewayPostAs(tokens[user][&ours()], path, body));
    EXPECT_EQ(a, b) << user << " " << path << " " << body;
  }
}

TEST_F(DiffTest, GatewayUnaryCallsAnswerLikeEtcds) {
  StartBoth();
  const std::vector<std::pair<std::string, std::string>> calls = {
      {"/v3/kv/put", R"({"key":"Zm9v","value":"YmFy"})"},
      {"/v3/kv/put", R"({"key":"Zm9vMg==","value":"YmF6","prev_kv":true})"},
      {"/v3/kv/put", R"({"key":"Zm9vMg==","value":"cXV4","prev_kv":true})"},
      {"/v3/kv/range", R"({"key":"Zm9v"})"},
      {"/v3/kv/range", R"({"key":"Zm9v","range_end":"Zm9w","keys_only":true,"limit":"1"})"},
      {"/v3/kv/range", R"({"key":"AA==","range_end":"AA==","count_only":true})"},
      {"/v3/kv/range", R"({"key":"Zm9v","sort_order":"DESCEND","sort_target":"MOD",)"
                       R"("range_end":"Zm9w"})"},
      {"/v3beta/kv/range", R"({"key":"Zm9v","revision":"2"})"},
      {"/v3/kv/range", R"({"key":"Zm9v","revision":"100"})"},
      {"/v3/kv/range", "{}"},
      {"/v3/kv/range", ""},
      {"/v3/kv/range", R"({"key":"Zm9v","unknown":1} {"key":"eA=="})"},
      {"/v3/kv/txn", R"({"compare":[{"key":"Zm9v","result":"EQUAL","target":"VALUE",)"
                     R"("value":"YmFy"}],"success":[{"request_range":{"key":"Zm9v"}},)"
                     R"({"request_put":{"key":"dA==","value":"dg=="}}],)"
                     R"("failure":[{"request_delete_range":{"key":"Zm9v"}}]})"},
      {"/v3/kv/txn", R"({"compare":[{"key":"Zm9v","target":"VERSION","result":"GREATER",)"
                     R"("version":"5"}],"failure":[{"request_delete_range":{"key":"dA==",)"
                     R"("prev_kv":true}}]})"},
      {"/v3/kv/deleterange", R"({"key":"Zm9vMg==","prev_kv":true})"},
      {"/v3/kv/compaction", R"({"revision":"100"})"},
      {"/v3/kv/compaction", R"({"revision":"3","physical":true})"},
      {"/v3/kv/range", R"({"key":"Zm9v","revision":"2"})"},
      {"/v3/lease/grant", R"({"TTL":"60","ID":"4242"})"},
      {"/v3/lease/grant", R"({"TTL":"60","ID":"4242"})"},
      {"/v3/kv/put", R"({"key":"bA==","value":"dg==","lease":"4242"})"},
      {"/v3/kv/lease/leases", "{}"},
      {"/v3/lease/revoke", R"({"ID":"1"})"},
      {"/v3/kv/lease/revoke", R"({"ID":"4242"})"},
      {"/v3/lease/timetolive", R"({"ID":"4242","keys":true})"},
      {"/v3/lease/grant", R"({"TTL":"60","ID":"77"})"},
      {"/v3/lease/keepalive", R"({"ID":"77"} {"ID":"77"}{"ID":"78"})"},
      {"/v3/lease/keepalive", R"({"ID":"77"} {bad)"},
      {"/v3/lease/keepalive", ""},
      {"/v3/maintenance/alarm", R"({"action":"GET"})"},
      {"/v3/cluster/member/promote", R"({"ID":"1"})"},
      {"/v3/kv/nothing", "{}"},
      {"/v3alpha/kv/range", R"({"key":"Zm9v"})"},
  };
  for (const auto& [path, body] : calls) {
    const std::string req = GatewayPost(path, body);
    EXPECT_EQ(AskGatewayOf(etcd(), req), AskGatewayOf(ours(), req)) << path << " " << body;
  }
  const std::string get =
      "GET /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(AskGatewayOf(etcd(), get), AskGatewayOf(ours(), get));
}

// Malformed requests: bodies that are not JSON, or not the method's message (Go's encoding/json
// and jsonpb words, byte for byte), streams refused on their first message, unknown paths,
// other methods than POST, and a body over the gRPC message limit.
TEST_F(DiffTest, GatewayMalformedRequestsAnswerLikeEtcds) {
  StartBoth();
  const std::vector<std::pair<std::string, std::string>> calls = {
      {"/v3/kv/range", "{"},
      {"/v3/kv/range", "{bad"},
      {"/v3/kv/range", R"({"key")"},
      {"/v3/kv/range", R"({"key":"Zm9v",)"},
      {"/v3/kv/range", "tru"},
      {"/v3/kv/range", "[]"},
      {"/v3/kv/range", "1"},
      {"/v3/kv/range", R"("x")"},
      {"/v3/kv/range", "null"},
      {"/v3/kv/range", "  \n "},
      {"/v3/kv/range", "{'key':1}"},
      {"/v3/kv/range", R"({"key" "a"})"},
      {"/v3/kv/range", R"({"key":"a" "b"})"},
      {"/v3/kv/range", R"({"key":"\x"})"},
      {"/v3/kv/range", R"({"key":"\u12"})"},
      {"/v3/kv/range", "{\"key\":\"a\tb\"}"},
      {"/v3/kv/range", "\x01"},
      {"/v3/kv/range", "\xc3\xa9"},
      {"/v3/kv/range", R"({"limit":-})"},
      {"/v3/kv/range", R"({"limit":01})"},
      {"/v3/kv/range", R"({"limit":1e})"},
      {"/v3/kv/range", R"({"limit":1.})"},
      {"/v3/kv/range", R"([1 2])"},
      {"/v3/kv/range", R"({"key":123})"},
      {"/v3/kv/range", R"({"key":"!!"})"},
      {"/v3/kv/range", R"({"key":"Zm9"})"},
      {"/v3/kv/range", R"({"key":"Zm9vZ"})"},
      {"/v3/kv/range", R"({"key":"Zg="})"},
      {"/v3/kv/range", R"({"key":[102,256]})"},
      {"/v3/kv/range", R"({"key":{}})"},
      {"/v3/kv/range", R"({"limit":"abc"})"},
      {"/v3/kv/range", R"({"limit":"1 2"})"},
      {"/v3/kv/range", R"({"limit":""})"},
      {"/v3/kv/range", R"({"limit":1.5})"},
      {"/v3/kv/range", R"({"limit":"1.5"})"},
      {"/v3/kv/range", R"({"limit":true})"},
      {"/v3/kv/range", R"({"limit":[1]})"},
      {"/v3/kv/range", R"({"limit":99999999999999999999})"},
      {"/v3/kv/range", R"({"sort_order":"FOO"})"},
      {"/v3/kv/range", R"({"sort_order":"fo\"o"})"},
      {"/v3/kv/range", R"({"sort_order":true})"},
      {"/v3/kv/range", R"({"sort_order":3000000000})"},
      {"/v3/kv/range", R"({"keys_only":"true"})"},
      {"/v3/kv/range", R"({"keys_only":1})"},
      {"/v3/kv/range", R"({"key":"Zm9v","max_mod_revision":"-"})"},
      {"/v3/kv/put", R"({"key":"Zm9v","value":5})"},
      {"/v3/kv/txn", R"({"compare":{}})"},
      {"/v3/kv/txn", R"({"compare":[{"key":"Zm9v","result":"SAME"}]})"},
      {"/v3/kv/txn", R"({"success":[{"request_put":"x"}]})"},
      {"/v3/kv/txn", R"({"success":[{"request_put":{"key":"Zm9v","lease":"x1"}}]})"},
      {"/v3/lease/grant", R"({"TTL":"ten"})"},
      {"/v3/lease/revoke", R"({"ID":1e3})"},
      {"/v3/auth/user/add", R"({"name":1})"},
      {"/v3/cluster/member/add", R"({"peerURLs":"http://x"})"},
      {"/v3/maintenance/alarm", R"({"action":"LOUD"})"},
      {"/v3/watch", "{bad"},
      {"/v3/watch", R"({"create_request":{"key":5}})"},
      {"/v3/lease/keepalive", R"({"ID":"x"})"},
      {"/v3/kv/range/", "{}"},
      {"/v3/", "{}"},
      {"/v3beta/kv/nothing", "{}"},
  };
  for (const auto& [path, body] : calls) {
    const std::string req = GatewayPost(path, body);
    EXPECT_EQ(AskGatewayOf(etcd(), req), AskGatewayOf(ours(), req)) << path << " " << body;
  }
  for (const std::string method : {"GET", "PUT", "DELETE", "PATCH"}) {
    for (const std::string path : {"/v3/kv/range", "/v3/watch", "/v3/nothing"}) {
      const std::string req = method + " " + path +
                              " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                              "Content-Length: 2\r\n\r\n{}";
      EXPECT_EQ(AskGatewayOf(etcd(), req), AskGatewayOf(ours(), req)) << method << " " << path;
    }
  }
  // Over the gRPC server's message limit (2 MiB here): refused as the gRPC server refuses it.
  const std::string big =
      GatewayPost("/v3/kv/put", R"({"key":"Zm9v","value":")" + std::string(4 << 20, 'A') + "\"}");
  EXPECT_EQ(AskGatewayOf(etcd(), big), AskGatewayOf(ours(), big));
}

// A watch over the gateway: the stream's lines, up to the one that holds `until_each[i]`, after
// `writes[i]` ran (the first write runs once the watch is created).
std::string GatewayWatchOf(Member& m, const std::string& body,
                           const std::vector<std::function<void()>>& writes,
                           const std::vector<std::string>& until_each) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(m.client_port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "connect failed";
  }
  const std::string req = GatewayPost("/v3/watch", body);
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[16384];
  auto read_until = [&](const std::string& what) {
    while (got.find(what) == std::string::npos) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      got.append(buf, static_cast<size_t>(n));
    }
    return true;
  };
  bool ok = read_until("\"created\":true");
  for (size_t i = 0; ok && i < writes.size(); ++i) {
    writes[i]();
    ok = read_until(until_each[i]);
  }
  close(fd);
  if (!ok) return "cut: " + got;
  // The head as AskGatewayOf normalizes it, then the chunks' data (the boundaries are each
  // server's own).
  const size_t head_end = got.find("\r\n\r\n");
  std::string data;
  for (size_t at = head_end + 4;;) {
    const size_t eol = got.find("\r\n", at);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(got.substr(at, eol - at), nullptr, 16);
    if (n == 0 || eol + 2 + n > got.size()) break;
    data += got.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  std::string head;
  std::istringstream lines(got.substr(0, head_end + 2));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Date: ", 0) != 0 && line.rfind("Connection: ", 0) != 0) head += line + "\n";
  }
  static const std::regex ids(R"re("(cluster_id|member_id)":"[0-9]+")re");
  return std::regex_replace(head + data, ids, "\"$1\":\"X\"");
}

TEST_F(DiffTest, GatewayWatchStreamsLikeEtcds) {
  StartBoth();
  for (Member* m : {&etcd(), &ours()}) ASSERT_TRUE(m->client().Put("w0", "old").ok());
  auto run = [&](Member& m) {
    Client& c = m.client();
    return GatewayWatchOf(
        m, R"({"create_request":{"key":"dw==","range_end":"eA==","prev_kv":true}})",
        {[&] { EXPECT_TRUE(c.Put("w0", "new").ok()); }, [&] { EXPECT_TRUE(c.Put("w1", "v").ok()); },
         [&] {
           etcdserverpb::DeleteRangeRequest del;
           del.set_key("w0");
           etcdserverpb::DeleteRangeResponse resp;
           EXPECT_TRUE(c.kv->DeleteRange(Ctx().get(), del, &resp).ok());
         }},
        {R"("value":"b2xk"}}]}})", R"("key":"dzE=")", R"("type":"DELETE")"});
  };
  EXPECT_EQ(run(etcd()), run(ours()));
}

}  // namespace
}  // namespace etcdw::testing
