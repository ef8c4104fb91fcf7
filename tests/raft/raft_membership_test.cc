// Membership: bootstrap, adding voters and learners, promoting learners, removing members (the
// leader too), one pending configuration change at a time, and what learners may and may not do.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "raft/raft_test_util.h"

namespace etcdw::raft {
namespace {

using namespace rafttest;  // NOLINT(google-build-using-namespace)

Message PropCC(uint64_t id, raftpb::ConfChangeType type, uint64_t node) {
  return Msg(
      {.type = raftpb::MSG_PROP, .from = id, .to = id, .entries = {ConfEntry(CC(type, node))}});
}

std::set<uint64_t> Voters(const Raft& r) { return r.tracker().voters; }
std::set<uint64_t> Learners(const Raft& r) { return r.tracker().learners; }

TEST(Membership, BootstrapCommitsAndAppliesTheInitialConfiguration) {
  MemoryStorage s;
  Raft r(MakeConfig(1, &s, {}));
  EXPECT_FALSE(r.promotable());
  std::vector<raftpb::ConfChange> peers = {CC(raftpb::CONF_CHANGE_ADD_NODE, 1),
                                           CC(raftpb::CONF_CHANGE_ADD_NODE, 2),
                                           CC(raftpb::CONF_CHANGE_ADD_LEARNER_NODE, 3)};
  ASSERT_TRUE(r.Bootstrap(peers).ok());
  EXPECT_EQ(r.term(), 1u);
  EXPECT_EQ(r.log().LastIndex(), 3u);
  EXPECT_EQ(r.log().committed(), 3u);
  EXPECT_EQ(r.log().applied(), 0u);  // the application still sees them as committed entries
  EXPECT_EQ(Voters(r), std::set<uint64_t>({1, 2}));
  EXPECT_EQ(Learners(r), std::set<uint64_t>({3}));
  auto ents = r.log().NextCommittedEntries();
  ASSERT_EQ(ents.size(), 3u);
  for (size_t i = 0; i < ents.size(); ++i) {
    EXPECT_EQ(ents[i].type(), raftpb::ENTRY_CONF_CHANGE);
    EXPECT_EQ(ents[i].term(), 1u);
    raftpb::ConfChange cc;
    ASSERT_TRUE(cc.ParseFromString(ents[i].data()));
    EXPECT_EQ(cc.node_id(), peers[i].node_id());
  }
  // Applying them again (as the application does) changes nothing.
  for (const auto& cc : peers) r.ApplyConfChange(cc);
  EXPECT_EQ(Voters(r), std::set<uint64_t>({1, 2}));
  EXPECT_EQ(Learners(r), std::set<uint64_t>({3}));
  // Refused: a second bootstrap, an empty one.
  EXPECT_FALSE(r.Bootstrap(peers).ok());
  MemoryStorage s2;
  Raft r2(MakeConfig(1, &s2, {}));
  EXPECT_FALSE(r2.Bootstrap({}).ok());
}

// A configuration change proposal is appended as a conf change entry; while it is not applied,
// another one is turned into an empty normal entry (one change at a time).
TEST(Membership, OnePendingConfChangeAtATime) {
  auto r = NewRaft(1, {1, 2});
  r->BecomeCandidate();
  r->BecomeLeader();
  CommitNoopEntry(*r, *r.storage);
  uint64_t index = r->log().LastIndex();
  ASSERT_TRUE(r->Step(PropCC(1, raftpb::CONF_CHANGE_ADD_NODE, 3)).ok());
  ASSERT_EQ(r->log().LastIndex(), index + 1);
  EXPECT_EQ(r->log().UnstableEntries().back().type(), raftpb::ENTRY_CONF_CHANGE);
  ASSERT_TRUE(r->Step(PropCC(1, raftpb::CONF_CHANGE_ADD_NODE, 4)).ok());
  ASSERT_EQ(r->log().LastIndex(), index + 2);
  Entry second = r->log().UnstableEntries().back();
  EXPECT_EQ(second.type(), raftpb::ENTRY_NORMAL);
  EXPECT_TRUE(second.data().empty());
  EXPECT_EQ(second.term(), r->term());
  // Two in one proposal: the second is refused too.
  auto r2 = NewRaft(1, {1, 2});
  r2->BecomeCandidate();
  r2->BecomeLeader();
  CommitNoopEntry(*r2, *r2.storage);
  ASSERT_TRUE(r2->Step(Msg({.type = raftpb::MSG_PROP,
                            .from = 1,
                            .to = 1,
                            .entries = {ConfEntry(CC(raftpb::CONF_CHANGE_ADD_NODE, 3)),
                                        ConfEntry(CC(raftpb::CONF_CHANGE_ADD_NODE, 4))}}))
                  .ok());
  auto ents = r2->log().UnstableEntries();
  ASSERT_EQ(ents.size(), 2u);
  EXPECT_EQ(ents[0].type(), raftpb::ENTRY_CONF_CHANGE);
  EXPECT_EQ(ents[1].type(), raftpb::ENTRY_NORMAL);
  // Once the first is committed and applied, a new one is accepted.
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP_RESP,
                           .from = 2,
                           .to = 1,
                           .term = r->term(),
                           .index = r->log().LastIndex()}))
                  .ok());
  PersistAndApply(*r, *r.storage);
  ASSERT_TRUE(r->Step(PropCC(1, raftpb::CONF_CHANGE_ADD_NODE, 4)).ok());
  EXPECT_EQ(r->log().UnstableEntries().back().type(), raftpb::ENTRY_CONF_CHANGE);
}

