// The Raft state machine beyond the paper's sentences: elections in networks, replication and
// flow control (probe / replicate, inflight windows), pre-vote, check-quorum, proposals,
// message handling in every state, and the uncommitted-size limit.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "raft/raft_test_util.h"

namespace etcdw::raft {
namespace {

using namespace rafttest;  // NOLINT(google-build-using-namespace)

// Ticks until one election timeout of this member has certainly passed.
void TickElection(Raft& r) {
  for (int i = 0; i < r.randomized_election_timeout(); ++i) r.Tick();
}

Message AppResp(uint64_t from, uint64_t to, uint64_t term, uint64_t index, bool reject = false,
                uint64_t hint = 0) {
  return Msg({.type = raftpb::MSG_APP_RESP,
              .from = from,
              .to = to,
              .term = term,
              .index = index,
              .reject = reject,
              .reject_hint = hint});
}

// ---------------------------------------------------------------------------------------------
// Elections

class Election : public ::testing::TestWithParam<bool> {
 protected:
  Opts O() const { return {.pre_vote = GetParam()}; }
};

TEST_P(Election, Outcomes) {
  const bool pre_vote = GetParam();
  struct Case {
    std::function<Network()> make;
    StateType want;
    uint64_t want_term;
  };
  auto slots = [&](std::vector<int> kinds) {
    // 0: fresh member, 1: black hole, 2: log [1/1] at term 1, 3: log [1/1 2/1] at term 1
    std::vector<TestRaft> out;
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < kinds.size(); ++i) ids.push_back(i + 1);
    for (size_t i = 0; i < kinds.size(); ++i) {
      switch (kinds[i]) {
        case 0:
          out.emplace_back();
          break;
        case 1:
          out.push_back(BlackHole());
          break;
        case 2:
          out.push_back(NewRaftWithLog(i + 1, ids, Terms(1, {1}), HS(1, 0, 0), O()));
          break;
        case 3:
          out.push_back(NewRaftWithLog(i + 1, ids, Terms(1, {1, 1}), HS(1, 0, 0), O()));
          break;
      }
    }
    return Network(std::move(out), O());
  };
  std::vector<Case> cases = {
      {[&] {
         return slots({0, 0, 0});
       },
       StateType::kLeader, 1},
      {[&] {
         return slots({0, 0, 1});
       },
       StateType::kLeader, 1},
      {[&] {
         return slots({0, 1, 1});
       },
       StateType::kCandidate, 1},
      {[&] {
         return slots({0, 1, 1, 0});
       },
       StateType::kCandidate, 1},
      {[&] {
         return slots({0, 1, 1, 0, 0});
       },
       StateType::kLeader, 1},
      // Three logs further along, in the same term: rejections (carrying term 1, which the
      // loser adopts), not silence.
      {[&] {
         return slots({0, 2, 2, 3, 0});
       },
       StateType::kFollower, 1},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    Network nt = cases[i].make();
    nt.Send(Hup(1));
    StateType want = cases[i].want;
    // A pre-candidate that cannot win stays pre-candidate, not candidate.
    if (pre_vote && want == StateType::kCandidate) want = StateType::kPreCandidate;
    EXPECT_EQ(nt[1].state(), want) << "case " << i;
    EXPECT_EQ(nt[1].term(), want == StateType::kPreCandidate ? 0u : cases[i].want_term)
        << "case " << i;
  }
}

// Each member in turn campaigns and wins; everybody else follows it.
TEST_P(Election, LeaderCycle) {
  Network nt = Network::Of(3, O());
  for (uint64_t campaigner = 1; campaigner <= 3; ++campaigner) {
    nt.Send(Hup(campaigner));
    for (uint64_t id = 1; id <= 3; ++id) {
      EXPECT_EQ(nt[id].state(), id == campaigner ? StateType::kLeader : StateType::kFollower);
      EXPECT_EQ(nt[id].lead(), campaigner);
    }
  }
}

// Two candidates: the one that reaches a majority first wins; the other, whose log is behind,
// can disrupt the term (without pre-vote) but not win.
TEST_P(Election, DuelingCandidates) {
  const bool pre_vote = GetParam();
  Network nt = Network::Of(3, O());
  nt.Cut(1, 3);
  nt.Send(Hup(1));
  nt.Send(Hup(3));
  EXPECT_EQ(nt[1].state(), StateType::kLeader);
  // Without pre-vote 3 waits as candidate (2 already voted); with pre-vote 2's rejection
  // carries term 1 and 3 reverts to follower of that term.
  EXPECT_EQ(nt[3].state(), pre_vote ? StateType::kFollower : StateType::kCandidate);
  EXPECT_EQ(nt[3].term(), 1u);
  nt.Recover();
  // 3's log lacks the leader's entry: its votes are rejected.
  nt.Send(Hup(3));
  if (pre_vote) {
    // The pre-vote fails, nobody's term moves, 1 stays leader.
    EXPECT_EQ(nt[1].state(), StateType::kLeader);
    EXPECT_EQ(nt[1].term(), 1u);
    EXPECT_EQ(nt[3].state(), StateType::kFollower);
    EXPECT_EQ(nt[3].term(), 1u);
  } else {
    // The real vote at term 2 deposes 1, but nobody can win with 3's short log right away.
    for (uint64_t id : {1, 2, 3}) {
      EXPECT_EQ(nt[id].state(), StateType::kFollower) << id;
      EXPECT_EQ(nt[id].term(), 2u) << id;
    }
  }
  EXPECT_EQ(nt[1].log().committed(), 1u);
  EXPECT_EQ(nt[2].log().committed(), 1u);
  EXPECT_EQ(nt[3].log().LastIndex(), 0u);
}

// A candidate that hears from a legitimate leader concedes, and its log then follows.
TEST_P(Election, CandidateConcede) {
  Network nt = Network::Of(3, O());
  nt.Isolate(1);
  nt.Send(Hup(1));
  nt.Send(Hup(3));
  nt.Recover();
  nt.Send(Msg({.type = raftpb::MSG_BEAT, .from = 3, .to = 3}));
  nt.Send(Prop(3, "force follower"));
  nt.Send(Msg({.type = raftpb::MSG_BEAT, .from = 3, .to = 3}));
  EXPECT_EQ(nt[1].state(), StateType::kFollower);
  EXPECT_EQ(nt[1].term(), 1u);
  auto want = AllEntries(nt[3].log());
  ASSERT_EQ(want.size(), 2u);
  for (uint64_t id : {1, 2, 3}) {
    EXPECT_TRUE(EntriesEq(AllEntries(nt[id].log()), want)) << id;
    EXPECT_EQ(nt[id].log().committed(), 2u) << id;
  }
}

TEST_P(Election, SingleNodeCandidate) {
  Network nt = Network::Of(1, O());
  nt.Send(Hup(1));
  EXPECT_EQ(nt[1].state(), StateType::kLeader);
  EXPECT_EQ(nt[1].term(), 1u);
  EXPECT_EQ(nt[1].log().committed(), 1u);  // its empty entry commits at once
}

// Any member, in any state, grants a vote (or pre-vote) for a newer term to an up-to-date
// candidate; a vote also makes it a follower of that term, a pre-vote changes nothing.
TEST(Raft, VoteFromAnyState) {
  for (MessageType vt : {raftpb::MSG_VOTE, raftpb::MSG_PRE_VOTE}) {
    for (StateType st : {StateType::kFollower, StateType::kCandidate, StateType::kPreCandidate,
                         StateType::kLeader}) {
      auto r = NewRaft(1, {1, 2, 3}, {.pre_vote = true});
      r->BecomeFollower(1, kNone);
      BecomeState(*r, st, /*follower_term=*/1, /*lead=*/3);
      uint64_t orig_term = r->term(), orig_vote = r->vote();
      uint64_t new_term = orig_term + 1;
      ASSERT_TRUE(r->Step(Msg({.type = vt,
                               .from = 2,
                               .to = 1,
                               .term = new_term,
                               .log_term = new_term,
                               .index = 42}))
                      .ok());
      auto msgs = ReadMsgs(*r);
      ASSERT_EQ(msgs.size(), 1u) << StateName(st);
      EXPECT_EQ(msgs[0].type(), VoteResponseType(vt));
      EXPECT_FALSE(msgs[0].reject()) << StateName(st);
      EXPECT_EQ(msgs[0].term(), new_term);
      if (vt == raftpb::MSG_VOTE) {
        EXPECT_EQ(r->state(), StateType::kFollower) << StateName(st);
        EXPECT_EQ(r->term(), new_term);
        EXPECT_EQ(r->vote(), 2u);
      } else {
        EXPECT_EQ(r->state(), st) << StateName(st);
        EXPECT_EQ(r->term(), orig_term);
        EXPECT_EQ(r->vote(), orig_vote);
      }
    }
  }
}

// A vote request is granted only when the voter has not voted for somebody else in the term and
// the candidate's log is at least as up to date.
TEST(Raft, RecvMsgVote) {
  struct Case {
    StateType state;
    uint64_t index, log_term, vote_for;
    bool reject;
  };
  // The voter's log: [1/2 2/2], term 2 (candidates ask at term 2).
  std::vector<Case> cases = {
      {StateType::kFollower, 0, 0, kNone, true},
      {StateType::kFollower, 0, 1, kNone, true},
      {StateType::kFollower, 0, 2, kNone, true},
      {StateType::kFollower, 0, 3, kNone, false},
      {StateType::kFollower, 1, 0, kNone, true},
      {StateType::kFollower, 1, 1, kNone, true},
      {StateType::kFollower, 1, 2, kNone, true},
      {StateType::kFollower, 1, 3, kNone, false},
      {StateType::kFollower, 2, 2, kNone, false},
      {StateType::kFollower, 3, 2, kNone, false},
      {StateType::kFollower, 3, 3, kNone, false},
      {StateType::kFollower, 3, 2, 2, false},  // voted for this candidate already
      {StateType::kFollower, 3, 2, 1, true},   // voted for another one
      {StateType::kLeader, 3, 3, 1, true},
      {StateType::kCandidate, 3, 3, 1, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto r = NewRaftWithLog(1, {1, 2}, Terms(1, {2, 2}), HS(2, c.vote_for, 0));
    switch (c.state) {
      case StateType::kFollower:
        break;
      case StateType::kCandidate:
        r->BecomeCandidate();  // term 3, voted for itself: refuses 2 in that term
        break;
      case StateType::kLeader:
        r->BecomeCandidate();
        r->BecomeLeader();
        break;
      default:
        break;
    }
    uint64_t term = r->term();
    ReadMsgs(*r);
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_VOTE,
                             .from = 2,
                             .to = 1,
                             .term = term,
                             .log_term = c.log_term,
                             .index = c.index}))
                    .ok());
    auto msgs = ReadMsgs(*r);
    ASSERT_EQ(msgs.size(), 1u) << "case " << i;
    EXPECT_EQ(msgs[0].type(), raftpb::MSG_VOTE_RESP);
    EXPECT_EQ(msgs[0].reject(), c.reject) << "case " << i;
  }
}

