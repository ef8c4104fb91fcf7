// End-to-end peer TLS: members talking to each other over mutually authenticated TLS with
// certificates the test generates, and peer TLS enablement: members moved from http to https
// peer URLs one at a time (MemberUpdate, then a restart) without losing data.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "cluster_util.h"
#include "e2e_util.h"

namespace etcdw::testing {
namespace {

class PeerTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One CA, one certificate for every member (serverAuth and clientAuth, for 127.0.0.1), as
    // gardener's etcd peer certificates are issued.
    const std::string script =
        "set -e; cd '" + certs_.path() +
        "'\n"
        "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
        "openssl req -x509 $K -keyout ca.key -out ca.crt -subj /CN=etcd-peer-ca -days 2\n"
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n"
        "extendedKeyUsage=serverAuth,clientAuth\\nkeyUsage=critical,digitalSignature\\n' "
        "> ext.cnf\n"
        "openssl req $K -keyout peer.key -out peer.csr -subj /CN=etcd-peer\n"
        "openssl x509 -req -in peer.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile ext.cnf -out peer.crt\n";
    WriteFile(certs_.File("gen.sh"), script);
    ASSERT_EQ(
        std::system(("bash '" + certs_.File("gen.sh") + "' >'" + certs_.File("gen.log") + "' 2>&1")
                        .c_str()),
        0)
        << ReadFile(certs_.File("gen.log"));
  }
  void TearDown() override {
    if (HasFailure() && cluster_) DumpLogs(*cluster_);
  }

  Settings Tls() const {
    return {{"peer-transport-security",
             "{cert-file: " + certs_.File("peer.crt") + ", key-file: " + certs_.File("peer.key") +
                 ", trusted-ca-file: " + certs_.File("ca.crt") + ", client-cert-auth: true}"}};
  }

  // Every member's peer URLs, as MemberList reports them.
  std::vector<std::string> PeerUrls(Member& via) {
    std::vector<std::string> out;
    etcdserverpb::MemberListRequest req;
    etcdserverpb::MemberListResponse resp;
    EXPECT_TRUE(via.client().cluster->MemberList(Ctx().get(), req, &resp).ok());
    for (const auto& m : resp.members()) {
      for (const auto& u : m.peerurls()) out.push_back(u);
    }
    return out;
  }

  TempDir certs_;
  std::unique_ptr<TestCluster> cluster_;
};

TEST_F(PeerTlsTest, ThreeMembersReplicateOverMutualTls) {
  cluster_ = std::make_unique<TestCluster>(3);
  for (int i = 0; i < 3; ++i) cluster_->member(i).set_peer_scheme("https");
  ASSERT_TRUE(cluster_->StartAll(Tls()));
  int leader = cluster_->WaitForLeader();
  ASSERT_GE(leader, 0);
  Member& follower = cluster_->member((leader + 1) % 3);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(follower.client().Put("tls" + std::to_string(i), "v").ok());
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(WaitUntil([&] { return LocalValue(cluster_->member(i), "tls9") == "v"; }));
  }
  auto urls = PeerUrls(follower);
  ASSERT_EQ(urls.size(), 3u);
  for (const auto& u : urls) EXPECT_EQ(u.rfind("https://127.0.0.1:", 0), 0u) << u;
  // The leader's loss is survived over TLS as well.
  cluster_->member(leader).Kill();
  EXPECT_TRUE(PutEventually(follower, "after-kill", "1"));
}

TEST_F(PeerTlsTest, SingleMemberRestartedWithHttpsPeerUrlKeepsItsData) {
  cluster_ = std::make_unique<TestCluster>(1);
  Member& m = cluster_->member(0);
  ASSERT_TRUE(cluster_->StartAll());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(m.client().Put("k" + std::to_string(i), "v").ok());
  uint64_t id = StatusOf(m).header().member_id();
  m.set_peer_scheme("https");
  auto update = Etcdctl(m, {"member", "update", IdHex(id), "--peer-urls=" + m.peer_url()});
  ASSERT_EQ(update.rc, 0) << update.Describe();
  ASSERT_EQ(m.Stop(), 0);
  ASSERT_TRUE(m.Launch(cluster_->SettingsFor(Tls())));
  ASSERT_TRUE(m.WaitReady());
  EXPECT_EQ(StatusOf(m).header().member_id(), id);
  etcdserverpb::RangeResponse r;
  ASSERT_TRUE(m.client().Get("k", &r, "l").ok());
  EXPECT_EQ(r.count(), 20);
  EXPECT_EQ(PeerUrls(m), std::vector<std::string>{m.peer_url()});
  EXPECT_TRUE(m.client().Put("after", "tls").ok());
}

TEST_F(PeerTlsTest, ClusterMovesToHttpsPeerUrlsOneMemberAtATime) {
  cluster_ = std::make_unique<TestCluster>(3);
  // The certificates are in place first (as a rolling update would install them); the URLs
  // change one member at a time.
  ASSERT_TRUE(cluster_->StartAll(Tls()));
  ASSERT_GE(cluster_->WaitForLeader(), 0);
  ASSERT_TRUE(cluster_->member(0).client().Put("before", "http").ok());
  for (int i = 0; i < 3; ++i) {
    Member& m = cluster_->member(i);
    Member& other = cluster_->member((i + 1) % 3);
    uint64_t id = StatusOf(m).header().member_id();
    m.set_peer_scheme("https");
    CmdResult update;
    ASSERT_TRUE(WaitUntil([&] {
      update = Etcdctl(other, {"member", "update", IdHex(id), "--peer-urls=" + m.peer_url()});
      return update.rc == 0;
    })) << update.Describe();
    ASSERT_EQ(m.Stop(), 0);
    ASSERT_TRUE(m.Launch(cluster_->SettingsFor(Tls())));
    ASSERT_TRUE(m.WaitReady(seconds(30)));
    EXPECT_EQ(StatusOf(m).header().member_id(), id);
    ASSERT_TRUE(PutEventually(other, "step" + std::to_string(i), "done"));
    EXPECT_TRUE(WaitUntil([&] { return LocalValue(m, "step" + std::to_string(i)) == "done"; }))
        << "member " << i << " does not replicate after moving to https";
  }
  auto urls = PeerUrls(cluster_->member(2));
  ASSERT_EQ(urls.size(), 3u);
  for (const auto& u : urls) EXPECT_EQ(u.rfind("https://", 0), 0u) << u;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(LocalValue(cluster_->member(i), "before"), "http");
}

}  // namespace
}  // namespace etcdw::testing