// A new leader does not know whether its uncommitted tail holds a conf change: it refuses new
// ones until it applied everything up to its election.
TEST(Membership, NewLeaderPendingConfig) {
  for (bool tail_has_cc : {false, true}) {
    std::vector<Entry> log = {E(1, 1)};
    if (tail_has_cc) {
      Entry cc = ConfEntry(CC(raftpb::CONF_CHANGE_ADD_NODE, 3));
      cc.set_index(2);
      cc.set_term(1);
      log.push_back(cc);
    }
    auto r = NewRaftWithLog(1, {1, 2}, log, HS(1, 0, 0));
    r->BecomeCandidate();
    r->BecomeLeader();
    ASSERT_TRUE(r->Step(PropCC(1, raftpb::CONF_CHANGE_ADD_NODE, 4)).ok());
    EXPECT_EQ(r->log().UnstableEntries().back().type(), raftpb::ENTRY_NORMAL) << tail_has_cc;
    // Committed and applied through the election: accepted.
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP_RESP,
                             .from = 2,
                             .to = 1,
                             .term = r->term(),
                             .index = r->log().LastIndex()}))
                    .ok());
    PersistAndApply(*r, *r.storage);
    ASSERT_TRUE(r->Step(PropCC(1, raftpb::CONF_CHANGE_ADD_NODE, 4)).ok());
    EXPECT_EQ(r->log().UnstableEntries().back().type(), raftpb::ENTRY_CONF_CHANGE);
  }
}

TEST(Membership, AddNode) {
  auto r = NewRaft(1, {1});
  auto cs = r->ApplyConfChange(CC(raftpb::CONF_CHANGE_ADD_NODE, 2));
  EXPECT_EQ(Voters(*r), std::set<uint64_t>({1, 2}));
  ASSERT_EQ(cs.voters_size(), 2);
  EXPECT_EQ(cs.learners_size(), 0);
  // Adding it again changes nothing.
  r->ApplyConfChange(CC(raftpb::CONF_CHANGE_ADD_NODE, 2));
  EXPECT_EQ(Voters(*r), std::set<uint64_t>({1, 2}));
  // A conf change cancelled by the application (node 0) changes nothing.
  r->ApplyConfChange(CC(raftpb::CONF_CHANGE_ADD_NODE, 0));
  EXPECT_EQ(Voters(*r), std::set<uint64_t>({1, 2}));
  // Updates have no Raft effect.
  r->ApplyConfChange(CC(raftpb::CONF_CHANGE_UPDATE_NODE, 2));
  EXPECT_EQ(Voters(*r), std::set<uint64_t>({1, 2}));
}

