// The Raft paper ("In Search of an Understandable Consensus Algorithm", extended version), claim
// by claim: each test names the section it checks and is built as init / step / check the
// messages sent and the state reached. Pre-vote and check-quorum are off unless a test says
// otherwise, as in the paper.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "raft/raft_test_util.h"

namespace etcdw::raft {
namespace {

using namespace rafttest;  // NOLINT(google-build-using-namespace)

std::vector<Message> Sorted(std::vector<Message> ms) {
  std::stable_sort(ms.begin(), ms.end(),
                   [](const Message& a, const Message& b) { return a.to() < b.to(); });
  return ms;
}

// §5.1: if one server's current term is smaller than the other's, it updates its current term
// to the larger value; a candidate or leader that discovers its term is out of date reverts to
// follower.
class UpdateTermFromMessage : public ::testing::TestWithParam<StateType> {};

TEST_P(UpdateTermFromMessage, AdoptsLargerTermAndBecomesFollower) {
  auto r = NewRaft(1, {1, 2, 3});
  switch (GetParam()) {
    case StateType::kFollower:
      r->BecomeFollower(1, 2);
      break;
    case StateType::kCandidate:
      r->BecomeCandidate();
      break;
    case StateType::kLeader:
      r->BecomeCandidate();
      r->BecomeLeader();
      break;
    default:
      FAIL();
  }
  ASSERT_EQ(r->term(), 1u);
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP, .from = 3, .to = 1, .term = 2})).ok());
  EXPECT_EQ(r->term(), 2u);
  EXPECT_EQ(r->state(), StateType::kFollower);
  EXPECT_EQ(r->lead(), 3u);  // an AppendEntries at a newer term names the leader
  EXPECT_EQ(r->vote(), kNone);
}

INSTANTIATE_TEST_SUITE_P(Paper, UpdateTermFromMessage,
                         ::testing::Values(StateType::kFollower, StateType::kCandidate,
                                           StateType::kLeader));

// §5.1: a request with a stale term is rejected (here: ignored, nothing changes and nothing is
// sent, as in etcd's raft without check-quorum / pre-vote).
TEST(Paper, RejectStaleTermMessage) {
  auto r = NewRaftWithLog(1, {1, 2, 3}, Terms(1, {1, 2}), HS(2, 0, 0));
  ASSERT_EQ(r->term(), 2u);
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP,
                           .from = 2,
                           .to = 1,
                           .term = 1,
                           .log_term = 1,
                           .index = 1,
                           .commit = 2,
                           .entries = {E(2, 1)}}))
                  .ok());
  EXPECT_TRUE(r->msgs.empty()) << Str(r->msgs);
  EXPECT_TRUE(EntriesEq(AllEntries(r->log()), Terms(1, {1, 2})));
  EXPECT_EQ(r->log().committed(), 0u);
  EXPECT_EQ(r->lead(), kNone);

  ASSERT_TRUE(
      r->Step(Msg({.type = raftpb::MSG_VOTE, .from = 3, .to = 1, .term = 1, .log_term = 9})).ok());
  EXPECT_TRUE(r->msgs.empty()) << Str(r->msgs);
  EXPECT_EQ(r->vote(), kNone);
  EXPECT_EQ(r->term(), 2u);
}

// §5.2: when servers start up, they begin as followers.
TEST(Paper, StartAsFollower) {
  auto r = NewRaft(1, {1, 2, 3});
  EXPECT_EQ(r->state(), StateType::kFollower);
  EXPECT_EQ(r->term(), 0u);
  EXPECT_EQ(r->lead(), kNone);
}

