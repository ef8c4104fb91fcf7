#include "etcdw/server/membership.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace etcdw::server {
namespace {

// Values etcd 3.4.23 reports for a member named "local" with peer URL http://127.0.0.1:2380
// and the default token (checked against a running etcd).
constexpr uint64_t kEtcdMemberId = 0xb71f75320dc06a6cULL;
constexpr uint64_t kEtcdClusterId = 2037210783374497686ULL;

TEST(MembershipTest, IdsMatchEtcd) {
  EXPECT_EQ(ComputeMemberId({"http://127.0.0.1:2380"}, "etcd-cluster"), kEtcdMemberId);
  EXPECT_EQ(ComputeClusterId({kEtcdMemberId}), kEtcdClusterId);
  EXPECT_EQ(IdToHex(kEtcdMemberId), "b71f75320dc06a6c");
}

TEST(MembershipTest, MemberIdIgnoresUrlOrderButNotToken) {
  uint64_t a = ComputeMemberId({"http://a:1", "http://b:2"}, "t");
  EXPECT_EQ(a, ComputeMemberId({"http://b:2", "http://a:1"}, "t"));
  EXPECT_NE(a, ComputeMemberId({"http://a:1", "http://b:2"}, "u"));
}

TEST(MembershipTest, BootstrapIsPersistedAndReloaded) {
  char tmpl[] = "/tmp/etcdw-member-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  auto cfg = common::ParseConfig(
      "name: local\ninitial-advertise-peer-urls: http://127.0.0.1:2380\n"
      "initial-cluster: local=http://127.0.0.1:2380\n"
      "advertise-client-urls: http://127.0.0.1:2379\n",
      "test");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  {
    auto e = storage::Engine::Open(dir + "/db", {});
    ASSERT_TRUE(e.ok());
    auto st = LoadOrBootstrapCluster(**e, *cfg);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->local_id, kEtcdMemberId);
    EXPECT_EQ(st->cluster_id, kEtcdClusterId);
    ASSERT_EQ(st->members.size(), 1u);
    EXPECT_EQ(st->members[0].client_urls, std::vector<std::string>{"http://127.0.0.1:2379"});
  }
  // A restart with a different token keeps the stored identity, as etcd does.
  cfg->initial_cluster_token = "other";
  {
    auto e = storage::Engine::Open(dir + "/db", {});
    ASSERT_TRUE(e.ok());
    auto st = LoadOrBootstrapCluster(**e, *cfg);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->local_id, kEtcdMemberId);
    EXPECT_EQ(st->cluster_id, kEtcdClusterId);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace etcdw::server