TEST(Membership, AddLearner) {
  auto r = NewRaft(1, {1});
  r->ApplyConfChange(CC(raftpb::CONF_CHANGE_ADD_LEARNER_NODE, 2));
  EXPECT_EQ(Voters(*r), std::set<uint64_t>({1}));
  EXPECT_EQ(Learners(*r), std::set<uint64_t>({2}));
  EXPECT_TRUE(r->tracker().Get(2)->is_learner);
  EXPECT_FALSE(r->tracker().Get(1)->is_learner);
  EXPECT_TRUE(r->promotable());
}

// A leader that adds a member starts replicating to it at once.
TEST(Membership, LeaderFeedsNewMemberAtOnce) {
  auto r = NewRaft(1, {1});
  ASSERT_TRUE(r->Step(Hup(1)).ok());
  ASSERT_EQ(r->state(), StateType::kLeader);
  ReadMsgs(*r);
  r->ApplyConfChange(CC(raftpb::CONF_CHANGE_ADD_LEARNER_NODE, 2));
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_APP);
  EXPECT_EQ(msgs[0].to(), 2u);
}

// A newly added member counts as active: the check-quorum right after adding it does not depose
// the leader, but a whole election timeout without hearing from it does.
TEST(Membership, AddNodeCheckQuorum) {
  auto r = NewRaft(1, {1}, {.check_quorum = true});
  r->BecomeCandidate();
  r->BecomeLeader();
  for (int i = 0; i < 9; ++i) r->Tick();
  r->ApplyConfChange(CC(raftpb::CONF_CHANGE_ADD_NODE, 2));
  r->Tick();  // reaches the election timeout: quorum check
  EXPECT_EQ(r->state(), StateType::kLeader);
  for (int i = 0; i < 10; ++i) r->Tick();
  EXPECT_EQ(r->state(), StateType::kFollower);
}

TEST(Membership, RemoveNode) {
  auto r = NewRaft(1, {1, 2});
  r->ApplyConfChange(CC(raftpb::CONF_CHANGE_REMOVE_NODE, 2));
  EXPECT_EQ(Voters(*r), std::set<uint64_t>({1}));
  EXPECT_EQ(r->tracker().Get(2), nullptr);
  r->ApplyConfChange(CC(raftpb::CONF_CHANGE_REMOVE_NODE, 1));
  EXPECT_TRUE(Voters(*r).empty());
  EXPECT_FALSE(r->promotable());
}

TEST(Membership, RemoveLearner) {
  auto r = NewRaft(1, {1}, {.learners = {2}});
  r->ApplyConfChange(CC(raftpb::CONF_CHANGE_REMOVE_NODE, 2));
  EXPECT_EQ(Voters(*r), std::set<uint64_t>({1}));
  EXPECT_TRUE(Learners(*r).empty());
}

TEST(Membership, Promotable) {
  struct Case {
    std::vector<uint64_t> voters, learners;
    bool want;
  };
  std::vector<Case> cases = {{{1}, {}, true},
                             {{1, 2, 3}, {}, true},
                             {{}, {}, false},
                             {{2, 3}, {}, false},
                             {{2}, {1}, false}};
  for (const auto& c : cases) {
    auto r = NewRaft(1, c.voters, {.learners = c.learners});
    EXPECT_EQ(r->promotable(), c.want);
  }
}

