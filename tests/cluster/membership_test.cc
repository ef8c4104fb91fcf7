#include "etcdw/cluster/membership.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "support/scratch_dir.h"

namespace etcdw::cluster {
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

TEST(MembershipTest, InitialMembersAreEtcdsAndRuntimeIdsIncludeTime) {
  auto cfg = common::ParseConfig(
      "name: local\ninitial-advertise-peer-urls: http://127.0.0.1:2380\n"
      "initial-cluster: local=http://127.0.0.1:2380,b=http://127.0.0.2:2380\n",
      "test");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto members = InitialMembers(*cfg);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_TRUE(members[0].id < members[1].id);
  bool found = false;
  for (const auto& m : members) found |= m.id == kEtcdMemberId;
  EXPECT_TRUE(found);
  // A member added at runtime gets a time-dependent ID, so re-adding the same URLs after a
  // removal gives a new ID (Raft IDs must never be reused).
  uint64_t t1 = ComputeMemberId({"http://127.0.0.1:2380"}, "etcd-cluster", 1700000000);
  uint64_t t2 = ComputeMemberId({"http://127.0.0.1:2380"}, "etcd-cluster", 1700000001);
  EXPECT_NE(t1, t2);
  EXPECT_NE(t1, kEtcdMemberId);
}

TEST(MembershipTest, ChangesArePersistedAndReloaded) {
  testsupport::ScratchDir scratch("membership");
  ASSERT_FALSE(scratch.path().empty());
  const std::string& dir = scratch.path();
  {
    auto e = storage::Engine::Open(dir + "/db", {});
    ASSERT_TRUE(e.ok());
    Membership ms;
    ASSERT_TRUE(ms.Load(**e).ok());
    storage::Batch b(**e);
    ms.StageClusterId(b, 77);
    ms.StageAdd(b, Member{1, "a", {"http://a:2380"}, {"http://a:2379"}, false});
    ms.StageAdd(b, Member{2, "", {"http://b:2380"}, {}, true});
    ms.StageAdd(b, Member{3, "c", {"http://c:2380"}, {}, false});
    ms.StageRemove(b, 3);
    StageLocalMemberId(b, 1);
    ASSERT_TRUE((*e)->Write(b, true).ok());
    auto cs = ms.ConfState();
    EXPECT_EQ(std::vector<uint64_t>(cs.voters().begin(), cs.voters().end()),
              std::vector<uint64_t>{1});
    EXPECT_EQ(std::vector<uint64_t>(cs.learners().begin(), cs.learners().end()),
              std::vector<uint64_t>{2});
  }
  auto e = storage::Engine::Open(dir + "/db", {});
  ASSERT_TRUE(e.ok());
  Membership ms;
  ASSERT_TRUE(ms.Load(**e).ok());
  EXPECT_EQ(ms.cluster_id(), 77u);
  ASSERT_EQ(ms.List().size(), 2u);
  EXPECT_TRUE(ms.Get(2)->is_learner);
  EXPECT_TRUE(ms.IsRemoved(3));
  EXPECT_FALSE(ms.Get(3).has_value());
  EXPECT_EQ(ms.FindByPeerUrls({"http://a:2380"})->id, 1u);
  EXPECT_EQ(ms.FindUsingAnyPeerUrl({"http://x:1", "http://b:2380"})->id, 2u);
  EXPECT_EQ(ms.StartedVoterCount(), 1u);
  auto local = LoadLocalMemberId(**e);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local.value(), std::optional<uint64_t>(1));
  e->reset();
}

}  // namespace
}  // namespace etcdw::cluster
