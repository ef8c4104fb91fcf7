// Leadership transfer: MsgTransferLeader to the leader (or through a follower); the leader
// catches the transferee up if needed, then sends MsgTimeoutNow; proposals are dropped meanwhile;
// the transfer aborts after an election timeout, on removal of the transferee, or when leadership
// changes otherwise.
#include <gtest/gtest.h>

#include <vector>

#include "raft/raft_test_util.h"

namespace etcdw::raft {
namespace {

using namespace rafttest;  // NOLINT(google-build-using-namespace)

Message Transfer(uint64_t transferee, uint64_t to) {
  return Msg({.type = raftpb::MSG_TRANSFER_LEADER, .from = transferee, .to = to});
}

void ExpectState(Raft& r, StateType state, uint64_t lead) {
  EXPECT_EQ(r.state(), state) << r.id();
  EXPECT_EQ(r.lead(), lead) << r.id();
  EXPECT_EQ(r.lead_transferee(), kNone) << r.id();
}

class LeaderTransfer : public ::testing::TestWithParam<bool> {
 protected:
  Opts O() const { return {.pre_vote = GetParam()}; }
};

TEST_P(LeaderTransfer, ToUpToDateNode) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  ASSERT_EQ(nt[1].lead(), 1u);
  nt.Send(Transfer(2, 1));
  ExpectState(nt[1], StateType::kFollower, 2);
  ExpectState(nt[2], StateType::kLeader, 2);
  EXPECT_EQ(nt[2].term(), 2u);  // no pre-vote round for a transfer, and no term wasted
  // After some log replication, transfer back.
  nt.Send(Prop(2));
  nt.Send(Transfer(1, 2));
  ExpectState(nt[1], StateType::kLeader, 1);
  EXPECT_EQ(nt[3].lead(), 1u);
}

// A follower forwards the request to the leader.
TEST_P(LeaderTransfer, ToUpToDateNodeFromFollower) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Send(Transfer(2, 2));
  ExpectState(nt[1], StateType::kFollower, 2);
  ExpectState(nt[2], StateType::kLeader, 2);
  nt.Send(Prop(1));
  nt.Send(Transfer(1, 1));
  ExpectState(nt[1], StateType::kLeader, 1);
}

// The transferee's election bypasses the check-quorum lease of the other followers.
TEST_P(LeaderTransfer, WithCheckQuorum) {
  Opts o = O();
  o.check_quorum = true;
  Network nt = Network::Of(3, o);
  nt.Send(Hup(1));
  ASSERT_EQ(nt[1].state(), StateType::kLeader);
  nt.Send(Transfer(2, 1));
  ExpectState(nt[1], StateType::kFollower, 2);
  ExpectState(nt[2], StateType::kLeader, 2);
  // An ordinary campaign by 3 right now would be ignored (leases), the transfer was not.
  nt.Send(Hup(3));
  EXPECT_EQ(nt[2].state(), StateType::kLeader);
}

// A lagging transferee is caught up first, then told to campaign.
TEST_P(LeaderTransfer, ToSlowFollower) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Isolate(3);
  nt.Send(Prop(1));
  nt.Recover();
  ASSERT_EQ(nt[1].tracker().Get(3)->match, 1u);
  nt.Send(Transfer(3, 1));
  ExpectState(nt[1], StateType::kFollower, 3);
  ExpectState(nt[3], StateType::kLeader, 3);
  EXPECT_EQ(nt[3].log().LastIndex(), 3u);  // 1's entries + its own empty entry
}

// A transferee that needs a snapshot: the transfer completes once it has applied it.
TEST_P(LeaderTransfer, AfterSnapshot) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Isolate(3);
  nt.Send(Prop(1));
  Raft& lead = nt[1];
  SnapshotAndCompact(nt, 1);
  nt.Recover();
  ASSERT_EQ(lead.tracker().Get(3)->match, 1u);
  // Hold 3's acknowledgement of the snapshot until it has persisted the snapshot.
  std::optional<Message> held;
  nt.hook = [&](const Message& m) {
    if (m.type() != raftpb::MSG_APP_RESP || m.from() != 3 || m.reject()) return true;
    held = m;
    return false;
  };
  nt.Send(Transfer(3, 1));
  EXPECT_EQ(lead.state(), StateType::kLeader);
  EXPECT_EQ(lead.lead_transferee(), 3u);
  ASSERT_TRUE(held);
  ASSERT_TRUE(nt[3].log().UnstableSnapshot());
  Persist(nt[3], nt.StorageOf(3));
  nt[3].log().AppliedTo(nt[3].log().committed());
  nt.hook = nullptr;
  nt.Send(*held);
  ExpectState(lead, StateType::kFollower, 3);
  ExpectState(nt[3], StateType::kLeader, 3);
}

TEST_P(LeaderTransfer, ToSelfIsNoop) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Send(Transfer(1, 1));
  ExpectState(nt[1], StateType::kLeader, 1);
  EXPECT_EQ(nt[1].term(), 1u);
}

TEST_P(LeaderTransfer, ToNonMemberIsIgnored) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Send(Transfer(4, 1));
  ExpectState(nt[1], StateType::kLeader, 1);
}