// Removing a member lowers the quorum: entries waiting for it can commit.
TEST(Membership, CommitAfterRemoveNode) {
  auto r = NewRaft(1, {1, 2}, {.election = 5});
  r->BecomeCandidate();
  r->BecomeLeader();
  auto cc = CC(raftpb::CONF_CHANGE_REMOVE_NODE, 2);
  ASSERT_TRUE(
      r->Step(Msg({.type = raftpb::MSG_PROP, .from = 1, .to = 1, .entries = {ConfEntry(cc)}}))
          .ok());
  EXPECT_TRUE(r->log().NextCommittedEntries().empty());
  uint64_t cc_index = r->log().LastIndex();
  ASSERT_TRUE(r->Step(Prop(1, "hello")).ok());
  // 2 acknowledges the conf change: committed (with the empty entry before it).
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP_RESP,
                           .from = 2,
                           .to = 1,
                           .term = r->term(),
                           .index = cc_index}))
                  .ok());
  auto ents = r->log().NextCommittedEntries();
  ASSERT_EQ(ents.size(), 2u);
  EXPECT_EQ(ents[1].type(), raftpb::ENTRY_CONF_CHANGE);
  PersistAndApply(*r, *r.storage);
  // Applying it leaves a single voter: "hello" commits at once.
  r->ApplyConfChange(cc);
  ents = r->log().NextCommittedEntries();
  ASSERT_EQ(ents.size(), 1u);
  EXPECT_EQ(ents[0].data(), "hello");
}

// A leader removed from (or demoted in) the configuration steps down; it never campaigns again
// and drops proposals.
TEST(Membership, RemovedLeaderStepsDown) {
  for (auto type : {raftpb::CONF_CHANGE_REMOVE_NODE, raftpb::CONF_CHANGE_ADD_LEARNER_NODE}) {
    auto r = NewRaft(1, {1, 2, 3});
    r->BecomeCandidate();
    r->BecomeLeader();
    r->ApplyConfChange(CC(type, 1));
    EXPECT_EQ(r->state(), StateType::kFollower);
    EXPECT_EQ(r->lead(), kNone);
    EXPECT_FALSE(r->promotable());
    EXPECT_FALSE(r->Step(Prop(1)).ok());
    ReadMsgs(*r);
    for (int i = 0; i < 50; ++i) r->Tick();
    EXPECT_TRUE(ReadMsgs(*r).empty());
    EXPECT_EQ(r->state(), StateType::kFollower);
  }
}

// The remaining members elect a new leader after the old one removed itself.
TEST(Membership, ClusterContinuesAfterLeaderRemovesItself) {
  Network nt = Network::Of(3);
  nt.Send(Hup(1));
  auto cc = CC(raftpb::CONF_CHANGE_REMOVE_NODE, 1);
  nt.Send(Msg({.type = raftpb::MSG_PROP, .from = 1, .to = 1, .entries = {ConfEntry(cc)}}));
  ASSERT_EQ(nt[1].log().committed(), 2u);
  for (uint64_t id : {1, 2, 3}) {
    ASSERT_EQ(nt[id].log().committed(), 2u);
    nt[id].log().AppliedTo(2);  // a member campaigns only once its conf changes are applied
    nt[id].ApplyConfChange(cc);
  }
  EXPECT_EQ(nt[1].state(), StateType::kFollower);
  nt.Send(Hup(2));
  EXPECT_EQ(nt[2].state(), StateType::kLeader);
  nt.Send(Prop(2, "after"));
  EXPECT_EQ(nt[3].log().committed(), nt[2].log().LastIndex());
  EXPECT_EQ(Voters(nt[2]), std::set<uint64_t>({2, 3}));
}

// ---------------------------------------------------------------------------------------------
// Learners

TEST(Learner, NeverCampaigns) {
  auto r = NewRaft(2, {1}, {.learners = {2}});
  for (int i = 0; i < 40; ++i) r->Tick();
  EXPECT_EQ(r->state(), StateType::kFollower);
  EXPECT_TRUE(r->msgs.empty());
  ASSERT_TRUE(r->Step(Hup(2)).ok());
  EXPECT_EQ(r->state(), StateType::kFollower);
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_TIMEOUT_NOW, .from = 1, .to = 2, .term = 0})).ok());
  EXPECT_EQ(r->state(), StateType::kFollower);
  EXPECT_TRUE(r->msgs.empty());
}

// A learner answers vote requests: the candidate may already know a configuration in which the
// learner is a voter (etcd's campaign_learner_must_vote).
TEST(Learner, CanVote) {
  auto r = NewRaft(2, {1}, {.learners = {2}});
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_VOTE,
                           .from = 1,
                           .to = 2,
                           .term = 2,
                           .log_term = 11,
                           .index = 11}))
                  .ok());
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_VOTE_RESP);
  EXPECT_FALSE(msgs[0].reject());
}