TEST(Raft, StateTransition) {
  {
    auto r = NewRaft(1, {1});
    EXPECT_THROW(r->BecomeLeader(), std::logic_error);  // follower -> leader
  }
  {
    auto r = NewRaft(1, {1});
    r->BecomeCandidate();
    r->BecomeLeader();
    EXPECT_THROW(r->BecomeCandidate(), std::logic_error);
    EXPECT_THROW(r->BecomePreCandidate(), std::logic_error);
    r->BecomeFollower(2, 2);
    EXPECT_EQ(r->state(), StateType::kFollower);
  }
  {
    auto r = NewRaft(1, {1});
    r->BecomePreCandidate();
    EXPECT_EQ(r->term(), 0u);  // a pre-candidate does not change its term
    r->BecomeCandidate();
    EXPECT_EQ(r->term(), 1u);
    EXPECT_EQ(r->vote(), 1u);
    r->BecomeLeader();
    EXPECT_EQ(r->lead(), 1u);
  }
}

// Every state steps down on a message of a newer term; an AppendEntries names the leader, a
// vote request does not.
TEST(Raft, AllServerStepdown) {
  for (StateType st : {StateType::kFollower, StateType::kPreCandidate, StateType::kCandidate,
                       StateType::kLeader}) {
    for (MessageType mt : {raftpb::MSG_VOTE, raftpb::MSG_APP}) {
      auto r = NewRaft(1, {1, 2, 3});
      BecomeState(*r, st, /*follower_term=*/1, kNone);
      ASSERT_TRUE(r->Step(Msg({.type = mt, .from = 2, .to = 1, .term = 3, .log_term = 3})).ok());
      EXPECT_EQ(r->state(), StateType::kFollower) << StateName(st);
      EXPECT_EQ(r->term(), 3u);
      EXPECT_EQ(r->lead(), mt == raftpb::MSG_APP ? 2u : kNone) << StateName(st);
    }
  }
}

TEST(Raft, CampaignWhileLeaderIsNoop) {
  for (bool pre_vote : {false, true}) {
    auto r = NewRaft(1, {1}, {.pre_vote = pre_vote});
    ASSERT_TRUE(r->Step(Hup(1)).ok());
    ASSERT_EQ(r->state(), StateType::kLeader);
    uint64_t term = r->term();
    ASSERT_TRUE(r->Step(Hup(1)).ok());
    EXPECT_EQ(r->state(), StateType::kLeader);
    EXPECT_EQ(r->term(), term);
  }
}

// A member with unapplied configuration changes in its committed log does not campaign.
TEST(Raft, NoCampaignWithUnappliedConfChange) {
  auto cc = ConfEntry(CC(raftpb::CONF_CHANGE_ADD_NODE, 4));
  cc.set_index(1);
  cc.set_term(1);
  auto r = NewRaftWithLog(1, {1, 2, 3}, {cc}, HS(1, 0, 1));
  ASSERT_TRUE(r->Step(Hup(1)).ok());
  EXPECT_EQ(r->state(), StateType::kFollower);
  EXPECT_TRUE(r->msgs.empty());
  r->log().AppliedTo(1);
  ASSERT_TRUE(r->Step(Hup(1)).ok());
  EXPECT_EQ(r->state(), StateType::kCandidate);
}

