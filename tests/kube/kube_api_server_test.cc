// The test API server itself (tests/support/kube_api_server.h), seen over HTTP: the Status
// objects kube-apiserver answers with, create/list/delete, the three PATCH types, discovery,
// the request log, faults by method, and a restart on the same port.
#include "etcdw/common/http.h"
#include "kube_fixture.h"

namespace etcdw::kube {
namespace {

using nlohmann::json;

class KubeApiServerTest : public KubeTest {
 protected:
  void SetUp() override {
    StartServer();
    client_ = NewClient(ConfigForServer());
    ASSERT_TRUE(client_);
    common::HttpClientOptions o;
    o.tls = true;
    o.ca_file = certs_->Crt("ca");
    auto raw = common::HttpClient::Create(o);
    ASSERT_TRUE(raw.ok());
    raw_ = std::move(raw).value();
  }
  // The raw answer to a request with the token.
  common::HttpResponse Raw(const std::string& method, const std::string& target,
                           const std::string& body = "",
                           const std::string& content_type = "application/json") {
    common::HttpClientRequest r;
    r.method = method;
    r.host_port = "127.0.0.1:" + std::to_string(server_->port());
    r.target = target;
    r.headers.emplace_back("Authorization", std::string("Bearer ") + kToken);
    if (!body.empty()) r.headers.emplace_back("Content-Type", content_type);
    r.body = body;
    auto a = raw_->Send(r);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? *a : common::HttpResponse{};
  }
  json Create(const std::string& name) {
    auto r = client_->Call("POST", LeasePath(kNs), LeaseObject(name, "etcd-0").dump());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json();
  }

  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<common::HttpClient> raw_;
};

TEST_F(KubeApiServerTest, TheStatusObjectsAreTheApis) {
  json created = Create("l");
  created["metadata"]["resourceVersion"] = "1";
  auto conflict = Raw("PUT", LeasePath(kNs, "l"), created.dump());
  EXPECT_EQ(conflict.status, 409);
  EXPECT_EQ(HeaderValue(conflict, "content-type"), "application/json");
  EXPECT_EQ(
      json::parse(conflict.body),
      json::parse(
          R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":)"
          R"("Operation cannot be fulfilled on leases.coordination.k8s.io \"l\": the object has )"
          R"(been modified; please apply your changes to the latest version and try again",)"
          R"("reason":"Conflict","details":{"name":"l","group":"coordination.k8s.io",)"
          R"("kind":"leases"},"code":409})"));

  auto missing = Raw("GET", LeasePath(kNs, "nope"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body)["message"], "leases.coordination.k8s.io \"nope\" not found");
  EXPECT_EQ(json::parse(missing.body)["reason"], "NotFound");

  common::HttpClientRequest anonymous;
  anonymous.host_port = "127.0.0.1:" + std::to_string(server_->port());
  anonymous.target = LeasePath(kNs, "l");
  auto unauthorized = raw_->Send(anonymous);
  ASSERT_TRUE(unauthorized.ok());
  EXPECT_EQ(unauthorized->status, 401);
  EXPECT_EQ(json::parse(unauthorized->body),
            json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
                        R"("message":"Unauthorized","reason":"Unauthorized","code":401})"));
}