// §5.2: a leader sends periodic heartbeats (AppendEntries with no entries) to all followers.
TEST(Paper, LeaderBcastBeat) {
  const int heartbeat = 1;
  auto r = NewRaft(1, {1, 2, 3}, {.election = 10, .heartbeat = heartbeat});
  r->BecomeCandidate();
  r->BecomeLeader();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(r->Step(Prop(1)).ok());
  ReadMsgs(*r);
  for (int i = 0; i < heartbeat; ++i) r->Tick();
  auto msgs = Sorted(ReadMsgs(*r));
  ASSERT_EQ(msgs.size(), 2u) << Str(msgs);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(msgs[i].type(), raftpb::MSG_HEARTBEAT);
    EXPECT_EQ(msgs[i].from(), 1u);
    EXPECT_EQ(msgs[i].to(), i + 2);
    EXPECT_EQ(msgs[i].term(), 1u);
    EXPECT_EQ(msgs[i].index(), 0u);
    EXPECT_EQ(msgs[i].log_term(), 0u);
    EXPECT_EQ(msgs[i].commit(), 0u);  // never beyond what the follower is known to have
    EXPECT_EQ(msgs[i].entries_size(), 0);
  }
}

// §5.2: a follower that hears nothing over an election timeout starts an election: increments
// its term, becomes candidate, votes for itself and sends RequestVote to every other server in
// parallel. A candidate that neither wins nor loses starts a new election the same way.
class NonleaderStartElection : public ::testing::TestWithParam<StateType> {};

TEST_P(NonleaderStartElection, TimeoutStartsElection) {
  const int et = 10;
  auto r = NewRaft(1, {1, 2, 3}, {.election = et});
  if (GetParam() == StateType::kFollower) {
    r->BecomeFollower(1, 2);
  } else {
    r->BecomeCandidate();
  }
  ASSERT_EQ(r->term(), 1u);
  for (int i = 1; i < 2 * et; ++i) r->Tick();
  EXPECT_EQ(r->term(), 2u);
  EXPECT_EQ(r->state(), StateType::kCandidate);
  EXPECT_EQ(r->vote(), 1u);
  auto msgs = Sorted(ReadMsgs(*r));
  ASSERT_EQ(msgs.size(), 2u) << Str(msgs);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(msgs[i].type(), raftpb::MSG_VOTE);
    EXPECT_EQ(msgs[i].to(), i + 2);
    EXPECT_EQ(msgs[i].term(), 2u);
  }
}

INSTANTIATE_TEST_SUITE_P(Paper, NonleaderStartElection,
                         ::testing::Values(StateType::kFollower, StateType::kCandidate));

// §5.2: one round of RequestVote ends in one of three ways: the candidate wins (a majority of
// votes), loses (a majority of rejections) or neither.
TEST(Paper, LeaderElectionInOneRoundRPC) {
  struct Case {
    size_t size;
    std::map<uint64_t, bool> votes;
    StateType want;
  };
  std::vector<Case> cases = {
      // win the election when receiving votes from a majority of the servers
      {1, {}, StateType::kLeader},
      {3, {{2, true}, {3, true}}, StateType::kLeader},
      {3, {{2, true}}, StateType::kLeader},
      {5, {{2, true}, {3, true}, {4, true}, {5, true}}, StateType::kLeader},
      {5, {{2, true}, {3, true}, {4, true}}, StateType::kLeader},
      {5, {{2, true}, {3, true}}, StateType::kLeader},
      // lose when a majority rejects
      {3, {{2, false}, {3, false}}, StateType::kFollower},
      {5, {{2, false}, {3, false}, {4, false}, {5, false}}, StateType::kFollower},
      {5, {{2, true}, {3, false}, {4, false}, {5, false}}, StateType::kFollower},
      // stay candidate without a quorum either way
      {3, {}, StateType::kCandidate},
      {5, {{2, true}}, StateType::kCandidate},
      {5, {{2, false}, {3, false}}, StateType::kCandidate},
      {5, {}, StateType::kCandidate},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::vector<uint64_t> ids;
    for (uint64_t id = 1; id <= c.size; ++id) ids.push_back(id);
    auto r = NewRaft(1, ids);
    ASSERT_TRUE(r->Step(Hup(1)).ok());
    for (const auto& [id, granted] : c.votes) {
      ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_VOTE_RESP,
                               .from = id,
                               .to = 1,
                               .term = r->term(),
                               .reject = !granted}))
                      .ok());
    }
    EXPECT_EQ(r->state(), c.want) << "case " << i;
    EXPECT_EQ(r->term(), 1u) << "case " << i;
  }
}

