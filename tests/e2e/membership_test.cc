// End-to-end membership changes with etcdctl: a learner added at runtime joins with
// initial-cluster-state existing, catches up, is promoted and removed; requests only the leader
// can answer (lease keepalive and time-to-live, promotion) work through any member.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include "cluster_util.h"
#include "e2e_util.h"
#include "etcdw/bbolt/db.h"

namespace etcdw::testing {
namespace {

class MembershipTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && cluster_) DumpLogs(*cluster_);
  }
  std::unique_ptr<TestCluster> cluster_;
};

// The members as etcdctl lists them, by name ("" for one not started yet).
std::map<std::string, nlohmann::json> MemberList(Member& via) {
  auto r = Etcdctl(via, {"member", "list", "-w", "json"});
  EXPECT_EQ(r.rc, 0) << r.Describe();
  std::map<std::string, nlohmann::json> out;
  auto j = ParseJson(r.out);
  for (const auto& m : j["members"]) out[m.value("name", "")] = m;
  return out;
}

TEST_F(MembershipTest, LearnerJoinsCatchesUpIsPromotedAndRemoved) {
  cluster_ = std::make_unique<TestCluster>(3);
  ASSERT_TRUE(cluster_->StartAll());
  int leader = cluster_->WaitForLeader();
  ASSERT_GE(leader, 0);
  int follower = (leader + 1) % 3;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(cluster_->member(leader).client().Put("k" + std::to_string(i), "v").ok());
  }

  // MemberAdd through a follower (proposed like any other request).
  Member& joiner = cluster_->Add();
  auto add = Etcdctl(cluster_->member(follower),
                     {"member", "add", "m3", "--learner", "--peer-urls=" + joiner.peer_url()});
  ASSERT_EQ(add.rc, 0) << add.Describe();
  EXPECT_TRUE(Contains(add.out, "ETCD_INITIAL_CLUSTER_STATE=\"existing\"")) << add.out;
  auto before = MemberList(cluster_->member(leader));
  ASSERT_EQ(before.size(), 4u);
  ASSERT_TRUE(before.count(""));  // added, not started
  EXPECT_TRUE(before[""].value("isLearner", false));
  uint64_t joiner_id = before[""]["ID"];

  // It starts with the settings etcdctl printed and catches up from the leader.
  ASSERT_TRUE(joiner.Launch(cluster_->SettingsFor({{"initial-cluster-state", "existing"}})));
  ASSERT_TRUE(joiner.WaitReady(seconds(30)));
  EXPECT_TRUE(WaitUntil([&] { return LocalValue(joiner, "k49") == "v"; }));
  EXPECT_EQ(StatusOf(joiner).header().member_id(), joiner_id);
  EXPECT_TRUE(StatusOf(joiner).islearner());
  // A learner refuses what etcd's learners refuse.
  etcdserverpb::RangeResponse rr;
  auto st = joiner.client().Get("k1", &rr);
  EXPECT_EQ(st.error_message(), "etcdserver: rpc not supported for learner");
  EXPECT_TRUE(WaitUntil([&] { return MemberList(cluster_->member(leader)).count("m3") == 1; }));
  // Killed and restarted, it keeps its identity and its data.
  joiner.Kill();
  ASSERT_TRUE(cluster_->member(leader).client().Put("while-down", "1").ok());
  ASSERT_TRUE(joiner.Launch(cluster_->SettingsFor({{"initial-cluster-state", "existing"}})));
  ASSERT_TRUE(joiner.WaitReady(seconds(30)));
  EXPECT_EQ(StatusOf(joiner).header().member_id(), joiner_id);
  EXPECT_TRUE(WaitUntil([&] { return LocalValue(joiner, "while-down") == "1"; }));

  // Promotion through a follower is decided by the leader.
  CmdResult promote;
  EXPECT_TRUE(WaitUntil([&] {
    promote = Etcdctl(cluster_->member(follower), {"member", "promote", IdHex(joiner_id)});
    return promote.rc == 0;
  })) << promote.Describe();
  EXPECT_TRUE(Contains(promote.out, "promoted")) << promote.out;
  auto after = MemberList(cluster_->member(follower));
  ASSERT_EQ(after.size(), 4u);
  for (const auto& [name, m] : after) {
    EXPECT_FALSE(m.value("isLearner", false)) << name;
    EXPECT_FALSE(name.empty());
  }
  // A voter now: it serves linearizable requests and writes.
  ASSERT_TRUE(PutEventually(joiner, "from-joiner", "1"));
  EXPECT_TRUE(
      WaitUntil([&] { return LocalValue(cluster_->member(leader), "from-joiner") == "1"; }));
  // Promoting it again is refused with etcd's error.
  auto again = Etcdctl(cluster_->member(leader), {"member", "promote", IdHex(joiner_id)});
  EXPECT_NE(again.rc, 0);
  EXPECT_TRUE(Contains(again.err, "can only promote a learner member")) << again.Describe();

  // Removal: the removed member stops by itself; the others go on with three.
  auto rm = Etcdctl(cluster_->member(leader), {"member", "remove", IdHex(joiner_id)});
  ASSERT_EQ(rm.rc, 0) << rm.Describe();
  EXPECT_TRUE(WaitUntil([&] { return !joiner.Running(); }, seconds(15)));
  EXPECT_TRUE(Contains(joiner.log(), "permanently removed")) << joiner.log();
  EXPECT_EQ(MemberList(cluster_->member(follower)).size(), 3u);
  EXPECT_TRUE(PutEventually(cluster_->member(follower), "after-remove", "1"));
  // etcd's snapshot of the cluster records the removed member in members_removed, as etcd's.
  const std::string snap = cluster_->member(follower).dir() + "/after-remove.db";
  auto saved = Etcdctl(cluster_->member(follower), {"snapshot", "save", snap});
  ASSERT_EQ(saved.rc, 0) << saved.Describe();
  auto db = bbolt::BoltDb::Open(snap, static_cast<int64_t>(std::filesystem::file_size(snap)) - 32);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  char hex[32];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(joiner_id));
  auto removed = (*db)->Get({"members_removed"}, hex);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(removed->value_or("<none>"), "removed");
  auto still = (*db)->Get({"members"}, hex);
  ASSERT_TRUE(still.ok());
  EXPECT_FALSE(still->has_value());
}