// Learners receive the log but do not count for commitment.
TEST(Learner, LogReplicationWithoutQuorumWeight) {
  std::vector<TestRaft> slots;
  slots.push_back(NewRaft(1, {1, 2}, {.learners = {3}}));
  slots.push_back(NewRaft(2, {1, 2}, {.learners = {3}}));
  slots.push_back(NewRaft(3, {1, 2}, {.learners = {3}}));
  Network nt(std::move(slots));
  nt.Send(Hup(1));
  nt.Send(Prop(1));
  EXPECT_EQ(nt[1].log().committed(), 2u);
  EXPECT_EQ(nt[3].log().committed(), 2u);
  EXPECT_EQ(nt[1].tracker().Get(3)->match, 2u);
  // Only the learner acknowledges: nothing commits.
  nt.Cut(1, 2);
  nt.Send(Prop(1));
  EXPECT_EQ(nt[3].log().LastIndex(), 3u);
  EXPECT_EQ(nt[1].log().committed(), 2u);
  // A single voter commits alone, whatever its learners do.
  std::vector<TestRaft> solo;
  solo.push_back(NewRaft(1, {1}, {.learners = {2}}));
  solo.push_back(BlackHole());
  Network nt2(std::move(solo));
  nt2.Send(Hup(1));
  nt2.Send(Prop(1));
  EXPECT_EQ(nt2[1].log().committed(), 2u);
}

// Learners do not vote in elections either: a candidate needs a majority of voters.
TEST(Learner, VotesDoNotCount) {
  auto r = NewRaft(1, {1, 2, 3}, {.learners = {4, 5}});
  ASSERT_TRUE(r->Step(Hup(1)).ok());
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 2u);  // learners are not asked
  for (const auto& m : msgs) EXPECT_NE(m.to(), 4u);
  for (uint64_t id : {4, 5}) {
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_VOTE_RESP, .from = id, .to = 1, .term = 1})).ok());
  }
  EXPECT_EQ(r->state(), StateType::kCandidate);
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_VOTE_RESP, .from = 2, .to = 1, .term = 1})).ok());
  EXPECT_EQ(r->state(), StateType::kLeader);
}

// A learner promoted (ADD_NODE on a learner) becomes a voter and may then campaign.
TEST(Learner, Promotion) {
  std::vector<TestRaft> slots;
  slots.push_back(NewRaft(1, {1}, {.learners = {2}}));
  slots.push_back(NewRaft(2, {1}, {.learners = {2}}));
  Network nt(std::move(slots));
  nt.Send(Hup(1));
  ASSERT_EQ(nt[1].state(), StateType::kLeader);
  EXPECT_FALSE(nt[2].promotable());
  auto cc = CC(raftpb::CONF_CHANGE_ADD_NODE, 2);
  nt[1].ApplyConfChange(cc);
  nt[2].ApplyConfChange(cc);
  nt.Send(ReadMsgs(nt[1]));  // the leader feeds its new voter
  EXPECT_EQ(nt[2].log().LastIndex(), 1u);
  EXPECT_FALSE(nt[2].tracker().Get(2)->is_learner);
  EXPECT_TRUE(nt[2].promotable());
  EXPECT_EQ(Voters(nt[1]), std::set<uint64_t>({1, 2}));
  nt.Send(Hup(2));
  EXPECT_EQ(nt[2].state(), StateType::kLeader);
  EXPECT_EQ(nt[1].state(), StateType::kFollower);
}

// A voter can be demoted to learner: it stops counting for quorum.
TEST(Learner, Demotion) {
  auto r = NewRaft(1, {1, 2, 3});
  r->ApplyConfChange(CC(raftpb::CONF_CHANGE_ADD_LEARNER_NODE, 3));
  EXPECT_EQ(Voters(*r), std::set<uint64_t>({1, 2}));
  EXPECT_EQ(Learners(*r), std::set<uint64_t>({3}));
  EXPECT_TRUE(r->tracker().Get(3)->is_learner);
}

}  // namespace
}  // namespace etcdw::raft