// §5.2: each follower votes for at most one candidate in a given term, first come first served.
TEST(Paper, FollowerVote) {
  struct Case {
    uint64_t vote;
    uint64_t nvote;
    bool reject;
  };
  std::vector<Case> cases = {{kNone, 1, false}, {kNone, 2, false}, {1, 1, false},
                             {2, 2, false},     {1, 2, true},      {2, 1, true}};
  for (const auto& c : cases) {
    auto r = NewRaftWithLog(1, {1, 2, 3}, {}, HS(1, c.vote, 0));
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_VOTE, .from = c.nvote, .to = 1, .term = 1})).ok());
    auto msgs = ReadMsgs(*r);
    ASSERT_EQ(msgs.size(), 1u);
    EXPECT_EQ(msgs[0].type(), raftpb::MSG_VOTE_RESP);
    EXPECT_EQ(msgs[0].to(), c.nvote);
    EXPECT_EQ(msgs[0].term(), 1u);
    EXPECT_EQ(msgs[0].reject(), c.reject) << "vote=" << c.vote << " nvote=" << c.nvote;
    EXPECT_EQ(r->vote(), c.vote == kNone ? c.nvote : c.vote);
  }
  // The vote is durable: a second candidate in the same term is refused, also after a restart.
  auto s = std::make_unique<TestStorage>(std::vector<uint64_t>{1, 2, 3});
  TestStorage* sp = s.get();
  auto r = NewRaft(1, std::move(s));
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_VOTE, .from = 2, .to = 1, .term = 5})).ok());
  ASSERT_FALSE(ReadMsgs(*r).at(0).reject());
  sp->SetHardState(r->hard_state());
  Raft restarted(MakeConfig(1, sp, {}));
  ASSERT_TRUE(restarted.Step(Msg({.type = raftpb::MSG_VOTE, .from = 3, .to = 1, .term = 5})).ok());
  ASSERT_EQ(restarted.msgs.size(), 1u);
  EXPECT_TRUE(restarted.msgs[0].reject());
}

// §5.2: while waiting for votes, a candidate that receives AppendEntries from a leader whose term
// is at least its own recognizes that leader and returns to follower.
TEST(Paper, CandidateFallback) {
  for (uint64_t term : {1, 2}) {
    auto r = NewRaft(1, {1, 2, 3});
    ASSERT_TRUE(r->Step(Hup(1)).ok());
    ASSERT_EQ(r->state(), StateType::kCandidate);
    ASSERT_EQ(r->term(), 1u);
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP, .from = 2, .to = 1, .term = term})).ok());
    EXPECT_EQ(r->state(), StateType::kFollower);
    EXPECT_EQ(r->term(), term);
    EXPECT_EQ(r->lead(), 2u);
  }
}

// §5.2: election timeouts are chosen randomly from a fixed interval ([et, 2et) here): every
// value occurs, none outside.
class ElectionTimeoutRandomized : public ::testing::TestWithParam<StateType> {};

TEST_P(ElectionTimeoutRandomized, CoversTheInterval) {
  const int et = 10;
  auto r = NewRaft(1, {1, 2, 3}, {.election = et});
  std::set<int> seen;
  for (int round = 0; round < 50 * et; ++round) {
    if (GetParam() == StateType::kFollower) {
      r->BecomeFollower(r->term() + 1, 2);
    } else {
      r->BecomeCandidate();
    }
    int time = 0;
    while (ReadMsgs(*r).empty()) {
      r->Tick();
      ++time;
      ASSERT_LT(time, 10 * et);
    }
    seen.insert(time);
  }
  for (int t : seen) {
    EXPECT_GE(t, et);
    EXPECT_LT(t, 2 * et);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(et));
}

INSTANTIATE_TEST_SUITE_P(Paper, ElectionTimeoutRandomized,
                         ::testing::Values(StateType::kFollower, StateType::kCandidate));

// §5.2: randomized timeouts mean that in most cases a single server times out first, which
// makes split votes rare.
class ElectionTimeoutNonconflict : public ::testing::TestWithParam<StateType> {};