TEST_F(KubeApiServerTest, CreateListAndDelete) {
  json a = Create("a");
  EXPECT_EQ(a["kind"], "Lease");
  EXPECT_EQ(a["metadata"]["namespace"], kNs);
  EXPECT_FALSE(a["metadata"]["uid"].get<std::string>().empty());
  EXPECT_FALSE(a["metadata"]["creationTimestamp"].get<std::string>().empty());
  json b = Create("b");
  EXPECT_NE(a["metadata"]["uid"], b["metadata"]["uid"]);
  EXPECT_LT(std::stoll(a["metadata"]["resourceVersion"].get<std::string>()),
            std::stoll(b["metadata"]["resourceVersion"].get<std::string>()));
  const json c = server_->Put("elsewhere", LeaseObject("c", "x"));

  auto list = client_->Call("GET", LeasePath(kNs));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ((*list)["kind"], "LeaseList");
  EXPECT_EQ((*list)["metadata"]["resourceVersion"], c["metadata"]["resourceVersion"])
      << "the resourceVersion of the last write anywhere";
  ASSERT_EQ((*list)["items"].size(), 2u);
  EXPECT_EQ((*list)["items"][0]["metadata"]["name"], "a");
  EXPECT_EQ((*list)["items"][1]["metadata"]["name"], "b");
  auto all = client_->Call("GET", "/apis/coordination.k8s.io/v1/leases");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)["items"].size(), 3u);

  auto deleted = client_->Call("DELETE", LeasePath(kNs, "a"));
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ((*deleted)["status"], "Success");
  EXPECT_EQ((*deleted)["details"]["uid"], a["metadata"]["uid"]);
  EXPECT_FALSE(server_->Get(kNs, "a"));
  EXPECT_EQ(client_->Call("DELETE", LeasePath(kNs, "a")).status().code(), Code::kNotFound);

  json wrong_ns = LeaseObject("d", "x");
  wrong_ns["metadata"]["namespace"] = "other";
  EXPECT_EQ(client_->Call("POST", LeasePath(kNs), wrong_ns.dump()).status().code(),
            Code::kInvalidArgument);
  json nameless = LeaseObject("", "x");
  EXPECT_EQ(client_->Call("POST", LeasePath(kNs), nameless.dump()).status().code(),
            Code::kInvalidArgument);
}

TEST_F(KubeApiServerTest, ThePatchTypes) {
  Create("l");
  const std::string path = LeasePath(kNs, "l");
  auto merge = client_->Call("PATCH", path, R"({"spec":{"holderIdentity":null}})",
                             "application/merge-patch+json");
  ASSERT_TRUE(merge.ok()) << merge.status().ToString();
  EXPECT_FALSE((*merge)["spec"].contains("holderIdentity")) << "null removes (RFC 7386)";

  auto strategic = client_->Call("PATCH", path, R"({"metadata":{"annotations":{"k":"v"}}})",
                                 "application/strategic-merge-patch+json");
  ASSERT_TRUE(strategic.ok()) << strategic.status().ToString();
  EXPECT_EQ((*strategic)["metadata"]["annotations"]["k"], "v");

  auto json_patch =
      client_->Call("PATCH", path,
                    R"([{"op":"test","path":"/metadata/annotations/k","value":"v"},)"
                    R"({"op":"replace","path":"/spec/leaseDurationSeconds","value":15}])",
                    "application/json-patch+json");
  ASSERT_TRUE(json_patch.ok()) << json_patch.status().ToString();
  EXPECT_EQ((*json_patch)["spec"]["leaseDurationSeconds"], 15);

  const std::string rv = server_->Get(kNs, "l").value()["metadata"]["resourceVersion"];
  auto failed_test = client_->Call(
      "PATCH", path, R"([{"op":"test","path":"/metadata/annotations/k","value":"w"}])",
      "application/json-patch+json");
  EXPECT_EQ(failed_test.status().code(), Code::kInvalidArgument);
  auto renamed = client_->Call("PATCH", path, R"({"metadata":{"name":"other"}})",
                               "application/merge-patch+json");
  EXPECT_EQ(renamed.status().code(), Code::kInvalidArgument);
  auto same = client_->Call("PATCH", path, R"({"spec":{"leaseDurationSeconds":15}})",
                            "application/merge-patch+json");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(server_->Get(kNs, "l").value()["metadata"]["resourceVersion"], rv)
      << "refused and empty patches write nothing";
  EXPECT_EQ(client_->Call("PATCH", LeasePath(kNs, "nope"), "{}", "application/merge-patch+json")
                .status()
                .code(),
            Code::kNotFound);
}

