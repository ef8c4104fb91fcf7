// Flow control (Inflights, Progress states) and quorum arithmetic (ProgressTracker).
#include "etcdw/raft/progress.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace etcdw::raft {
namespace {

TEST(Inflights, AddFillsAndWraps) {
  Inflights in(10);
  for (uint64_t i = 0; i < 5; ++i) in.Add(i);
  EXPECT_EQ(in.Count(), 5u);
  EXPECT_FALSE(in.Full());
  for (uint64_t i = 5; i < 10; ++i) in.Add(i);
  EXPECT_TRUE(in.Full());
  EXPECT_THROW(in.Add(10), std::logic_error);
  // Free half, then wrap around the ring.
  in.FreeLE(4);
  EXPECT_EQ(in.Count(), 5u);
  for (uint64_t i = 10; i < 15; ++i) in.Add(i);
  EXPECT_TRUE(in.Full());
  in.FreeLE(12);  // frees 5..12
  EXPECT_EQ(in.Count(), 2u);
  in.FreeLE(14);
  EXPECT_EQ(in.Count(), 0u);
  in.Add(15);
  EXPECT_EQ(in.Count(), 1u);
}

TEST(Inflights, FreeLE) {
  Inflights in(10);
  for (uint64_t i = 0; i < 10; ++i) in.Add(i);
  in.FreeLE(0);
  EXPECT_EQ(in.Count(), 9u);
  in.FreeLE(4);
  EXPECT_EQ(in.Count(), 5u);
  in.FreeLE(3);  // stale: nothing
  EXPECT_EQ(in.Count(), 5u);
  in.FreeLE(8);
  EXPECT_EQ(in.Count(), 1u);
  for (uint64_t i = 10; i < 15; ++i) in.Add(i);  // wraps
  in.FreeLE(12);
  EXPECT_EQ(in.Count(), 2u);
  in.FreeLE(14);
  EXPECT_EQ(in.Count(), 0u);
  in.FreeLE(100);  // empty: nothing
  EXPECT_EQ(in.Count(), 0u);
}

TEST(Inflights, FreeFirstOne) {
  Inflights in(10);
  in.FreeFirstOne();  // empty: nothing
  for (uint64_t i = 0; i < 10; ++i) in.Add(i);
  in.FreeFirstOne();
  EXPECT_EQ(in.Count(), 9u);
  EXPECT_FALSE(in.Full());
  in.Add(10);
  EXPECT_TRUE(in.Full());
  in.Reset();
  EXPECT_EQ(in.Count(), 0u);
}

Progress MakeProgress(ProgressState state, uint64_t match, uint64_t next, size_t inflight = 256) {
  Progress p(inflight);
  p.state = state;
  p.match = match;
  p.next = next;
  return p;
}

TEST(Progress, IsPaused) {
  auto probe = MakeProgress(ProgressState::kProbe, 0, 1);
  EXPECT_FALSE(probe.IsPaused());
  probe.probe_sent = true;
  EXPECT_TRUE(probe.IsPaused());
  auto repl = MakeProgress(ProgressState::kReplicate, 0, 1, 1);
  repl.probe_sent = true;  // irrelevant in replicate
  EXPECT_FALSE(repl.IsPaused());
  repl.inflights.Add(1);
  EXPECT_TRUE(repl.IsPaused());
  auto snap = MakeProgress(ProgressState::kSnapshot, 0, 1);
  EXPECT_TRUE(snap.IsPaused());
}

// A successful update unpauses a probe.
TEST(Progress, MaybeUpdateResumesProbe) {
  auto p = MakeProgress(ProgressState::kProbe, 0, 2);
  p.probe_sent = true;
  p.MaybeDecrTo(1, 1);
  EXPECT_FALSE(p.probe_sent);
  p.probe_sent = true;
  EXPECT_TRUE(p.MaybeUpdate(2));
  EXPECT_FALSE(p.probe_sent);
}

TEST(Progress, BecomeProbe) {
  const uint64_t match = 1;
  struct Case {
    Progress p;
    uint64_t want_next;
  };
  std::vector<Case> cases;
  cases.push_back({MakeProgress(ProgressState::kReplicate, match, 5), 2});
  // Back from a snapshot: resume after the snapshot (or the match, if further).
  auto s1 = MakeProgress(ProgressState::kSnapshot, match, 5);
  s1.pending_snapshot = 10;
  cases.push_back({s1, 11});
  auto s2 = MakeProgress(ProgressState::kSnapshot, match, 5);
  s2.pending_snapshot = 0;
  cases.push_back({s2, 2});
  for (auto& c : cases) {
    c.p.BecomeProbe();
    EXPECT_EQ(c.p.state, ProgressState::kProbe);
    EXPECT_EQ(c.p.match, match);
    EXPECT_EQ(c.p.next, c.want_next);
    EXPECT_EQ(c.p.pending_snapshot, 0u);
    EXPECT_FALSE(c.p.probe_sent);
  }
}

TEST(Progress, BecomeReplicate) {
  auto p = MakeProgress(ProgressState::kProbe, 1, 5);
  p.probe_sent = true;
  p.BecomeReplicate();
  EXPECT_EQ(p.state, ProgressState::kReplicate);
  EXPECT_EQ(p.match, 1u);
  EXPECT_EQ(p.next, 2u);
  EXPECT_FALSE(p.IsPaused());
}

TEST(Progress, BecomeSnapshot) {
  auto p = MakeProgress(ProgressState::kReplicate, 1, 5);
  p.inflights.Add(3);
  p.BecomeSnapshot(10);
  EXPECT_EQ(p.state, ProgressState::kSnapshot);
  EXPECT_EQ(p.match, 1u);
  EXPECT_EQ(p.pending_snapshot, 10u);
  EXPECT_EQ(p.inflights.Count(), 0u);
  EXPECT_TRUE(p.IsPaused());
}

TEST(Progress, MaybeUpdate) {
  const uint64_t prev_m = 3, prev_n = 5;
  struct Case {
    uint64_t update;
    uint64_t want_match, want_next;
    bool want_ok;
  };
  std::vector<Case> cases = {
      {prev_m - 1, prev_m, prev_n, false},         // do not decrease match, next
      {prev_m, prev_m, prev_n, false},             // do not decrease next
      {prev_m + 1, prev_m + 1, prev_n, true},      // increase match, do not decrease next
      {prev_m + 2, prev_m + 2, prev_n + 1, true},  // increase match, next
  };
  for (const auto& c : cases) {
    auto p = MakeProgress(ProgressState::kProbe, prev_m, prev_n);
    EXPECT_EQ(p.MaybeUpdate(c.update), c.want_ok) << c.update;
    EXPECT_EQ(p.match, c.want_match) << c.update;
    EXPECT_EQ(p.next, c.want_next) << c.update;
  }
}

TEST(Progress, MaybeDecrTo) {
  struct Case {
    ProgressState state;
    uint64_t match, next;
    uint64_t rejected, hint;
    bool want;
    uint64_t want_next;
  };
  std::vector<Case> cases = {
      // replicate: a rejection at or below match is stale
      {ProgressState::kReplicate, 5, 10, 5, 5, false, 10},
      {ProgressState::kReplicate, 5, 10, 4, 4, false, 10},
      // replicate: otherwise restart right after match
      {ProgressState::kReplicate, 5, 10, 9, 9, true, 6},
      // probe: only the rejection of the probe in flight (next - 1) counts
      {ProgressState::kProbe, 0, 0, 0, 0, false, 0},
      {ProgressState::kProbe, 0, 10, 5, 5, false, 10},
      // probe: next = min(rejected, hint + 1), at least 1
      {ProgressState::kProbe, 0, 10, 9, 9, true, 9},
      {ProgressState::kProbe, 0, 2, 1, 1, true, 1},
      {ProgressState::kProbe, 0, 1, 0, 0, true, 1},
      {ProgressState::kProbe, 0, 10, 9, 2, true, 3},
      {ProgressState::kProbe, 0, 10, 9, 0, true, 1},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto p = MakeProgress(c.state, c.match, c.next);
    p.probe_sent = true;
    EXPECT_EQ(p.MaybeDecrTo(c.rejected, c.hint), c.want) << "case " << i;
    EXPECT_EQ(p.match, c.match) << "case " << i;
    EXPECT_EQ(p.next, c.want_next) << "case " << i;
    if (c.want && c.state == ProgressState::kProbe) {
      EXPECT_FALSE(p.probe_sent) << "case " << i;
    }
  }
}

TEST(Progress, SentEntries) {
  auto probe = MakeProgress(ProgressState::kProbe, 0, 1);
  probe.SentEntries(5, true);
  EXPECT_TRUE(probe.probe_sent);
  EXPECT_EQ(probe.next, 1u);  // a probe does not move next optimistically
  auto repl = MakeProgress(ProgressState::kReplicate, 0, 1, 2);
  repl.SentEntries(5, true);
  EXPECT_EQ(repl.next, 6u);
  EXPECT_EQ(repl.inflights.Count(), 1u);
  repl.SentEntries(5, false);  // an empty MsgApp takes no slot
  EXPECT_EQ(repl.inflights.Count(), 1u);
  repl.SentEntries(8, true);
  EXPECT_TRUE(repl.IsPaused());
}

TEST(ProgressTracker, Committed) {
  struct Case {
    std::vector<uint64_t> matches;  // of voters 1..n
    uint64_t want;
  };
  std::vector<Case> cases = {
      {{}, 0},
      {{5}, 5},
      {{5, 3}, 3},
      {{5, 3, 1}, 3},
      {{1, 5, 3}, 3},
      {{5, 5, 1, 1}, 1},
      {{5, 5, 5, 1}, 5},
      {{9, 8, 7, 6, 5}, 7},
      {{1, 2, 3, 4, 5, 6}, 3},
  };
  for (const auto& c : cases) {
    ProgressTracker t(10);
    for (size_t i = 0; i < c.matches.size(); ++i) {
      t.Add(i + 1, false, 1);
      t.Get(i + 1)->match = c.matches[i];
    }
    EXPECT_EQ(t.Committed(), c.want) << ::testing::PrintToString(c.matches);
  }
  // Learners never count.
  ProgressTracker t(10);
  t.Add(1, false, 1);
  t.Add(2, false, 1);
  t.Add(3, false, 1);
  t.Add(4, true, 1);
  t.Add(5, true, 1);
  t.Get(1)->match = 9;
  t.Get(4)->match = 9;
  t.Get(5)->match = 9;
  EXPECT_EQ(t.Committed(), 0u);
  t.Get(2)->match = 7;
  EXPECT_EQ(t.Committed(), 7u);
}

TEST(ProgressTracker, Votes) {
  ProgressTracker t(10);
  for (uint64_t id : {1, 2, 3, 4, 5}) t.Add(id, false, 1);
  t.Add(6, true, 1);
  EXPECT_EQ(t.TallyVotes(), VoteResult::kPending);
  t.RecordVote(1, true);
  t.RecordVote(6, true);  // a learner's vote does not count
  t.RecordVote(2, true);
  EXPECT_EQ(t.TallyVotes(), VoteResult::kPending);
  EXPECT_EQ(t.VoteCounts(), std::make_pair(2, 0));
  t.RecordVote(2, false);  // only the first vote of a member counts
  EXPECT_EQ(t.VoteCounts(), std::make_pair(2, 0));
  t.RecordVote(3, false);
  t.RecordVote(4, false);
  EXPECT_EQ(t.TallyVotes(), VoteResult::kPending);
  t.RecordVote(5, true);
  EXPECT_EQ(t.TallyVotes(), VoteResult::kWon);
  t.ResetVotes();
  for (uint64_t id : {1, 2, 3}) t.RecordVote(id, false);
  EXPECT_EQ(t.TallyVotes(), VoteResult::kLost);
}

TEST(ProgressTracker, QuorumActive) {
  ProgressTracker t(10);
  for (uint64_t id : {1, 2, 3}) t.Add(id, false, 1);
  t.Add(4, true, 1);
  for (auto& [id, pr] : t.progress) pr.recent_active = false;
  EXPECT_FALSE(t.QuorumActive(1));
  t.Get(4)->recent_active = true;  // learners do not count
  EXPECT_FALSE(t.QuorumActive(1));
  t.Get(3)->recent_active = true;
  EXPECT_TRUE(t.QuorumActive(1));  // the leader itself counts
}

TEST(ProgressTracker, MembershipChanges) {
  ProgressTracker t(10);
  t.Add(1, false, 5);
  t.Add(2, true, 0);
  EXPECT_EQ(t.Get(2)->next, 1u);  // next is at least 1
  EXPECT_TRUE(t.Get(2)->recent_active);
  EXPECT_TRUE(t.Get(2)->is_learner);
  EXPECT_EQ(t.voters, std::set<uint64_t>({1}));
  EXPECT_EQ(t.learners, std::set<uint64_t>({2}));
  EXPECT_TRUE(t.IsSingleton());  // one voter: learners do not matter
  t.MakeVoter(2);
  EXPECT_FALSE(t.IsSingleton());
  EXPECT_FALSE(t.Get(2)->is_learner);
  EXPECT_EQ(t.voters, std::set<uint64_t>({1, 2}));
  EXPECT_TRUE(t.learners.empty());
  t.MakeLearner(1);
  EXPECT_EQ(t.voters, std::set<uint64_t>({2}));
  EXPECT_EQ(t.learners, std::set<uint64_t>({1}));
  t.Remove(1);
  EXPECT_EQ(t.Get(1), nullptr);
  EXPECT_TRUE(t.IsSingleton());
  auto cs = t.ConfState();
  ASSERT_EQ(cs.voters_size(), 1);
  EXPECT_EQ(cs.voters(0), 2u);
  EXPECT_EQ(cs.learners_size(), 0);
}

}  // namespace
}  // namespace etcdw::raft