// An isolated candidate with a higher term falls back on the current leader's heartbeat or
// AppendEntries as soon as that leader's term is higher again.
TEST(Raft, CandidateResetTermOnLeaderMessage) {
  for (MessageType mt : {raftpb::MSG_HEARTBEAT, raftpb::MSG_APP}) {
    Network nt = Network::Of(3);
    nt.Send(Hup(1));
    ASSERT_EQ(nt[1].state(), StateType::kLeader);
    nt.Isolate(3);
    nt.Send(Hup(2));
    nt.Send(Hup(1));
    ASSERT_EQ(nt[1].state(), StateType::kLeader);
    ASSERT_EQ(nt[1].term(), 3u);
    TickElection(nt[3]);
    ReadMsgs(nt[3]);
    ASSERT_EQ(nt[3].state(), StateType::kCandidate);
    ASSERT_EQ(nt[3].term(), 2u);
    nt.Recover();
    nt.Send(Msg({.type = mt, .from = 1, .to = 3, .term = nt[1].term()}));
    EXPECT_EQ(nt[3].state(), StateType::kFollower);
    EXPECT_EQ(nt[3].term(), nt[1].term());
    EXPECT_EQ(nt[3].lead(), 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Raft, Election, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "PreVote" : "Plain"; });

// ---------------------------------------------------------------------------------------------
// Replication

TEST(Raft, LogReplication) {
  struct Case {
    std::vector<Message> msgs;
    uint64_t want_commit;
  };
  std::vector<Case> cases = {
      {{Prop(1)}, 2},
      {{Prop(1), Hup(2), Prop(2)}, 4},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    Network nt = Network::Of(3);
    nt.Send(Hup(1));
    for (const auto& m : cases[i].msgs) nt.Send(m);
    for (uint64_t id : {1, 2, 3}) {
      EXPECT_EQ(nt[id].log().committed(), cases[i].want_commit) << "case " << i << " id " << id;
      std::vector<std::string> datas;
      for (const auto& e : nt[id].log().NextCommittedEntries()) {
        if (!e.data().empty()) datas.push_back(e.data());
      }
      size_t props = 0;
      for (const auto& m : cases[i].msgs) props += m.type() == raftpb::MSG_PROP;
      EXPECT_EQ(datas.size(), props) << "case " << i << " id " << id;
    }
  }
}

TEST(Raft, SingleNodeCommit) {
  Network nt = Network::Of(1);
  nt.Send(Hup(1));
  nt.Send(Prop(1, "some data"));
  nt.Send(Prop(1, "some data"));
  EXPECT_EQ(nt[1].log().committed(), 3u);
}

// Entries of an earlier term replicated on a majority are not committed by a new leader until
// it commits an entry of its own term (figure 8).
TEST(Raft, CannotCommitWithoutNewTermEntry) {
  Network nt = Network::Of(5);
  nt.Send(Hup(1));
  for (uint64_t id : {3, 4, 5}) nt.Cut(1, id);
  nt.Send(Prop(1));
  nt.Send(Prop(1));
  EXPECT_EQ(nt[1].log().committed(), 1u);
  nt.Recover();
  nt.Ignore(raftpb::MSG_APP);  // no new-term entry may commit
  nt.Send(Hup(2));
  ASSERT_EQ(nt[2].state(), StateType::kLeader);
  EXPECT_EQ(nt[2].log().committed(), 1u);
  nt.Recover();
  nt.Send(Msg({.type = raftpb::MSG_BEAT, .from = 2, .to = 2}));
  nt.Send(Prop(2));
  EXPECT_EQ(nt[2].log().committed(), 5u);
}

// Committing the new leader's empty entry also commits the earlier ones.
TEST(Raft, CommitWithNewTermEntry) {
  Network nt = Network::Of(5);
  nt.Send(Hup(1));
  for (uint64_t id : {3, 4, 5}) nt.Cut(1, id);
  nt.Send(Prop(1));
  nt.Send(Prop(1));
  EXPECT_EQ(nt[1].log().committed(), 1u);
  nt.Recover();
  nt.Send(Hup(2));  // its empty entry of term 2 reaches everyone
  EXPECT_EQ(nt[2].log().committed(), 4u);
}

// Messages of an old term are ignored: the log keeps only what the current leader wrote.
TEST(Raft, OldMessages) {
  Network nt = Network::Of(3);
  nt.Send(Hup(1));
  nt.Send(Hup(2));
  nt.Send(Hup(1));
  ASSERT_EQ(nt[1].term(), 3u);
  // Pretend an old leader of term 2 sends an entry.
  nt.Send(Msg({.type = raftpb::MSG_APP,
               .from = 2,
               .to = 1,
               .term = 2,
               .log_term = 2,
               .index = 2,
               .entries = {E(3, 2)}}));
  nt.Send(Prop(1));
  std::vector<Entry> want = {E(1, 1), E(2, 2), E(3, 3), E(4, 3, "somedata")};
  for (uint64_t id : {1, 2, 3}) {
    EXPECT_TRUE(EntriesEq(AllEntries(nt[id].log()), want)) << id;
    EXPECT_EQ(nt[id].log().committed(), 4u);
  }
}

TEST(Raft, Proposal) {
  struct Case {
    std::vector<int> kinds;  // 0 member, 1 black hole
    bool success;
  };
  std::vector<Case> cases = {
      {{0, 0, 0}, true},     {{0, 0, 1}, true},       {{0, 1, 1}, false},
      {{0, 1, 1, 0}, false}, {{0, 1, 1, 0, 0}, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<TestRaft> slots;
    for (int k : cases[i].kinds) slots.push_back(k ? BlackHole() : TestRaft{});
    Network nt(std::move(slots));
    nt.Send(Hup(1));
    nt.Send(Prop(1));
    if (cases[i].success) {
      EXPECT_EQ(nt[1].state(), StateType::kLeader) << "case " << i;
      EXPECT_EQ(nt[1].log().committed(), 2u) << "case " << i;
      for (uint64_t id : nt.Ids()) {
        EXPECT_TRUE(EntriesEq(AllEntries(nt[id].log()), AllEntries(nt[1].log())));
      }
    } else {
      EXPECT_NE(nt[1].state(), StateType::kLeader) << "case " << i;
      EXPECT_EQ(nt[1].log().committed(), 0u) << "case " << i;
    }
  }
}

// A follower forwards proposals to its leader.
TEST(Raft, ProposalByProxy) {
  for (bool third_down : {false, true}) {
    std::vector<TestRaft> slots(3);
    if (third_down) slots[2] = BlackHole();
    Network nt(std::move(slots));
    nt.Send(Hup(1));
    nt.Send(Prop(2, "proxied"));
    EXPECT_EQ(nt[1].log().committed(), 2u);
    EXPECT_EQ(nt[2].log().committed(), 2u);
    EXPECT_TRUE(EntriesEq(AllEntries(nt[2].log()), {E(1, 1), E(2, 1, "proxied")}));
  }
}

TEST(Raft, ProposalDroppedWithoutLeader) {
  auto r = NewRaft(1, {1, 2, 3});
  EXPECT_EQ(r->Step(Prop(1)).code(), ErrProposalDropped().code());
  r->BecomeCandidate();
  EXPECT_EQ(r->Step(Prop(1)).code(), ErrProposalDropped().code());
  auto f = NewRaft(1, {1, 2, 3});
  f->BecomeFollower(1, 2);
  Config c = MakeConfig(1, f.storage.get(), {});
  c.disable_proposal_forwarding = true;
  Raft nofwd(c);
  nofwd.BecomeFollower(1, 2);
  EXPECT_FALSE(nofwd.Step(Prop(1)).ok());
  EXPECT_TRUE(nofwd.msgs.empty());
}

// A heartbeat moves the follower's commit index forward (never back) and is answered.
TEST(Raft, HandleHeartbeat) {
  const uint64_t commit = 2;
  struct Case {
    uint64_t commit, want;
  };
  std::vector<Case> cases = {{commit + 1, commit + 1}, {commit - 1, commit}};
  for (const auto& c : cases) {
    auto r = NewRaftWithLog(1, {1, 2}, Terms(1, {1, 2, 3}), HS(2, 0, commit));
    r->BecomeFollower(2, 2);
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT,
                             .from = 2,
                             .to = 1,
                             .term = 2,
                             .commit = c.commit,
                             .context = "ctx"}))
                    .ok());
    EXPECT_EQ(r->log().committed(), c.want);
    auto msgs = ReadMsgs(*r);
    ASSERT_EQ(msgs.size(), 1u);
    EXPECT_EQ(msgs[0].type(), raftpb::MSG_HEARTBEAT_RESP);
    EXPECT_EQ(msgs[0].context(), "ctx");
  }
}

// A heartbeat response from a follower that is behind makes the leader send it entries.
TEST(Raft, HandleHeartbeatResp) {
  auto r = NewRaftWithLog(1, {1, 2}, Terms(1, {1, 2, 3}), HS(3, 0, 0));
  r->BecomeCandidate();
  r->BecomeLeader();
  r->log().CommitTo(r->log().LastIndex());
  // A heartbeat response from a follower that is behind: send it an append.
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP, .from = 2, .to = 1})).ok());
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_APP);
  // The probe is out: the next heartbeat response resends it (the probe may have been lost).
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP, .from = 2, .to = 1})).ok());
  msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_APP);
  // Once it caught up, heartbeat responses send nothing more.
  ASSERT_TRUE(r->Step(AppResp(2, 1, r->term(), msgs[0].index() + msgs[0].entries_size())).ok());
  ReadMsgs(*r);
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP, .from = 2, .to = 1})).ok());
  EXPECT_TRUE(ReadMsgs(*r).empty());
}

