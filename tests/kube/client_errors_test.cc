// The client's error contract (client.h): every HTTP status class maps to its code, and the
// message carries the API's Status message, the method, the path and the HTTP status; no
// answer is kUnavailable and a slow one kDeadlineExceeded.
#include <chrono>

#include "api_error.h"
#include "etcdw/common/http.h"
#include "kube_fixture.h"

namespace etcdw::kube {
namespace {

using std::chrono::milliseconds;

class ClientErrorsTest : public KubeTest {
 protected:
  void SetUp() override {
    StartServer();
    server_->Put(kNs, LeaseObject("member", "etcd-0"));
    client_ = NewClient(ConfigForServer());
    ASSERT_TRUE(client_);
  }
  std::string Path() const { return LeasePath(kNs, "member"); }

  std::unique_ptr<KubeClient> client_;
};

TEST_F(ClientErrorsTest, NotFoundCarriesTheStatusMessage) {
  auto r = client_->GetLease(kNs, "missing");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().message(),
            "GET " + LeasePath(kNs, "missing") +
                ": leases.coordination.k8s.io \"missing\" not found (HTTP 404)");
}

TEST_F(ClientErrorsTest, AConflictIsAbortedWithTheApisWords) {
  auto lease = client_->GetLease(kNs, "member");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  server_->Put(kNs, LeaseObject("member", "someone-else"));  // a newer resourceVersion
  lease->object["spec"]["holderIdentity"] = "etcd-1";
  auto r = client_->UpdateLease(*lease);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAborted);
  EXPECT_EQ(r.status().message(),
            "PUT " + Path() +
                ": Operation cannot be fulfilled on leases.coordination.k8s.io \"member\": the "
                "object has been modified; please apply your changes to the latest version and "
                "try again (HTTP 409)");
  EXPECT_EQ(server_->Get(kNs, "member").value()["spec"]["holderIdentity"], "someone-else");
}

TEST_F(ClientErrorsTest, ACreateOfAnExistingLeaseIsAlreadyExists) {
  auto r = client_->Call("POST", LeasePath(kNs), LeaseObject("member", "x").dump());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAlreadyExists);
  EXPECT_EQ(r.status().message(), "POST " + LeasePath(kNs) +
                                      ": leases.coordination.k8s.io \"member\" already exists "
                                      "(HTTP 409)");
}

TEST_F(ClientErrorsTest, AWrongTokenIsUnauthenticated) {
  auto config = ConfigForServer();
  config.token = "wrong";
  auto stranger = NewClient(config);
  ASSERT_TRUE(stranger);
  auto r = stranger->GetLease(kNs, "member");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnauthenticated);
  EXPECT_EQ(r.status().message(), "GET " + Path() + ": Unauthorized (HTTP 401)");
  config.token.clear();
  auto anonymous = NewClient(config);
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->GetLease(kNs, "member").status().code(), Code::kUnauthenticated);
}

TEST_F(ClientErrorsTest, EachStatusClassHasItsCode) {
  const struct {
    int http;
    Code code;
    std::string words;
  } cases[] = {
      {403, Code::kPermissionDenied, "is forbidden: User"},
      {500, Code::kUnavailable, "Internal error occurred: injected fault (HTTP 500)"},
      {503, Code::kUnavailable, "the server is currently unable to handle the request"},
      {429, Code::kUnavailable, "Too many requests"},
      {400, Code::kInvalidArgument, "(HTTP 400)"},
      {422, Code::kInvalidArgument, "(HTTP 422)"},
      {405, Code::kInvalidArgument, "(HTTP 405)"},
  };
  for (const auto& c : cases) {
    server_->FailNext(1, c.http, "GET");
    auto r = client_->GetLease(kNs, "member");
    ASSERT_FALSE(r.ok()) << c.http;
    EXPECT_EQ(r.status().code(), c.code) << c.http << ": " << r.status().message();
    EXPECT_EQ(r.status().message().rfind("GET " + Path() + ": ", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(c.words), std::string::npos) << r.status().message();
    EXPECT_TRUE(client_->GetLease(kNs, "member").ok()) << "the fault was for one request";
  }
}

TEST_F(ClientErrorsTest, RequestsTheServerRejectsAreInvalid) {
  // A PUT without the resourceVersion read: the API refuses unconditional updates of Leases.
  auto lease = client_->GetLease(kNs, "member");
  ASSERT_TRUE(lease.ok());
  lease->object["metadata"].erase("resourceVersion");
  auto r = client_->UpdateLease(*lease);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
  EXPECT_NE(r.status().message().find("must be specified for an update (HTTP 422)"),
            std::string::npos)
      << r.status().message();
  auto patch = client_->Call("PATCH", Path(), "{}", "application/x-unknown");
  EXPECT_EQ(patch.status().code(), Code::kInvalidArgument);
  EXPECT_NE(patch.status().message().find("(HTTP 415)"), std::string::npos);
  EXPECT_EQ(client_->Call("GET", "apis").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(client_->GetLease("", "member").status().code(), Code::kInvalidArgument);
}

TEST_F(ClientErrorsTest, AStoppedServerIsUnavailableUntilItComesBack) {
  server_->Stop();
  auto r = client_->GetLease(kNs, "member");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(r.status().message().rfind("GET " + Path() + ": ", 0), 0u) << r.status().message();
  ASSERT_TRUE(server_->Start().ok());  // the same port, the same leases
  auto back = client_->GetLease(kNs, "member");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->holder_identity, "etcd-0");
}

TEST_F(ClientErrorsTest, ASlowServerExceedsTheDeadline) {
  KubeClientOptions o;
  o.timeout = milliseconds(200);
  auto impatient = NewClient(ConfigForServer(), o);
  ASSERT_TRUE(impatient);
  server_->SetDelay(milliseconds(3000));
  const auto start = std::chrono::steady_clock::now();
  auto r = impatient->GetLease(kNs, "member");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded) << r.status().message();
  EXPECT_EQ(r.status().message().rfind("GET " + Path() + ": ", 0), 0u) << r.status().message();
  EXPECT_LT(took, milliseconds(2000));
  server_->SetDelay(milliseconds(0));
}

