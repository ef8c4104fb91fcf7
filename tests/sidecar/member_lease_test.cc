// The member heartbeat against a real in-process member and the Kubernetes API test server:
// the lease's holder, time and tls-enabled annotation, what is left alone, and what a failing
// member or API server costs (a log line and a retry at the next period).
#include "etcdw/sidecar/member_lease.h"

#include <gtest/gtest.h>

#include "etcdw/sidecar/peer_urls.h"
#include "served_member.h"
#include "support/await.h"
#include "support/kube_api_server.h"

namespace etcdw::sidecar {
namespace {

using namespace std::chrono_literals;
using testing::KubeApiServer;
using testing::KubeApiServerOptions;

constexpr char kNs[] = "shoot--test";

TEST(MemberIdentityTest, LowerCaseHexWithoutPaddingAndTheRole) {
  EXPECT_EQ(MemberIdentity(0x8e9e05c52164694dULL, 0xcdf818194e3a8c32ULL, true),
            "8e9e05c52164694d:cdf818194e3a8c32:Leader");
  EXPECT_EQ(MemberIdentity(0xa, 0x1, false), "a:1:Member");
}

class MemberLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(member_.Start());
    ASSERT_TRUE(api_.Start().ok());
    kube::KubeConfig kc;
    kc.server = api_.url();
    auto c = kube::KubeClient::Create(kc);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    // As etcd-druid creates it: labels, an annotation of its own, no holder yet.
    api_.Put(kNs, {{"apiVersion", "coordination.k8s.io/v1"},
                   {"kind", "Lease"},
                   {"metadata",
                    {{"name", "etcd-main-0"},
                     {"labels", {{"app", "etcd"}}},
                     {"annotations", {{"druid", "keeps this"}}}}},
                   {"spec", {{"leaseDurationSeconds", 40}}}});
    options_.lease_namespace = kNs;
    options_.lease_name = "etcd-main-0";
    options_.period = 10s;
    options_.etcd = member_.Options();
  }

  nlohmann::json Lease() { return api_.Get(kNs, "etcd-main-0").value(); }
  size_t Patches() {
    size_t n = 0;
    for (const auto& q : api_.requests()) n += q.method == "PATCH" ? 1 : 0;
    return n;
  }
  std::string ExpectedIdentity() {
    auto c = EtcdClient::Connect(options_.etcd, member_.Endpoint());
    auto st = (*c)->EndpointStatus(5s);
    EXPECT_TRUE(st.ok());
    return MemberIdentity(st->header().member_id(), st->header().cluster_id(), true);
  }

  ServedMember member_;
  KubeApiServer api_{KubeApiServerOptions()};
  std::unique_ptr<kube::KubeClient> client_;
  MemberLeaseOptions options_;
  common::ManualClock clock_;
};

TEST_F(MemberLeaseTest, ARenewalWritesHolderTimeAndTlsAnnotationWithAMergePatch) {
  MemberLeaseRenewer r(*client_, options_, clock_);
  ASSERT_TRUE(r.RenewOnce().ok());
  nlohmann::json l = Lease();
  EXPECT_EQ(l["spec"]["holderIdentity"], ExpectedIdentity());  // the only member leads
  EXPECT_EQ(l["spec"]["renewTime"], kube::MicroTime(clock_.WallNow()));
  // http peer URLs: TLS is not enabled.
  EXPECT_EQ(l["metadata"]["annotations"][kTlsEnabledAnnotation], "false");
  // Everything else stays as druid wrote it.
  EXPECT_EQ(l["metadata"]["annotations"]["druid"], "keeps this");
  EXPECT_EQ(l["metadata"]["labels"]["app"], "etcd");
  EXPECT_EQ(l["spec"]["leaseDurationSeconds"], 40);
  const auto reqs = api_.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().method, "PATCH");
  EXPECT_EQ(reqs.back().content_type, "application/merge-patch+json");
}