// After a member acknowledges, the leader no longer waits for it: the next proposal goes to the
// members that are not waiting only.
TEST(Raft, MsgAppRespWaitReset) {
  auto r = NewRaft(1, {1, 2, 3}, {.election = 5});
  ASSERT_TRUE(r->Step(Hup(1)).ok());
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_VOTE_RESP, .from = 2, .to = 1, .term = 1})).ok());
  ASSERT_EQ(r->state(), StateType::kLeader);
  ReadMsgs(*r);  // the first MsgApps (probes)
  ASSERT_TRUE(r->Step(AppResp(2, 1, 1, 1)).ok());
  EXPECT_EQ(r->log().committed(), 1u);
  ReadMsgs(*r);  // commit updates
  ASSERT_TRUE(r->Step(Prop(1)).ok());
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u) << Str(msgs);
  EXPECT_EQ(msgs[0].to(), 2u);
  ASSERT_EQ(msgs[0].entries_size(), 1);
  EXPECT_EQ(msgs[0].entries(0).index(), 2u);
  // 3 acknowledges its probe: the wait is over, it gets entry 2.
  ASSERT_TRUE(r->Step(AppResp(3, 1, 1, 1)).ok());
  msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u) << Str(msgs);
  EXPECT_EQ(msgs[0].to(), 3u);
  ASSERT_EQ(msgs[0].entries_size(), 1);
  EXPECT_EQ(msgs[0].entries(0).index(), 2u);
}

// The leader's answers to MsgAppResp: a rejection of the probe in flight moves next back to the
// hint and probes again; stale rejections and acks change nothing; an acceptance moves match,
// switches to replicate, commits and tells everyone.
TEST(Raft, LeaderAppResp) {
  // Leader log [1/0 2/1 3/1] + its empty entry 4/1; followers probe at next 4.
  auto make = [] {
    auto r = NewRaftWithLog(1, {1, 2, 3}, {E(1, 0), E(2, 1), E(3, 1)}, HS(0, 0, 0));
    r->BecomeCandidate();
    r->BecomeLeader();
    ReadMsgs(*r);
    r->tracker().Get(2)->probe_sent = true;  // the probe at index 3 is in flight
    return r;
  };
  {
    auto r = make();
    ASSERT_TRUE(r->Step(AppResp(2, 1, 1, 3, true, 2)).ok());
    EXPECT_EQ(r->tracker().Get(2)->next, 3u);
    auto msgs = ReadMsgs(*r);
    ASSERT_EQ(msgs.size(), 1u) << Str(msgs);
    EXPECT_EQ(msgs[0].to(), 2u);
    EXPECT_EQ(msgs[0].index(), 2u);
    EXPECT_EQ(msgs[0].log_term(), 1u);
    EXPECT_EQ(msgs[0].entries_size(), 2);
  }
  {
    auto r = make();
    ASSERT_TRUE(r->Step(AppResp(2, 1, 1, 2, true, 2)).ok());  // not the probe in flight
    EXPECT_EQ(r->tracker().Get(2)->next, 4u);
    EXPECT_TRUE(r->tracker().Get(2)->probe_sent);
    EXPECT_TRUE(ReadMsgs(*r).empty());
  }
  {
    auto r = make();
    r->tracker().Get(2)->match = 1;
    ASSERT_TRUE(r->Step(AppResp(2, 1, 1, 0)).ok());  // stale ack, below match
    EXPECT_EQ(r->tracker().Get(2)->match, 1u);
    EXPECT_EQ(r->tracker().Get(2)->next, 4u);
    EXPECT_EQ(r->tracker().Get(2)->state, ProgressState::kProbe);
    EXPECT_TRUE(ReadMsgs(*r).empty());
  }
  {
    auto r = make();
    r->tracker().Get(2)->match = 1;
    // An accepted probe at match: nothing new, but the follower's position is known: replicate.
    ASSERT_TRUE(r->Step(AppResp(2, 1, 1, 1)).ok());
    EXPECT_EQ(r->tracker().Get(2)->match, 1u);
    EXPECT_EQ(r->tracker().Get(2)->state, ProgressState::kReplicate);
    auto msgs = ReadMsgs(*r);
    ASSERT_EQ(msgs.size(), 1u) << Str(msgs);
    EXPECT_EQ(msgs[0].index(), 1u);
    EXPECT_EQ(msgs[0].entries_size(), 3);
  }
  {
    auto r = make();
    ASSERT_TRUE(r->Step(AppResp(2, 1, 1, 2)).ok());
    const Progress* p = r->tracker().Get(2);
    EXPECT_EQ(p->match, 2u);
    EXPECT_EQ(p->state, ProgressState::kReplicate);
    EXPECT_EQ(r->log().committed(), 2u);  // entry 2 is of the leader's term 1
    auto msgs = ReadMsgs(*r);
    ASSERT_EQ(msgs.size(), 2u) << Str(msgs);
    for (const auto& m : msgs) {
      EXPECT_EQ(m.commit(), 2u) << Str(m);
      // 2 resumes after its match, 3 still at its probe.
      EXPECT_EQ(m.index(), m.to() == 2 ? 2u : 3u) << Str(m);
    }
    EXPECT_EQ(p->next, 5u);  // optimistic in replicate
  }
}

// The follower's rejection hint lets the leader skip whole terms instead of probing entry by
// entry: a leader and a follower with diverging logs find their last common entry in a few
// round trips.
TEST(Raft, FastLogRejection) {
  struct Case {
    std::vector<uint64_t> leader_terms;  // entry i+1 has term leader_terms[i]
    std::vector<uint64_t> follower_terms;
    uint64_t want_match;
    int max_probes;
  };
  std::vector<Case> cases = {
      // The follower has a long tail of a term the leader does not know.
      {{1, 2, 2, 4, 4, 4, 4}, {1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}, 3, 3},
      // The leader has a long tail of a term the follower does not know.
      {{1, 2, 2, 5, 5, 5, 5, 5, 5, 5, 5}, {1, 2, 2, 4, 4, 4, 4}, 3, 3},
      // Terms interleave.
      {{1, 1, 1, 1, 4, 4, 4, 4, 7, 7, 7, 7}, {1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 6, 6}, 4, 4},
      // The follower is merely behind.
      {{1, 1, 2, 2, 2, 2}, {1, 1}, 2, 2},
      // Nothing in common but the start.
      {{2, 2, 2, 2}, {1, 1, 1, 1, 1, 1}, 0, 3},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::vector<Entry> le, fe;
    for (size_t j = 0; j < c.leader_terms.size(); ++j) le.push_back(E(j + 1, c.leader_terms[j]));
    for (size_t j = 0; j < c.follower_terms.size(); ++j) {
      fe.push_back(E(j + 1, c.follower_terms[j]));
    }
    uint64_t term = 10;
    auto leader = NewRaftWithLog(1, {1, 2, 3}, le, HS(term, 0, 0));
    auto follower = NewRaftWithLog(2, {1, 2, 3}, fe, HS(term, 0, 0));
    leader->BecomeCandidate();
    leader->BecomeLeader();
    follower->BecomeFollower(leader->term(), 1);
    ReadMsgs(*leader);
    // Probe (from the leader's last index) and answer until the follower accepts.
    ASSERT_TRUE(leader->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP, .from = 2, .to = 1})).ok());
    int probes = 0;
    bool accepted = false;
    while (!accepted && probes < 20) {
      auto out = ReadMsgs(*leader, raftpb::MSG_APP);
      ASSERT_EQ(out.size(), 1u) << "case " << i;
      ++probes;
      ASSERT_TRUE(follower->Step(out[0]).ok());
      auto resp = ReadMsgs(*follower);
      ASSERT_EQ(resp.size(), 1u);
      accepted = !resp[0].reject();
      if (accepted) {
        EXPECT_EQ(resp[0].index(), le.size() + 1) << "case " << i;
        EXPECT_EQ(out[0].index(), c.want_match) << "case " << i << ": " << Str(out[0]);
      }
      ASSERT_TRUE(leader->Step(resp[0]).ok());
    }
    EXPECT_TRUE(accepted) << "case " << i;
    EXPECT_LE(probes, c.max_probes) << "case " << i;
    EXPECT_TRUE(EntriesEq(AllEntries(follower->log()), AllEntries(leader->log()))) << "case " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// Flow control