TEST_F(MembershipTest, PromotingALearnerThatIsNotRunningIsRefused) {
  cluster_ = std::make_unique<TestCluster>(3);
  ASSERT_TRUE(cluster_->StartAll());
  ASSERT_GE(cluster_->WaitForLeader(), 0);
  ASSERT_TRUE(cluster_->member(0).client().Put("k", "v").ok());
  auto add = Etcdctl(cluster_->member(0), {"member", "add", "ghost", "--learner",
                                           "--peer-urls=http://127.0.0.1:1", "-w", "json"});
  ASSERT_EQ(add.rc, 0) << add.Describe();
  uint64_t id = ParseJson(add.out)["member"]["ID"];
  // Never started: it has nothing of the log.
  auto promote = Etcdctl(cluster_->member(1), {"member", "promote", IdHex(id)});
  EXPECT_NE(promote.rc, 0);
  EXPECT_TRUE(Contains(promote.err,
                       "can only promote a learner member which is in sync with "
                       "leader"))
      << promote.Describe();
  // Only one learner at a time, as etcd.
  auto second = Etcdctl(cluster_->member(0),
                        {"member", "add", "ghost2", "--learner", "--peer-urls=http://127.0.0.1:2"});
  EXPECT_NE(second.rc, 0);
  EXPECT_TRUE(Contains(second.err, "too many learner members in cluster")) << second.Describe();
  auto rm = Etcdctl(cluster_->member(2), {"member", "remove", IdHex(id)});
  EXPECT_EQ(rm.rc, 0) << rm.Describe();
  EXPECT_EQ(MemberList(cluster_->member(0)).size(), 3u);
}

TEST_F(MembershipTest, LeasesAreKeptAliveAndInspectedThroughAFollower) {
  cluster_ = std::make_unique<TestCluster>(3);
  ASSERT_TRUE(cluster_->StartAll());
  int leader = cluster_->WaitForLeader();
  ASSERT_GE(leader, 0);
  Member& f = cluster_->member((leader + 1) % 3);
  etcdserverpb::LeaseGrantRequest g;
  g.set_ttl(3);
  etcdserverpb::LeaseGrantResponse granted;
  ASSERT_TRUE(f.client().lease->LeaseGrant(Ctx().get(), g, &granted).ok());
  ASSERT_TRUE(f.client().Put("leased", "v", granted.id()).ok());

  // Keepalives through the follower reach the leader's lessor: the key outlives its TTL.
  auto ctx = Ctx(seconds(30));
  auto stream = f.client().lease->LeaseKeepAlive(ctx.get());
  auto until = std::chrono::steady_clock::now() + seconds(6);
  while (std::chrono::steady_clock::now() < until) {
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(granted.id());
    ASSERT_TRUE(stream->Write(req));
    etcdserverpb::LeaseKeepAliveResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_EQ(resp.id(), granted.id());
    EXPECT_EQ(resp.ttl(), 3);
    std::this_thread::sleep_for(milliseconds(500));
  }
  EXPECT_EQ(LocalValue(cluster_->member(leader), "leased"), "v");
  // Time-to-live through the follower is the leader's answer, with the attached keys.
  etcdserverpb::LeaseTimeToLiveRequest t;
  t.set_id(granted.id());
  t.set_keys(true);
  etcdserverpb::LeaseTimeToLiveResponse ttl;
  ASSERT_TRUE(f.client().lease->LeaseTimeToLive(Ctx().get(), t, &ttl).ok());
  EXPECT_EQ(ttl.grantedttl(), 3);
  EXPECT_GE(ttl.ttl(), 1);
  EXPECT_LE(ttl.ttl(), 3);
  ASSERT_EQ(ttl.keys_size(), 1);
  EXPECT_EQ(ttl.keys(0), "leased");
  EXPECT_EQ(ttl.header().member_id(), StatusOf(f).header().member_id());
  // An unknown lease: TTL 0 from a keepalive, -1 from time-to-live (etcd's answers).
  etcdserverpb::LeaseKeepAliveRequest unknown;
  unknown.set_id(424242);
  ASSERT_TRUE(stream->Write(unknown));
  etcdserverpb::LeaseKeepAliveResponse unknown_resp;
  ASSERT_TRUE(stream->Read(&unknown_resp));
  EXPECT_EQ(unknown_resp.ttl(), 0);
  t.set_id(424242);
  ASSERT_TRUE(f.client().lease->LeaseTimeToLive(Ctx().get(), t, &ttl).ok());
  EXPECT_EQ(ttl.ttl(), -1);
  stream->WritesDone();
  // Without keepalives the leader expires it and every member drops the key.
  EXPECT_TRUE(WaitUntil([&] { return !LocalValue(f, "leased").has_value(); }, seconds(10)));
  // etcdctl through the follower agrees.
  auto r = Etcdctl(f, {"lease", "timetolive", IdHex(static_cast<uint64_t>(granted.id()))});
  EXPECT_EQ(r.rc, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "already expired")) << r.out;
}

}  // namespace
}  // namespace etcdw::testing