TEST_P(LeaderTransfer, ToLearnerIsIgnored) {
  Opts o = O();
  o.learners = {3};
  std::vector<TestRaft> slots;
  for (uint64_t id : {1, 2, 3}) slots.push_back(NewRaft(id, {1, 2}, o));
  Network nt(std::move(slots));
  nt.Send(Hup(1));
  nt.Send(Transfer(3, 1));
  ExpectState(nt[1], StateType::kLeader, 1);
  EXPECT_EQ(nt[3].state(), StateType::kFollower);
}

// A transfer that does not complete within an election timeout is abandoned.
TEST_P(LeaderTransfer, Timeout) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Isolate(3);
  nt.Send(Transfer(3, 1));
  Raft& lead = nt[1];
  EXPECT_EQ(lead.lead_transferee(), 3u);
  for (int i = 0; i < 9; ++i) lead.Tick();  // heartbeat ticks
  EXPECT_EQ(lead.lead_transferee(), 3u);
  lead.Tick();  // an election timeout since the request
  ExpectState(lead, StateType::kLeader, 1);
  EXPECT_TRUE(lead.Step(Prop(1)).ok());  // proposals are accepted again
}

// While a transfer is pending, proposals are dropped.
TEST_P(LeaderTransfer, IgnoreProposal) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Isolate(3);
  nt.Send(Transfer(3, 1));
  Raft& lead = nt[1];
  ASSERT_EQ(lead.lead_transferee(), 3u);
  uint64_t last = lead.log().LastIndex();
  Status st = lead.Step(Prop(1));
  EXPECT_EQ(st.code(), ErrProposalDropped().code());
  EXPECT_EQ(lead.log().LastIndex(), last);
  EXPECT_EQ(lead.tracker().Get(1)->match, last);
}

// Leadership changing otherwise (a higher-term election) ends the transfer.
TEST_P(LeaderTransfer, ReceiveHigherTermVote) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Isolate(3);
  nt.Send(Transfer(3, 1));
  ASSERT_EQ(nt[1].lead_transferee(), 3u);
  nt.Send(Hup(2));
  ExpectState(nt[1], StateType::kFollower, 2);
  EXPECT_EQ(nt[2].state(), StateType::kLeader);
}

// Removing the transferee aborts the transfer.
TEST_P(LeaderTransfer, RemoveTransferee) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Ignore(raftpb::MSG_TIMEOUT_NOW);
  nt.Send(Transfer(3, 1));
  ASSERT_EQ(nt[1].lead_transferee(), 3u);
  nt[1].ApplyConfChange(CC(raftpb::CONF_CHANGE_REMOVE_NODE, 3));
  ExpectState(nt[1], StateType::kLeader, 1);
}

// Demoting the transferee to learner aborts the transfer too.
TEST_P(LeaderTransfer, DemoteTransferee) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Ignore(raftpb::MSG_TIMEOUT_NOW);
  nt.Send(Transfer(3, 1));
  nt[1].ApplyConfChange(CC(raftpb::CONF_CHANGE_ADD_LEARNER_NODE, 3));
  ExpectState(nt[1], StateType::kLeader, 1);
}

// A second request to another member replaces the first.
TEST_P(LeaderTransfer, SecondTransferToAnotherNode) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Isolate(3);
  nt.Send(Transfer(3, 1));
  ASSERT_EQ(nt[1].lead_transferee(), 3u);
  nt.Send(Transfer(2, 1));
  ExpectState(nt[1], StateType::kFollower, 2);
  EXPECT_EQ(nt[2].state(), StateType::kLeader);
}

// A repeated request to the same member does not extend its deadline.
TEST_P(LeaderTransfer, SecondTransferToSameNode) {
  Network nt = Network::Of(3, O());
  nt.Send(Hup(1));
  nt.Isolate(3);
  nt.Send(Transfer(3, 1));
  Raft& lead = nt[1];
  for (int i = 0; i < 5; ++i) lead.Tick();
  nt.Send(Transfer(3, 1));
  for (int i = 0; i < 5; ++i) lead.Tick();
  ExpectState(lead, StateType::kLeader, 1);
}

// MsgTimeoutNow makes a follower campaign at once, skipping pre-vote, with requests marked as a
// transfer (so that in-lease members answer them).
TEST_P(LeaderTransfer, TimeoutNowMakesFollowerCampaignAtOnce) {
  auto r = NewRaft(2, {1, 2, 3}, O());
  r->BecomeFollower(1, 1);
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_TIMEOUT_NOW, .from = 1, .to = 2, .term = 1})).ok());
  EXPECT_EQ(r->state(), StateType::kCandidate);  // never a pre-candidate
  EXPECT_EQ(r->term(), 2u);
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 2u);
  for (const auto& m : msgs) {
    EXPECT_EQ(m.type(), raftpb::MSG_VOTE);
    EXPECT_EQ(m.context(), kCampaignTransfer);
  }
}

INSTANTIATE_TEST_SUITE_P(Raft, LeaderTransfer, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "PreVote" : "Plain"; });

}  // namespace
}  // namespace etcdw::raft