TEST(Raft, ProgressLeader) {
  auto r = NewRaft(1, {1, 2});
  r->BecomeCandidate();
  r->BecomeLeader();
  r->tracker().Get(2)->BecomeReplicate();
  for (int i = 0; i < 5; ++i) {
    const Progress* self = r->tracker().Get(1);
    EXPECT_EQ(self->state, ProgressState::kReplicate);
    EXPECT_EQ(self->match, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(self->next, static_cast<uint64_t>(i + 2));
    ASSERT_TRUE(r->Step(Prop(1, "foo")).ok());
  }
}

// A probing follower gets one MsgApp until it answers, whatever is proposed meanwhile.
TEST(Raft, ProgressPaused) {
  auto r = NewRaft(1, {1, 2});
  r->BecomeCandidate();
  r->BecomeLeader();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r->Step(Prop(1)).ok());
  EXPECT_EQ(ReadMsgs(*r).size(), 1u);
}

TEST(Raft, ProgressResumeByHeartbeatResp) {
  auto r = NewRaft(1, {1, 2});
  r->BecomeCandidate();
  r->BecomeLeader();
  r->tracker().Get(2)->probe_sent = true;
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_BEAT, .from = 1, .to = 1})).ok());
  EXPECT_TRUE(r->tracker().Get(2)->probe_sent);
  r->tracker().Get(2)->BecomeReplicate();
  r->tracker().Get(2)->BecomeProbe();
  r->tracker().Get(2)->probe_sent = true;
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP, .from = 2, .to = 1})).ok());
  // Unpaused, and a new probe went out at once.
  EXPECT_EQ(ReadMsgs(*r, raftpb::MSG_APP).size(), 1u);
}

// Replicate state: MsgApps are pipelined until the window is full, sizes capped per message.
TEST(Raft, ProgressFlowControl) {
  const uint64_t entry_size = E(0, 0, std::string(1000, 'a')).ByteSizeLong();
  auto r = NewRaft(1, {1, 2}, {.max_inflight = 3, .max_size_per_msg = 2048});
  r->BecomeCandidate();
  r->BecomeLeader();
  ReadMsgs(*r);
  // Throw away the empty entry's probe; 2 is probing.
  r->tracker().Get(2)->BecomeProbe();
  std::string blob(1000, 'a');
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(r->Step(Prop(1, blob)).ok());
  auto msgs = ReadMsgs(*r);
  // Probe: one message, with as many entries as fit in 2048 bytes.
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_APP);
  EXPECT_EQ(msgs[0].entries_size(), 2) << "entry size " << entry_size;  // empty + one blob
  // Acknowledged: replicate, up to three messages in flight of at most two entries each.
  ASSERT_TRUE(r->Step(AppResp(2, 1, r->term(), msgs[0].entries(1).index())).ok());
  msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 3u) << Str(msgs);
  for (const auto& m : msgs) EXPECT_EQ(m.entries_size(), 2);
  // Ack all three: the remaining entries go out.
  ASSERT_TRUE(r->Step(AppResp(2, 1, r->term(), msgs[2].entries(1).index())).ok());
  msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 2u) << Str(msgs);
  EXPECT_EQ(msgs[0].entries_size(), 2);
  EXPECT_EQ(msgs[1].entries_size(), 1);
}

// The window fills with max_inflight messages; then nothing more is sent.
TEST(Raft, MsgAppFlowControlFull) {
  auto r = NewRaft(1, {1, 2}, {.election = 5, .max_inflight = 8});
  r->BecomeCandidate();
  r->BecomeLeader();
  Progress* pr2 = r->tracker().Get(2);
  pr2->BecomeReplicate();
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(r->Step(Prop(1)).ok());
    EXPECT_EQ(ReadMsgs(*r).size(), 1u) << i;
  }
  EXPECT_TRUE(pr2->inflights.Full());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(r->Step(Prop(1)).ok());
    EXPECT_TRUE(ReadMsgs(*r).empty()) << i;
  }
}

// Acknowledgements free the window up to the acknowledged index, and only those.
TEST(Raft, MsgAppFlowControlMoveForward) {
  const int max = 8;
  auto r = NewRaft(1, {1, 2}, {.election = 5, .max_inflight = max});
  r->BecomeCandidate();
  r->BecomeLeader();
  Progress* pr2 = r->tracker().Get(2);
  pr2->BecomeReplicate();
  for (int i = 0; i < max; ++i) {
    ASSERT_TRUE(r->Step(Prop(1)).ok());
    ReadMsgs(*r);
  }
  // Entry 1 is the empty entry, sent in the first message with entry 2; entries 2..max+1 went
  // out one per message.
  for (uint64_t tt = 2; tt < static_cast<uint64_t>(max); ++tt) {
    ASSERT_TRUE(r->Step(AppResp(2, 1, r->term(), tt)).ok());
    ReadMsgs(*r);
    ASSERT_TRUE(r->Step(Prop(1)).ok());
    EXPECT_EQ(ReadMsgs(*r).size(), 1u) << tt;
    EXPECT_TRUE(pr2->inflights.Full()) << tt;
    // Stale acks free nothing.
    for (uint64_t i = 0; i < tt; ++i) {
      ASSERT_TRUE(r->Step(AppResp(2, 1, r->term(), i)).ok());
      EXPECT_TRUE(pr2->inflights.Full()) << tt << "/" << i;
    }
  }
}

// A heartbeat response frees one slot of a full window (a MsgApp may have been lost).
TEST(Raft, MsgAppFlowControlRecvHeartbeat) {
  auto r = NewRaft(1, {1, 2}, {.election = 5, .max_inflight = 8});
  r->BecomeCandidate();
  r->BecomeLeader();
  Progress* pr2 = r->tracker().Get(2);
  pr2->BecomeReplicate();
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(r->Step(Prop(1)).ok());
    ReadMsgs(*r);
  }
  for (int tt = 1; tt < 5; ++tt) {
    EXPECT_TRUE(pr2->inflights.Full()) << tt;
    for (int i = 0; i < tt; ++i) {
      ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP, .from = 2, .to = 1})).ok());
      ReadMsgs(*r);
      EXPECT_FALSE(pr2->inflights.Full()) << tt << "/" << i;
    }
    ASSERT_TRUE(r->Step(Prop(1)).ok());
    EXPECT_EQ(ReadMsgs(*r).size(), 1u) << tt;
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(r->Step(Prop(1)).ok());
      EXPECT_TRUE(ReadMsgs(*r).empty()) << tt << "/" << i;
    }
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP, .from = 2, .to = 1})).ok());
    ReadMsgs(*r);
  }
}

// next moves optimistically in replicate state, not in probe state.
TEST(Raft, LeaderIncreaseNext) {
  auto previous = Terms(1, {1, 2, 3});
  for (ProgressState st : {ProgressState::kReplicate, ProgressState::kProbe}) {
    auto r = NewRaftWithLog(1, {1, 2}, previous, HS(3, 0, 0));
    r->BecomeCandidate();
    r->BecomeLeader();
    Progress* p = r->tracker().Get(2);
    if (st == ProgressState::kReplicate) {
      p->BecomeReplicate();
    } else {
      p->BecomeProbe();
    }
    p->next = 2;
    ASSERT_TRUE(r->Step(Prop(1, "somedata")).ok());
    // previous + empty entry + proposal
    EXPECT_EQ(p->next, st == ProgressState::kReplicate ? previous.size() + 3 : 2u)
        << ProgressStateName(st);
  }
}