TEST_F(MemberLeaseTest, TlsIsEnabledOnlyWhenEveryRegisteredPeerUrlIsHttpsAndServed) {
  // Register an https peer URL for the member (a single member needs no peer to talk to).
  auto cluster = EtcdClient::ConnectToCluster(options_.etcd);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const uint64_t id = cluster->members.members(0).id();
  ASSERT_TRUE(cluster->client->MemberUpdate(id, {"https://127.0.0.1:2380"}, 5s).ok());
  bool serving = false;
  options_.serving_registered_urls = [&serving] { return serving; };
  MemberLeaseRenewer r(*client_, options_, clock_);
  ASSERT_TRUE(r.RenewOnce().ok());
  EXPECT_EQ(Lease()["metadata"]["annotations"][kTlsEnabledAnnotation], "false");
  serving = true;
  ASSERT_TRUE(r.RenewOnce().ok());
  EXPECT_EQ(Lease()["metadata"]["annotations"][kTlsEnabledAnnotation], "true");
  // One of two URLs still http: not enabled.
  ASSERT_TRUE(
      cluster->client->MemberUpdate(id, {"https://127.0.0.1:2380", "http://127.0.0.1:2381"}, 5s)
          .ok());
  ASSERT_TRUE(r.RenewOnce().ok());
  EXPECT_EQ(Lease()["metadata"]["annotations"][kTlsEnabledAnnotation], "false");
}

TEST_F(MemberLeaseTest, AMissingLeaseIsReportedAndNotCreated) {
  options_.lease_name = "etcd-main-9";
  MemberLeaseRenewer r(*client_, options_, clock_);
  Status st = r.RenewOnce();
  EXPECT_EQ(st.code(), Code::kNotFound) << st.ToString();
  EXPECT_NE(st.message().find("could not fetch member lease"), std::string::npos);
  EXPECT_FALSE(api_.Get(kNs, "etcd-main-9").has_value());
}

TEST_F(MemberLeaseTest, NoHeartbeatWhileTheMemberDoesNotAnswer) {
  MemberLeaseRenewer r(*client_, options_, clock_);
  member_.Stop();
  Status st = r.RenewOnce();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("status of etcd endpoint"), std::string::npos) << st.ToString();
  EXPECT_FALSE(Lease()["spec"].contains("holderIdentity"));
}

TEST_F(MemberLeaseTest, RenewsEveryPeriodAndSurvivesAnApiServerThatFailsOrGoesAway) {
  MemberLeaseRenewer r(*client_, options_, clock_);
  r.Start();
  // Nothing before the first period has passed.
  const uint64_t looks = clock_.Looks();
  ASSERT_TRUE(testsupport::WaitUntil([&] { return clock_.Looks() > looks + 5; }));
  EXPECT_TRUE(api_.requests().empty());
  clock_.Advance(options_.period);
  ASSERT_TRUE(testsupport::WaitUntil(
      [&] { return Lease()["spec"].value("renewTime", "") == kube::MicroTime(clock_.WallNow()); }));
  // The API server answers 500 for a period, then is away for one: no renewal, no crash.
  const nlohmann::json renewed = Lease()["spec"]["renewTime"];
  const size_t patches = Patches();
  api_.FailNext(1, 500, "PATCH");
  clock_.Advance(options_.period);
  ASSERT_TRUE(testsupport::WaitUntil([&] { return Patches() > patches; }));
  EXPECT_EQ(Lease()["spec"]["renewTime"], renewed);
  api_.Stop();
  clock_.Advance(options_.period);
  const uint64_t looks2 = clock_.Looks();
  ASSERT_TRUE(testsupport::WaitUntil([&] { return clock_.Looks() > looks2 + 5; }));
  ASSERT_TRUE(api_.Start().ok());
  clock_.Advance(options_.period);
  EXPECT_TRUE(testsupport::WaitUntil(
      [&] { return Lease()["spec"].value("renewTime", "") == kube::MicroTime(clock_.WallNow()); }));
  r.Stop();
}

}  // namespace
}  // namespace etcdw::sidecar