TEST_P(ElectionTimeoutNonconflict, MostlyOneServerTimesOutFirst) {
  const int et = 10;
  const int rounds = 1000;
  std::vector<TestRaft> rs;
  std::vector<uint64_t> ids = {1, 2, 3, 4, 5};
  for (uint64_t id : ids) rs.push_back(NewRaft(id, ids, {.election = et}));
  int conflicts = 0;
  for (int round = 0; round < rounds; ++round) {
    for (auto& r : rs) {
      if (GetParam() == StateType::kFollower) {
        r->BecomeFollower(r->term() + 1, kNone);
      } else {
        r->BecomeCandidate();
      }
    }
    int timed_out = 0;
    while (timed_out == 0) {
      for (auto& r : rs) {
        r->Tick();
        if (!ReadMsgs(*r).empty()) ++timed_out;
      }
    }
    if (timed_out > 1) ++conflicts;
  }
  // Two of five servers draw the same of ten values with probability well under 0.7; the bound
  // is loose so that the test is stable, and tight enough to catch identical generators.
  EXPECT_LE(static_cast<double>(conflicts) / rounds, 0.3) << conflicts << " conflicts";
}

INSTANTIATE_TEST_SUITE_P(Paper, ElectionTimeoutNonconflict,
                         ::testing::Values(StateType::kFollower, StateType::kCandidate));

// §5.3: a leader appends a client's command to its log, then sends AppendEntries in parallel to
// every other server, carrying the index and term of the entry that precedes the new ones; the
// new entry is handed to stable storage.
TEST(Paper, LeaderStartReplication) {
  auto r = NewRaft(1, {1, 2, 3});
  r->BecomeCandidate();
  r->BecomeLeader();
  CommitNoopEntry(*r, *r.storage);
  uint64_t li = r->log().LastIndex();
  ASSERT_TRUE(r->Step(Prop(1, "some data")).ok());
  EXPECT_EQ(r->log().LastIndex(), li + 1);
  EXPECT_EQ(r->log().committed(), li);
  auto msgs = Sorted(ReadMsgs(*r));
  ASSERT_EQ(msgs.size(), 2u) << Str(msgs);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(msgs[i].type(), raftpb::MSG_APP);
    EXPECT_EQ(msgs[i].to(), i + 2);
    EXPECT_EQ(msgs[i].term(), 1u);
    EXPECT_EQ(msgs[i].index(), li);
    EXPECT_EQ(msgs[i].log_term(), 1u);
    EXPECT_EQ(msgs[i].commit(), li);
    EXPECT_TRUE(EntriesEq({msgs[i].entries().begin(), msgs[i].entries().end()},
                          {E(li + 1, 1, "some data")}));
  }
  EXPECT_TRUE(EntriesEq(r->log().UnstableEntries(), {E(li + 1, 1, "some data")}));
}

// §5.3: once the entry is safely replicated the leader commits it and hands it to the state
// machine, and announces the new commit index in later AppendEntries.
TEST(Paper, LeaderCommitEntry) {
  auto r = NewRaft(1, {1, 2, 3});
  r->BecomeCandidate();
  r->BecomeLeader();
  CommitNoopEntry(*r, *r.storage);
  uint64_t li = r->log().LastIndex();
  ASSERT_TRUE(r->Step(Prop(1, "some data")).ok());
  for (const auto& m : ReadMsgs(*r)) {
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP_RESP,
                             .from = m.to(),
                             .to = 1,
                             .term = m.term(),
                             .index = m.index() + m.entries_size()}))
                    .ok());
  }
  EXPECT_EQ(r->log().committed(), li + 1);
  EXPECT_TRUE(EntriesEq(r->log().NextCommittedEntries(), {E(li + 1, 1, "some data")}));
  auto msgs = Sorted(ReadMsgs(*r));
  ASSERT_EQ(msgs.size(), 2u) << Str(msgs);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(msgs[i].type(), raftpb::MSG_APP);
    EXPECT_EQ(msgs[i].to(), i + 2);
    EXPECT_EQ(msgs[i].commit(), li + 1);
  }
}