TEST(Raft, SendAppendForProgressProbe) {
  auto r = NewRaft(1, {1, 2});
  r->BecomeCandidate();
  r->BecomeLeader();
  ReadMsgs(*r);
  r->tracker().Get(2)->BecomeProbe();
  // Each round: proposals send one probe at most; a heartbeat (tick) does not resend it until
  // its response arrives.
  for (int i = 0; i < 3; ++i) {
    if (i == 0) {
      // We expect that raft will only send out one MsgApp on the first loop; after that, the
      // follower is paused until a heartbeat response is received.
      ASSERT_TRUE(r->Step(Prop(1)).ok());
      auto msgs = ReadMsgs(*r);
      ASSERT_EQ(msgs.size(), 1u);
      EXPECT_EQ(msgs[0].index(), 0u);
    }
    EXPECT_TRUE(r->tracker().Get(2)->probe_sent);
    for (int j = 0; j < 10; ++j) ASSERT_TRUE(r->Step(Prop(1)).ok());
    EXPECT_TRUE(ReadMsgs(*r).empty());
    // Heartbeat ticks send heartbeats only.
    for (int j = 0; j < 1; ++j) r->Tick();
    auto msgs = ReadMsgs(*r);
    ASSERT_EQ(msgs.size(), 1u);
    EXPECT_EQ(msgs[0].type(), raftpb::MSG_HEARTBEAT);
  }
  // The heartbeat response unpauses it and the probe is resent.
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP, .from = 2, .to = 1})).ok());
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_APP);
  EXPECT_EQ(msgs[0].index(), 0u);
  EXPECT_TRUE(r->tracker().Get(2)->probe_sent);
}

TEST(Raft, SendAppendForProgressReplicate) {
  auto r = NewRaft(1, {1, 2});
  r->BecomeCandidate();
  r->BecomeLeader();
  ReadMsgs(*r);
  r->tracker().Get(2)->BecomeReplicate();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(r->Step(Prop(1)).ok());
    EXPECT_EQ(ReadMsgs(*r).size(), 1u) << i;
  }
}

TEST(Raft, SendAppendForProgressSnapshot) {
  auto r = NewRaft(1, {1, 2});
  r->BecomeCandidate();
  r->BecomeLeader();
  ReadMsgs(*r);
  r->tracker().Get(2)->BecomeSnapshot(10);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(r->Step(Prop(1)).ok());
    EXPECT_TRUE(ReadMsgs(*r).empty()) << i;
  }
}

TEST(Raft, RecvMsgUnreachable) {
  auto r = NewRaftWithLog(1, {1, 2}, Terms(1, {1, 1, 2}), HS(2, 0, 0));
  r->BecomeCandidate();
  r->BecomeLeader();
  ReadMsgs(*r);
  Progress* p = r->tracker().Get(2);
  p->match = 3;
  p->BecomeReplicate();
  p->next = 6;  // optimistically ahead
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_UNREACHABLE, .from = 2, .to = 1})).ok());
  EXPECT_EQ(p->state, ProgressState::kProbe);
  EXPECT_EQ(p->next, p->match + 1);
}

// Heartbeats carry min(match, commit) so a follower never commits what it may not have.
TEST(Raft, BcastBeat) {
  const uint64_t offset = 1000;
  auto s = std::make_unique<TestStorage>();
  ASSERT_TRUE(s->ApplySnapshot(Snap(offset, 1, {1, 2, 3})).ok());
  s->SetHardState(HS(1, 0, offset));
  auto r = NewRaft(1, std::move(s));
  r->BecomeCandidate();
  r->BecomeLeader();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(r->Step(Prop(1)).ok());
  ReadMsgs(*r);
  r->tracker().Get(2)->match = 5;
  r->tracker().Get(2)->next = 6;
  r->tracker().Get(3)->match = r->log().LastIndex();
  r->tracker().Get(3)->next = r->log().LastIndex() + 1;
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_BEAT, .from = 1, .to = 1})).ok());
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 2u);
  std::map<uint64_t, uint64_t> commits;
  for (const auto& m : msgs) {
    EXPECT_EQ(m.type(), raftpb::MSG_HEARTBEAT);
    EXPECT_EQ(m.index(), 0u);
    EXPECT_EQ(m.log_term(), 0u);
    EXPECT_EQ(m.entries_size(), 0);
    commits[m.to()] = m.commit();
  }
  EXPECT_EQ(commits[2], 5u);
  EXPECT_EQ(commits[3], offset);
}

// Only a leader answers MsgBeat.
TEST(Raft, RecvMsgBeat) {
  for (StateType st : {StateType::kLeader, StateType::kCandidate, StateType::kFollower}) {
    auto r = NewRaftWithLog(1, {1, 2, 3}, Terms(1, {0, 1}), HS(1, 0, 0));
    if (st != StateType::kFollower) r->BecomeCandidate();
    if (st == StateType::kLeader) r->BecomeLeader();
    ReadMsgs(*r);
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_BEAT, .from = 1, .to = 1})).ok());
    auto msgs = ReadMsgs(*r);
    EXPECT_EQ(msgs.size(), st == StateType::kLeader ? 2u : 0u) << StateName(st);
    for (const auto& m : msgs) EXPECT_EQ(m.type(), raftpb::MSG_HEARTBEAT);
  }
}

// A follower that already has everything, put back in probe state (say, after an unreachable
// report), returns to replicate on the next acknowledged probe, even when the ack does not move
// its match (etcd's heartbeat_resp_recovers_from_probing).
TEST(Raft, HeartbeatRespRecoversFromProbing) {
  Network nt = Network::Of(3);
  nt.Send(Hup(1));
  ASSERT_EQ(nt[1].tracker().Get(2)->state, ProgressState::kReplicate);
  ASSERT_TRUE(nt[1].Step(Msg({.type = raftpb::MSG_UNREACHABLE, .from = 2, .to = 1})).ok());
  ASSERT_EQ(nt[1].tracker().Get(2)->state, ProgressState::kProbe);
  nt.Send(Msg({.type = raftpb::MSG_BEAT, .from = 1, .to = 1}));
  EXPECT_EQ(nt[1].tracker().Get(2)->state, ProgressState::kReplicate);
  // Replicate again: several proposals are pipelined without waiting.
  nt.Drop(2, 1);
  for (int i = 0; i < 3; ++i) nt.Send(Prop(1));
  EXPECT_EQ(nt[2].log().LastIndex(), 4u);
}

// ---------------------------------------------------------------------------------------------
// Pre-vote and check-quorum

// A pre-candidate does not bump its term however often it times out, so a partitioned member
// does not come back with a term that would depose the leader.
TEST(Raft, PreVoteDoesNotBumpTerm) {
  Network nt = Network::Of(3, {.pre_vote = true});
  nt.Send(Hup(1));
  nt.Isolate(3);
  for (int round = 0; round < 5; ++round) TickElection(nt[3]);
  ReadMsgs(nt[3]);  // its pre-votes are lost
  EXPECT_EQ(nt[3].state(), StateType::kPreCandidate);
  EXPECT_EQ(nt[3].term(), 1u);
  nt.Recover();
  nt.Send(Msg({.type = raftpb::MSG_BEAT, .from = 1, .to = 1}));
  EXPECT_EQ(nt[1].state(), StateType::kLeader);
  EXPECT_EQ(nt[1].term(), 1u);
  EXPECT_EQ(nt[3].state(), StateType::kFollower);
  EXPECT_EQ(nt[3].lead(), 1u);
}

// Without pre-vote, a partitioned member comes back with a higher term and (with check-quorum:
// through the leader's next heartbeat) makes the leader step down. With pre-vote it cannot.
TEST(Raft, DisruptiveFollower) {
  for (bool pre_vote : {false, true}) {
    Network nt = Network::Of(3, {.pre_vote = pre_vote, .check_quorum = true});
    nt.Send(Hup(1));
    ASSERT_EQ(nt[1].state(), StateType::kLeader);
    // 3 does not hear heartbeats and campaigns.
    nt.Isolate(3);
    TickElection(nt[3]);
    auto campaign = ReadMsgs(nt[3]);
    ASSERT_EQ(campaign.size(), 2u);
    EXPECT_EQ(nt[3].state(), pre_vote ? StateType::kPreCandidate : StateType::kCandidate);
    nt.Recover();
    nt.Send(campaign);  // in-lease members ignore it
    EXPECT_EQ(nt[1].state(), StateType::kLeader) << pre_vote;
    EXPECT_EQ(nt[1].term(), 1u);
    // The leader's next heartbeat reaches 3.
    nt.Send(Msg({.type = raftpb::MSG_BEAT, .from = 1, .to = 1}));
    if (pre_vote) {
      EXPECT_EQ(nt[1].state(), StateType::kLeader);
      EXPECT_EQ(nt[1].term(), 1u);
      EXPECT_EQ(nt[3].state(), StateType::kFollower);
      EXPECT_EQ(nt[3].term(), 1u);
      EXPECT_EQ(nt[3].lead(), 1u);
    } else {
      // 3 answers the stale heartbeat with its higher term: the leader steps down.
      EXPECT_EQ(nt[1].state(), StateType::kFollower);
      EXPECT_EQ(nt[1].term(), 2u);
      EXPECT_EQ(nt[3].state(), StateType::kCandidate);
    }
  }
}