TEST_F(ClientErrorsTest, AServerOutsideTheTrustedCaIsUnavailable) {
  auto config = ConfigForServer();
  config.ca_file = certs_->Crt("other-ca");
  auto r = NewClient(config)->GetLease(kNs, "member");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().message();
  config.ca_file.clear();
  config.insecure_skip_tls_verify = true;
  EXPECT_TRUE(NewClient(config)->GetLease(kNs, "member").ok());
  EXPECT_TRUE(server_->requests().back().bearer_token == kToken);
}

// Answers that are not the API's Status objects: a proxy's text, an empty body, a 2xx that is
// not JSON.
TEST_F(ClientErrorsTest, AnswersWithoutAStatusObject) {
  common::HttpServerOptions o;
  o.host = "127.0.0.1";
  auto proxy = common::HttpServer::Start(o, [](const common::HttpRequest& r) {
    common::HttpResponse a;
    if (r.path == "/text") {
      a.status = 404;
      a.body = "404 page not found\n";
    } else if (r.path == "/empty") {
      a.status = 502;
    } else {
      a.status = 200;
      a.body = "<html>";
    }
    return a;
  });
  ASSERT_TRUE(proxy.ok());
  KubeConfig c;
  c.server = "http://127.0.0.1:" + std::to_string((*proxy)->port());
  auto client = NewClient(c);
  ASSERT_TRUE(client);
  auto text = client->Call("GET", "/text");
  EXPECT_EQ(text.status().code(), Code::kNotFound);
  EXPECT_EQ(text.status().message(), "GET /text: 404 page not found (HTTP 404)");
  auto empty = client->Call("DELETE", "/empty");
  EXPECT_EQ(empty.status().code(), Code::kUnavailable);
  EXPECT_EQ(empty.status().message(), "DELETE /empty: Bad Gateway (HTTP 502)");
  auto html = client->Call("GET", "/html");
  EXPECT_EQ(html.status().code(), Code::kInternal);
  EXPECT_EQ(html.status().message(), "GET /html: the answer (HTTP 200) is not JSON");
}

// Found by fuzz/kube_json_fuzzer.cc: a JSON answer whose "kind" was no string threw out of
// ApiError (nlohmann's value() converting it), ending the process on any such error answer.
TEST(ApiErrorTest, AnAnswerWhoseKindIsNoStringIsText) {
  for (const std::string body : {R"({"kind":30006454})", R"({"kind":null,"message":"m"})",
                                 R"({"kind":["Status"],"message":"m"})"}) {
    const Status st = ApiError("GET", "/p", 404, body);
    EXPECT_EQ(st.code(), Code::kNotFound) << body;
    EXPECT_EQ(st.message(), "GET /p: " + body + " (HTTP 404)");
  }
  const Status st = ApiError("PUT", "/p", 409, R"({"kind":"Status","message":3,"reason":4})");
  EXPECT_EQ(st.code(), Code::kAborted);
  EXPECT_EQ(st.message(), R"(PUT /p: {"kind":"Status","message":3,"reason":4} (HTTP 409))");
}

// A server URL with a path: every API path goes below it.
TEST_F(ClientErrorsTest, AServerPathPrefixesEveryRequest) {
  auto config = ConfigForServer();
  config.server += "/proxy/";
  auto r = NewClient(config)->GetLease(kNs, "member");
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(server_->requests().back().target, "/proxy" + Path());
}

}  // namespace
}  // namespace etcdw::kube