// §5.3: an entry is committed once the leader that created it replicated it on a majority.
TEST(Paper, LeaderAcknowledgeCommit) {
  struct Case {
    size_t size;
    std::set<uint64_t> acceptors;
    bool committed;
  };
  std::vector<Case> cases = {
      {1, {}, true},           {3, {}, false},  {3, {2}, true},    {3, {2, 3}, true},
      {5, {}, false},          {5, {2}, false}, {5, {2, 3}, true}, {5, {2, 3, 4}, true},
      {5, {2, 3, 4, 5}, true}, {4, {2}, false}, {4, {2, 3}, true}, {2, {}, false},
      {2, {2}, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::vector<uint64_t> ids;
    for (uint64_t id = 1; id <= c.size; ++id) ids.push_back(id);
    auto r = NewRaft(1, ids);
    r->BecomeCandidate();
    r->BecomeLeader();
    CommitNoopEntry(*r, *r.storage);
    uint64_t li = r->log().LastIndex();
    ASSERT_TRUE(r->Step(Prop(1)).ok());
    for (const auto& m : ReadMsgs(*r)) {
      if (!c.acceptors.count(m.to())) continue;
      ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP_RESP,
                               .from = m.to(),
                               .to = 1,
                               .term = m.term(),
                               .index = m.index() + m.entries_size()}))
                      .ok());
    }
    EXPECT_EQ(r->log().committed() > li, c.committed) << "case " << i;
  }
}

// §5.3: committing an entry commits all preceding entries in the leader's log, including those
// created by previous leaders; they are applied in log order.
TEST(Paper, LeaderCommitPrecedingEntries) {
  std::vector<std::vector<Entry>> cases = {{}, Terms(1, {2}), Terms(1, {1, 2}), Terms(1, {1})};
  for (const auto& prior : cases) {
    auto r = NewRaftWithLog(1, {1, 2, 3}, prior, HS(2, 0, 0));
    r->BecomeCandidate();
    r->BecomeLeader();
    ASSERT_TRUE(r->Step(Prop(1, "some data")).ok());
    for (const auto& m : ReadMsgs(*r)) {
      ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP_RESP,
                               .from = m.to(),
                               .to = 1,
                               .term = m.term(),
                               .index = m.index() + m.entries_size()}))
                      .ok());
    }
    uint64_t li = prior.size();
    std::vector<Entry> want = prior;
    want.push_back(E(li + 1, 3));
    want.push_back(E(li + 2, 3, "some data"));
    EXPECT_TRUE(EntriesEq(r->log().NextCommittedEntries(), want));
  }
}

// §5.3: once a follower learns that an entry is committed it applies it (in log order).
TEST(Paper, FollowerCommitEntry) {
  struct Case {
    std::vector<Entry> ents;
    uint64_t commit;
  };
  std::vector<Case> cases = {
      {{E(1, 1, "some data")}, 1},
      {{E(1, 1, "some data"), E(2, 1, "some data2")}, 2},
      {{E(1, 1, "some data2"), E(2, 1, "some data")}, 2},
      {{E(1, 1, "some data"), E(2, 1, "some data2")}, 1},
  };
  for (const auto& c : cases) {
    auto r = NewRaft(1, {1, 2, 3});
    r->BecomeFollower(1, 2);
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP,
                             .from = 2,
                             .to = 1,
                             .term = 1,
                             .commit = c.commit,
                             .entries = c.ents}))
                    .ok());
    EXPECT_EQ(r->log().committed(), c.commit);
    std::vector<Entry> want(c.ents.begin(), c.ents.begin() + static_cast<long>(c.commit));
    EXPECT_TRUE(EntriesEq(r->log().NextCommittedEntries(), want));
  }
}