// Pre-vote runs without touching anybody's term; a pre-vote that fails for lack of an
// up-to-date log leaves the member a follower at its old term.
TEST(Raft, PreVoteWithStaleLogFails) {
  Network nt = Network::Of(3, {.pre_vote = true});
  nt.Send(Hup(1));
  nt.Isolate(3);
  nt.Send(Prop(1));
  nt.Send(Prop(1));
  nt.Recover();
  nt.Isolate(1);  // the leader goes away; 3's log is behind 2's
  nt.Send(Hup(3));
  // 2 refuses (3's log is behind), 1 is away: no majority either way, and no term moved.
  EXPECT_EQ(nt[3].state(), StateType::kPreCandidate);
  EXPECT_EQ(nt[3].term(), 1u);
  EXPECT_EQ(nt[2].term(), 1u);
  EXPECT_EQ(nt[2].state(), StateType::kFollower);
  nt.Send(Hup(2));  // 2 has the log: it wins (3 grants its pre-vote and vote)
  EXPECT_EQ(nt[2].state(), StateType::kLeader);
  EXPECT_EQ(nt[2].term(), 2u);
}

// A pre-vote split: after a pre-vote round both candidates run real elections which can split;
// a later pre-vote round resolves it.
TEST(Raft, PreVoteWithSplitVote) {
  Network nt = Network::Of(3, {.pre_vote = true});
  nt.Send(Hup(1));
  nt.Isolate(1);
  // 2 and 3 campaign at once, each voting for itself.
  nt.Ignore(raftpb::MSG_VOTE);  // let both pre-votes succeed first
  nt.Send({Hup(2), Hup(3)});
  EXPECT_EQ(nt[2].state(), StateType::kCandidate);
  EXPECT_EQ(nt[3].state(), StateType::kCandidate);
  EXPECT_EQ(nt[2].term(), 2u);
  EXPECT_EQ(nt[3].term(), 2u);
  nt.Recover();
  nt.Isolate(1);
  nt.Send(Hup(2));  // a new round resolves it
  EXPECT_EQ(nt[2].state(), StateType::kLeader);
  EXPECT_EQ(nt[3].state(), StateType::kFollower);
  EXPECT_EQ(nt[2].term(), 3u);
}

TEST(Raft, LeaderStepdownWhenQuorumActive) {
  auto r = NewRaft(1, {1, 2, 3}, {.election = 5, .check_quorum = true});
  r->BecomeCandidate();
  r->BecomeLeader();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(
        r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP, .from = 2, .to = 1, .term = r->term()}))
            .ok());
    r->Tick();
  }
  EXPECT_EQ(r->state(), StateType::kLeader);
}

TEST(Raft, LeaderStepdownWhenQuorumLost) {
  auto r = NewRaft(1, {1, 2, 3}, {.election = 5, .check_quorum = true});
  r->BecomeCandidate();
  r->BecomeLeader();
  for (int i = 0; i < 6; ++i) r->Tick();
  EXPECT_EQ(r->state(), StateType::kFollower);
  EXPECT_EQ(r->lead(), kNone);
  EXPECT_EQ(r->term(), 1u);
}

// Without check-quorum a lost leader stays leader forever.
TEST(Raft, LeaderStaysWithoutCheckQuorum) {
  auto r = NewRaft(1, {1, 2, 3}, {.election = 5, .check_quorum = false});
  r->BecomeCandidate();
  r->BecomeLeader();
  for (int i = 0; i < 50; ++i) r->Tick();
  EXPECT_EQ(r->state(), StateType::kLeader);
}

// Followers that recently heard from the leader ignore vote requests of a newer term; once their
// lease ran out they vote.
TEST(Raft, LeaderSupersedingWithCheckQuorum) {
  Network nt = Network::Of(3, {.check_quorum = true});
  nt.Send(Hup(1));
  ASSERT_EQ(nt[1].state(), StateType::kLeader);
  ASSERT_EQ(nt[3].state(), StateType::kFollower);
  nt.Send(Hup(3));
  // 2 heard from the leader recently: it ignores 3's request (so does the leader).
  EXPECT_EQ(nt[3].state(), StateType::kCandidate);
  EXPECT_EQ(nt[1].state(), StateType::kLeader);
  EXPECT_EQ(nt[2].vote(), 1u);
  // 2's lease runs out (an election timeout without news), short of its own campaign.
  nt[2].set_randomized_election_timeout(11);
  for (int i = 0; i < 10; ++i) nt[2].Tick();
  ASSERT_TRUE(ReadMsgs(nt[2]).empty());
  nt.Send(Hup(3));
  EXPECT_EQ(nt[3].state(), StateType::kLeader);
  EXPECT_EQ(nt[1].state(), StateType::kFollower);
  EXPECT_EQ(nt[1].lead(), 3u);
}

// With check-quorum, elections work from a cold start (nobody is in a lease), and after a
// leader lost its quorum and the others' leases ran out, another member can take over.
TEST(Raft, LeaderElectionWithCheckQuorum) {
  Network nt = Network::Of(3, {.check_quorum = true});
  nt.Send(Hup(1));
  EXPECT_EQ(nt[1].state(), StateType::kLeader);
  EXPECT_EQ(nt[3].state(), StateType::kFollower);
  nt[1].set_randomized_election_timeout(11);
  nt[2].set_randomized_election_timeout(12);
  // The followers' last answers count for the first check; nobody answers after that.
  for (int i = 0; i < 20; ++i) nt[1].Tick();
  for (int i = 0; i < 10; ++i) nt[2].Tick();  // its lease runs out, short of campaigning
  ReadMsgs(nt[1]);
  ASSERT_TRUE(ReadMsgs(nt[2]).empty());
  EXPECT_EQ(nt[1].state(), StateType::kFollower);
  nt.Send(Hup(3));
  EXPECT_EQ(nt[1].state(), StateType::kFollower);
  EXPECT_EQ(nt[3].state(), StateType::kLeader);
  EXPECT_EQ(nt[3].term(), 2u);
}

// A candidate stuck at a higher term (its requests ignored by in-lease members) is freed: the
// leader learns its term from the response to a heartbeat and steps down, so a new election can
// happen.
TEST(Raft, FreeStuckCandidateWithCheckQuorum) {
  Network nt = Network::Of(3, {.check_quorum = true});
  nt.Send(Hup(1));
  nt.Isolate(1);
  nt.Send(Hup(3));  // 2 is in lease: ignores it
  EXPECT_EQ(nt[3].state(), StateType::kCandidate);
  EXPECT_EQ(nt[3].term(), 2u);
  nt.Send(Hup(3));
  EXPECT_EQ(nt[3].term(), 3u);
  nt.Recover();
  nt.Send(Msg({.type = raftpb::MSG_HEARTBEAT, .from = 1, .to = 3, .term = nt[1].term()}));
  // 3 answered the stale heartbeat with its term: the leader steps down.
  EXPECT_EQ(nt[1].state(), StateType::kFollower);
  EXPECT_EQ(nt[1].term(), nt[3].term());
  nt.Send(Hup(1));
  EXPECT_EQ(nt[1].state(), StateType::kLeader);
}