TEST_F(KubeApiServerTest, StrictFieldValidationRefusesUnknownFields) {
  json odd = LeaseObject("l", "x");
  odd["spec"]["holder"] = "typo";
  auto strict = client_->Call("POST", LeasePath(kNs) + "?fieldValidation=Strict", odd.dump());
  EXPECT_EQ(strict.status().code(), Code::kInvalidArgument);
  EXPECT_NE(strict.status().message().find("strict decoding error: unknown field \"spec.holder\""),
            std::string::npos)
      << strict.status().message();
  EXPECT_FALSE(server_->Get(kNs, "l"));
  ASSERT_TRUE(client_->Call("POST", LeasePath(kNs) + "?fieldValidation=Ignore", odd.dump()).ok());
  auto patch = client_->Call("PATCH", LeasePath(kNs, "l") + "?fieldValidation=Strict",
                             R"({"metadata":{"labelz":{}}})", "application/merge-patch+json");
  EXPECT_NE(patch.status().message().find("metadata.labelz"), std::string::npos);
}

TEST_F(KubeApiServerTest, Discovery) {
  auto version = client_->Call("GET", "/version");
  ASSERT_TRUE(version.ok());
  EXPECT_EQ((*version)["major"], "1");
  auto groups = client_->Call("GET", "/apis");
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ((*groups)["kind"], "APIGroupList");
  EXPECT_EQ((*groups)["groups"][0]["name"], "coordination.k8s.io");
  auto resources = client_->Call("GET", "/apis/coordination.k8s.io/v1");
  ASSERT_TRUE(resources.ok());
  EXPECT_EQ((*resources)["resources"][0]["name"], "leases");
  EXPECT_EQ((*resources)["resources"][0]["namespaced"], true);
  auto core = client_->Call("GET", "/api");
  ASSERT_TRUE(core.ok());
  EXPECT_EQ((*core)["versions"], json::array({"v1"}));
  EXPECT_EQ(client_->Call("GET", "/apis/apps/v1").status().code(), Code::kNotFound);
  auto ns = client_->Call("GET", "/api/v1/namespaces/anything");
  ASSERT_TRUE(ns.ok());
  EXPECT_EQ((*ns)["status"]["phase"], "Active");
  auto openapi = client_->Call("GET", "/openapi/v3");
  ASSERT_TRUE(openapi.ok());
  const std::string gv_url =
      (*openapi)["paths"]["apis/coordination.k8s.io/v1"]["serverRelativeURL"];
  auto gv = client_->Call("GET", gv_url);
  ASSERT_TRUE(gv.ok()) << gv.status().ToString();
  const json patch =
      (*gv)["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]["patch"];
  EXPECT_EQ(patch["x-kubernetes-group-version-kind"]["kind"], "Lease");
  EXPECT_EQ(patch["parameters"][0]["name"], "fieldValidation");
  EXPECT_EQ(client_->Call("POST", "/version", "{}").status().code(), Code::kInvalidArgument);
}

TEST_F(KubeApiServerTest, TheLogFaultsByMethodAndRestart) {
  Create("l");
  const auto log = server_->requests();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].method, "POST");
  EXPECT_EQ(log[0].target, LeasePath(kNs));
  EXPECT_EQ(log[0].content_type, "application/json");
  EXPECT_EQ(json::parse(log[0].body)["metadata"]["name"], "l");
  EXPECT_EQ(log[0].bearer_token, kToken);

  server_->FailNext(2, 503, "PUT");
  auto lease = client_->GetLease(kNs, "l");
  ASSERT_TRUE(lease.ok()) << "a GET is not a PUT";
  EXPECT_EQ(client_->UpdateLease(*lease).status().code(), Code::kUnavailable);
  EXPECT_EQ(client_->UpdateLease(*lease).status().code(), Code::kUnavailable);
  EXPECT_TRUE(client_->UpdateLease(*lease).ok());
  server_->FailNext(1, 418);
  EXPECT_EQ(client_->GetLease(kNs, "l").status().code(), Code::kInvalidArgument);

  const int port = server_->port();
  server_->Stop();
  EXPECT_FALSE(client_->GetLease(kNs, "l").ok());
  ASSERT_TRUE(server_->Start().ok());
  EXPECT_EQ(server_->port(), port);
  EXPECT_TRUE(client_->GetLease(kNs, "l").ok());
}

}  // namespace
}  // namespace etcdw::kube