// §5.3: a follower refuses AppendEntries when its log has no entry with the index and term that
// precede the new entries; otherwise it accepts. A refusal carries a hint (the last index whose
// term is at most the leader's term there) so the leader can skip a whole term.
TEST(Paper, FollowerCheckMsgApp) {
  auto ents = Terms(1, {1, 2});
  struct Case {
    uint64_t log_term, index;
    uint64_t want_index;
    bool reject;
    uint64_t hint, hint_term;
  };
  std::vector<Case> cases = {
      // before the commit index: answered with the commit index
      {0, 0, 1, false, 0, 0},
      // match with committed entries
      {1, 1, 1, false, 0, 0},
      // match with uncommitted entries
      {2, 2, 2, false, 0, 0},
      // mismatch with an existing entry: hint the last entry of term <= 1
      {1, 2, 2, true, 1, 1},
      // an entry beyond the log: hint the last entry
      {3, 3, 3, true, 2, 2},
  };
  for (const auto& c : cases) {
    auto r = NewRaftWithLog(1, {1, 2, 3}, ents, HS(0, 0, 1));
    r->BecomeFollower(2, 2);
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP,
                             .from = 2,
                             .to = 1,
                             .term = 2,
                             .log_term = c.log_term,
                             .index = c.index}))
                    .ok());
    auto msgs = ReadMsgs(*r);
    ASSERT_EQ(msgs.size(), 1u);
    const Message& m = msgs[0];
    EXPECT_EQ(m.type(), raftpb::MSG_APP_RESP);
    EXPECT_EQ(m.to(), 2u);
    EXPECT_EQ(m.term(), 2u);
    EXPECT_EQ(m.index(), c.want_index) << Str(m);
    EXPECT_EQ(m.reject(), c.reject) << Str(m);
    EXPECT_EQ(m.reject_hint(), c.hint) << Str(m);
    if (c.reject) {
      EXPECT_EQ(m.log_term(), c.hint_term) << Str(m);
    }
  }
}

// §5.3: on a valid AppendEntries the follower deletes a conflicting entry and everything after
// it, and appends the new entries it does not have yet; the new entries go to stable storage.
TEST(Paper, FollowerAppendEntries) {
  struct Case {
    uint64_t index, log_term;
    std::vector<Entry> ents;
    std::vector<Entry> want;
    std::vector<Entry> want_unstable;
  };
  std::vector<Case> cases = {
      {2, 2, {E(3, 3)}, Terms(1, {1, 2, 3}), {E(3, 3)}},
      {1, 1, {E(2, 3), E(3, 4)}, Terms(1, {1, 3, 4}), {E(2, 3), E(3, 4)}},
      {0, 0, {E(1, 1)}, Terms(1, {1, 2}), {}},
      {0, 0, {E(1, 3)}, Terms(1, {3}), {E(1, 3)}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto r = NewRaftWithLog(1, {1, 2, 3}, Terms(1, {1, 2}));
    r->BecomeFollower(2, 2);
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP,
                             .from = 2,
                             .to = 1,
                             .term = 2,
                             .log_term = c.log_term,
                             .index = c.index,
                             .entries = c.ents}))
                    .ok());
    EXPECT_TRUE(EntriesEq(AllEntries(r->log()), c.want)) << "case " << i;
    EXPECT_TRUE(EntriesEq(r->log().UnstableEntries(), c.want_unstable)) << "case " << i;
  }
}

// §5.3, figure 7: whatever a follower's log looks like, the leader brings it into agreement with
// its own.
TEST(Paper, LeaderSyncFollowerLog) {
  auto lead_ents = Terms(1, {1, 1, 1, 4, 4, 5, 5, 6, 6, 6});
  const uint64_t term = 8;
  std::vector<std::vector<Entry>> followers = {
      Terms(1, {1, 1, 1, 4, 4, 5, 5, 6, 6}),           // (a)
      Terms(1, {1, 1, 1, 4}),                          // (b)
      Terms(1, {1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 6}),     // (c)
      Terms(1, {1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 7, 7}),  // (d)
      Terms(1, {1, 1, 1, 4, 4, 4, 4}),                 // (e)
      Terms(1, {1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3}),     // (f)
  };
  for (size_t i = 0; i < followers.size(); ++i) {
    auto lead = NewRaftWithLog(1, {1, 2, 3}, lead_ents, HS(term, 0, lead_ents.size()));
    auto follower = NewRaftWithLog(2, {1, 2, 3}, followers[i], HS(term - 1, 0, 0));
    std::vector<TestRaft> slots;
    slots.push_back(std::move(lead));
    slots.push_back(std::move(follower));
    slots.push_back(BlackHole());
    Network nt(std::move(slots));
    nt.Send(Hup(1));
    // The follower may refuse its vote (its log may be more up to date); the third member
    // (a black hole otherwise) grants it.
    nt.Send(Msg({.type = raftpb::MSG_VOTE_RESP, .from = 3, .to = 1, .term = term + 1}));
    ASSERT_EQ(nt[1].state(), StateType::kLeader) << "case " << i;
    nt.Send(Prop(1, "x"));
    EXPECT_TRUE(EntriesEq(AllEntries(nt[2].log()), AllEntries(nt[1].log()))) << "case " << i;
    EXPECT_EQ(nt[2].log().committed(), nt[1].log().committed()) << "case " << i;
  }
}