// A member that is not promotable (not in its own configuration) never campaigns, but still
// follows heartbeats.
TEST(Raft, NonPromotableVoterWithCheckQuorum) {
  std::vector<TestRaft> slots;
  slots.push_back(NewRaft(1, {1, 2}, {.check_quorum = true}));
  slots.push_back(NewRaft(2, {1}, {.check_quorum = true}));
  Network nt(std::move(slots));
  nt[2].BecomeFollower(1, kNone);
  EXPECT_FALSE(nt[2].promotable());
  for (int i = 0; i < 20; ++i) nt[1].Tick();
  nt.Send(ReadMsgs(nt[1]));
  EXPECT_EQ(nt[1].state(), StateType::kLeader);
  EXPECT_EQ(nt[2].state(), StateType::kFollower);
  EXPECT_EQ(nt[2].lead(), 1u);
  for (int i = 0; i < 50; ++i) nt[2].Tick();
  EXPECT_EQ(nt[2].state(), StateType::kFollower);
  EXPECT_TRUE(ReadMsgs(nt[2]).empty());
}

// A stale leader's heartbeat is answered (with check-quorum or pre-vote) so it learns the term.
TEST(Raft, StaleHeartbeatAnsweredWithCurrentTerm) {
  for (bool cq : {false, true}) {
    auto r = NewRaft(1, {1, 2, 3}, {.check_quorum = cq});
    r->BecomeFollower(5, 2);
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT, .from = 3, .to = 1, .term = 4})).ok());
    auto msgs = ReadMsgs(*r);
    if (!cq) {
      EXPECT_TRUE(msgs.empty());
      continue;
    }
    ASSERT_EQ(msgs.size(), 1u);
    EXPECT_EQ(msgs[0].type(), raftpb::MSG_APP_RESP);
    EXPECT_EQ(msgs[0].to(), 3u);
    EXPECT_EQ(msgs[0].term(), 5u);
  }
}

// ---------------------------------------------------------------------------------------------
// Limits and robustness

// The leader bounds the size of uncommitted proposals; once entries are committed and handed to
// the application the budget is available again.
TEST(Raft, UncommittedEntryLimit) {
  const std::string data(100, 'x');
  const uint64_t max_entries = 16;
  auto r = NewRaft(1, {1, 2, 3}, {.max_inflight = 256, .max_uncommitted = max_entries * 100});
  r->BecomeCandidate();
  r->BecomeLeader();
  ReadMsgs(*r);
  for (uint64_t i = 0; i < max_entries; ++i) {
    ASSERT_TRUE(r->Step(Prop(1, data)).ok()) << i;
  }
  EXPECT_EQ(r->Step(Prop(1, data)).code(), ErrProposalDropped().code());
  // An empty proposal does not count against the limit.
  ASSERT_TRUE(
      r->Step(Msg({.type = raftpb::MSG_PROP, .from = 1, .to = 1, .entries = {E(0, 0)}})).ok());
  // Commit everything and hand it to the application: the budget is free again.
  ReadMsgs(*r);
  for (uint64_t id : {2, 3}) {
    ASSERT_TRUE(r->Step(AppResp(id, 1, r->term(), r->log().LastIndex())).ok());
  }
  ASSERT_EQ(r->log().committed(), r->log().LastIndex());
  auto committed = r->log().NextCommittedEntries();
  r->log().AppliedTo(committed.back().index());
  r->ReduceUncommittedSize(committed);
  for (uint64_t i = 0; i < max_entries; ++i) {
    ASSERT_TRUE(r->Step(Prop(1, data)).ok()) << i;
  }
  EXPECT_FALSE(r->Step(Prop(1, data)).ok());
  // A single large entry is accepted when nothing is uncommitted.
  auto r2 = NewRaft(1, {1, 2, 3}, {.max_uncommitted = 10});
  r2->BecomeCandidate();
  r2->BecomeLeader();
  EXPECT_TRUE(r2->Step(Prop(1, data)).ok());
  EXPECT_FALSE(r2->Step(Prop(1, data)).ok());
}

// A malformed proposal from a peer (no entries) is refused, not a crash.
TEST(Raft, EmptyProposalFromPeerIsRefused) {
  auto r = NewRaft(1, {1, 2, 3});
  r->BecomeCandidate();
  r->BecomeLeader();
  EXPECT_FALSE(r->Step(Msg({.type = raftpb::MSG_PROP, .from = 2, .to = 1})).ok());
  EXPECT_EQ(r->state(), StateType::kLeader);
}

// Other malformed peer messages are refused and change nothing: vote messages without a term
// (they would be taken for local ones, and the answer could not carry a term), AppendEntries
// whose entries do not directly follow its index (the log code would read out of bounds).
TEST(Raft, MalformedMessagesAreRefused) {
  auto r = NewRaftWithLog(1, {1, 2, 3}, Terms(1, {1, 1}), HS(1, 0, 1));
  r->BecomeFollower(1, 2);
  for (MessageType t :
       {raftpb::MSG_VOTE, raftpb::MSG_PRE_VOTE, raftpb::MSG_VOTE_RESP, raftpb::MSG_PRE_VOTE_RESP}) {
    EXPECT_EQ(r->Step(Msg({.type = t, .from = 3, .to = 1, .log_term = 5, .index = 9})).code(),
              Code::kInvalidArgument)
        << MessageTypeName(t);
  }
  EXPECT_EQ(r->vote(), kNone);
  std::vector<std::vector<Entry>> bad = {
      {E(5, 1)}, {E(3, 1), E(5, 1)}, {E(2, 1)}, {E(3, 1), E(3, 1)}};
  for (const auto& ents : bad) {
    Status st = r->Step(Msg({.type = raftpb::MSG_APP,
                             .from = 2,
                             .to = 1,
                             .term = 1,
                             .log_term = 1,
                             .index = 2,
                             .commit = 2,
                             .entries = ents}));
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << Str(ents);
  }
  EXPECT_TRUE(r->msgs.empty());
  EXPECT_TRUE(EntriesEq(AllEntries(r->log()), Terms(1, {1, 1})));
  EXPECT_EQ(r->log().committed(), 1u);
  EXPECT_EQ(r->term(), 1u);
}

// Messages forwarded to the leader carry no term of their own; a follower forwarding a message
// that arrived with a term (say, a transfer request forwarded twice) does not trip over it.
TEST(Raft, ForwardedMessagesDoNotCarryStaleTerms) {
  auto r = NewRaft(1, {1, 2, 3});
  r->BecomeFollower(2, 2);
  ASSERT_TRUE(
      r->Step(Msg({.type = raftpb::MSG_TRANSFER_LEADER, .from = 3, .to = 1, .term = 2})).ok());
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_TRANSFER_LEADER);
  EXPECT_EQ(msgs[0].to(), 2u);
  EXPECT_EQ(msgs[0].from(), 3u);
  EXPECT_EQ(msgs[0].term(), 2u);
  ASSERT_TRUE(
      r
          ->Step(Msg(
              {.type = raftpb::MSG_PROP, .from = 3, .to = 1, .term = 2, .entries = {E(0, 0, "x")}}))
          .ok());
  msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].to(), 2u);
  EXPECT_EQ(msgs[0].term(), 0u);
}

TEST(Raft, ConfigValidation) {
  MemoryStorage s;
  Config c;
  c.storage = &s;
  c.id = 0;
  EXPECT_FALSE(c.Validate().ok());
  c.id = 1;
  EXPECT_TRUE(c.Validate().ok());
  c.heartbeat_tick = 0;
  EXPECT_FALSE(c.Validate().ok());
  c.heartbeat_tick = 10;
  EXPECT_FALSE(c.Validate().ok());  // election must exceed heartbeat
  c.heartbeat_tick = 1;
  c.max_inflight_msgs = 0;
  EXPECT_FALSE(c.Validate().ok());
  c.max_inflight_msgs = 1;
  c.storage = nullptr;
  EXPECT_FALSE(c.Validate().ok());
}

// Restarting from a hard state whose commit index is beyond the log is a broken invariant.
TEST(Raft, RestartWithCommitBeyondLogIsFatal) {
  auto s = std::make_unique<TestStorage>(std::vector<uint64_t>{1, 2, 3});
  ASSERT_TRUE(s->Append(Terms(1, {1, 1})).ok());
  s->SetHardState(HS(1, 0, 5));
  EXPECT_THROW(Raft r(MakeConfig(1, s.get(), {})), std::logic_error);
}

}  // namespace
}  // namespace etcdw::raft