// §5.4.1: RequestVote carries the candidate's last log index and term and goes to all others.
TEST(Paper, VoteRequest) {
  struct Case {
    std::vector<Entry> ents;
    uint64_t want_term;
  };
  std::vector<Case> cases = {{Terms(1, {1}), 2}, {Terms(1, {1, 2}), 3}};
  for (const auto& c : cases) {
    auto r = NewRaft(1, {1, 2, 3});
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP,
                             .from = 2,
                             .to = 1,
                             .term = c.want_term - 1,
                             .entries = c.ents}))
                    .ok());
    ReadMsgs(*r);
    for (int i = 1; i < 2 * 10; ++i) r->Tick();
    auto msgs = Sorted(ReadMsgs(*r));
    ASSERT_EQ(msgs.size(), 2u) << Str(msgs);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(msgs[i].type(), raftpb::MSG_VOTE);
      EXPECT_EQ(msgs[i].to(), i + 2);
      EXPECT_EQ(msgs[i].term(), c.want_term);
      EXPECT_EQ(msgs[i].index(), c.ents.back().index());
      EXPECT_EQ(msgs[i].log_term(), c.ents.back().term());
    }
  }
}

// §5.4.1: a voter denies its vote when its own log is more up to date than the candidate's
// (the last terms differ: the later term wins; same last term: the longer log wins).
TEST(Paper, Voter) {
  struct Case {
    std::vector<Entry> ents;
    uint64_t log_term, index;
    bool reject;
  };
  std::vector<Case> cases = {
      // same last term
      {Terms(1, {1}), 1, 1, false},
      {Terms(1, {1}), 1, 2, false},
      {Terms(1, {1, 1}), 1, 1, true},
      // the candidate's last term is later
      {Terms(1, {1}), 2, 1, false},
      {Terms(1, {1}), 2, 2, false},
      {Terms(1, {1, 1}), 2, 1, false},
      // the voter's last term is later
      {Terms(1, {2}), 1, 1, true},
      {Terms(1, {2}), 1, 2, true},
      {Terms(1, {2, 1}), 1, 1, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto r = NewRaftWithLog(1, {1, 2}, c.ents);
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_VOTE,
                             .from = 2,
                             .to = 1,
                             .term = 3,
                             .log_term = c.log_term,
                             .index = c.index}))
                    .ok());
    auto msgs = ReadMsgs(*r);
    ASSERT_EQ(msgs.size(), 1u);
    EXPECT_EQ(msgs[0].type(), raftpb::MSG_VOTE_RESP);
    EXPECT_EQ(msgs[0].term(), 3u);
    EXPECT_EQ(msgs[0].reject(), c.reject) << "case " << i;
    EXPECT_EQ(r->vote(), c.reject ? kNone : 2u) << "case " << i;
  }
}

// §5.4.2: only entries from the leader's current term are committed by counting replicas.
TEST(Paper, LeaderOnlyCommitsLogFromCurrentTerm) {
  struct Case {
    uint64_t index, want_commit;
  };
  // Entries 1 (term 1) and 2 (term 2) are from earlier terms; the leader's empty entry is 3.
  std::vector<Case> cases = {{1, 0}, {2, 0}, {3, 3}};
  for (const auto& c : cases) {
    auto r = NewRaftWithLog(1, {1, 2}, Terms(1, {1, 2}), HS(2, 0, 0));
    r->BecomeCandidate();
    r->BecomeLeader();
    ReadMsgs(*r);
    ASSERT_TRUE(r->Step(Prop(1)).ok());
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP_RESP,
                             .from = 2,
                             .to = 1,
                             .term = r->term(),
                             .index = c.index}))
                    .ok());
    EXPECT_EQ(r->log().committed(), c.want_commit) << "acked index " << c.index;
  }
}

}  // namespace
}  // namespace etcdw::raft
