// Snapshots: a leader sends MsgSnap when a follower needs compacted entries; the follower
// restores from it (or ignores it); the application reports the outcome; replication resumes.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "raft/raft_test_util.h"

namespace etcdw::raft {
namespace {

using namespace rafttest;  // NOLINT(google-build-using-namespace)

Message SnapMsg(uint64_t from, uint64_t to, uint64_t term, const raftpb::Snapshot& s) {
  return Msg({.type = raftpb::MSG_SNAP, .from = from, .to = to, .term = term, .snapshot = s});
}

// A leader (1) whose storage starts with a snapshot at 11 (term 11), members {1, 2}.
TestRaft LeaderAfterSnapshot(Opts o = {}) {
  auto s = std::make_unique<TestStorage>();
  EXPECT_TRUE(s->ApplySnapshot(Snap(11, 11, {1, 2})).ok());
  s->SetHardState(HS(11, 0, 11));
  auto r = NewRaft(1, std::move(s), o);
  r->BecomeCandidate();
  r->BecomeLeader();
  ReadMsgs(*r);
  return r;
}

TEST(Snapshot, FollowerRestores) {
  auto r = NewRaft(1, {1, 2});
  auto snap = Snap(11, 11, {1, 2, 3});
  ASSERT_TRUE(r->Step(SnapMsg(2, 1, 12, snap)).ok());
  EXPECT_EQ(r->lead(), 2u);
  EXPECT_EQ(r->log().LastIndex(), 11u);
  EXPECT_EQ(r->log().TermOrZero(11), 11u);
  EXPECT_EQ(r->log().committed(), 11u);
  EXPECT_EQ(r->tracker().voters, std::set<uint64_t>({1, 2, 3}));
  ASSERT_TRUE(r->log().UnstableSnapshot());
  EXPECT_EQ(r->log().UnstableSnapshot()->metadata().index(), 11u);
  EXPECT_FALSE(r->promotable());  // not while the snapshot is unpersisted
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_APP_RESP);
  EXPECT_EQ(msgs[0].index(), 11u);
  EXPECT_FALSE(msgs[0].reject());
  // The same snapshot again is ignored: answered with the commit index.
  ASSERT_TRUE(r->Step(SnapMsg(2, 1, 12, snap)).ok());
  msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].index(), 11u);
  // After persisting it, the member may campaign again.
  Persist(*r, *r.storage);
  EXPECT_TRUE(r->promotable());
}

TEST(Snapshot, RestoreWithLearners) {
  auto snap = Snap(11, 11, {1, 2}, {3});
  auto r = NewRaft(3, {1, 2}, {.learners = {3}});
  ASSERT_TRUE(r->Step(SnapMsg(1, 3, 12, snap)).ok());
  EXPECT_EQ(r->tracker().voters, std::set<uint64_t>({1, 2}));
  EXPECT_EQ(r->tracker().learners, std::set<uint64_t>({3}));
  EXPECT_TRUE(r->tracker().Get(3)->is_learner);
  Persist(*r, *r.storage);
  EXPECT_FALSE(r->promotable());
}

// The snapshot's configuration replaces the member's: a voter can become a learner and back.
TEST(Snapshot, RestoreChangesOwnRole) {
  {
    auto r = NewRaft(3, {1, 2, 3});
    ASSERT_TRUE(r->Step(SnapMsg(1, 3, 12, Snap(11, 11, {1, 2}, {3}))).ok());
    Persist(*r, *r.storage);
    EXPECT_TRUE(r->tracker().Get(3)->is_learner);
    EXPECT_FALSE(r->promotable());
  }
  {
    auto r = NewRaft(3, {1, 2}, {.learners = {3}});
    ASSERT_TRUE(r->Step(SnapMsg(1, 3, 12, Snap(11, 11, {1, 2, 3}))).ok());
    Persist(*r, *r.storage);
    EXPECT_FALSE(r->tracker().Get(3)->is_learner);
    EXPECT_TRUE(r->promotable());
  }
}

// A snapshot of a configuration that does not contain this member is ignored.
TEST(Snapshot, WithoutThisMemberIsIgnored) {
  auto r = NewRaft(1, {1, 2, 3});
  ASSERT_TRUE(r->Step(SnapMsg(2, 1, 12, Snap(11, 11, {2, 3}))).ok());
  EXPECT_EQ(r->log().LastIndex(), 0u);
  EXPECT_EQ(r->log().committed(), 0u);
  EXPECT_FALSE(r->log().UnstableSnapshot());
  EXPECT_EQ(r->tracker().voters, std::set<uint64_t>({1, 2, 3}));
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].index(), 0u);
}

// A snapshot the log already covers (same index and term) only moves the commit index.
TEST(Snapshot, RestoreIgnoresCoveredSnapshot) {
  auto r = NewRaftWithLog(1, {1, 2}, Terms(1, {1, 1, 1}), HS(1, 0, 1));
  ASSERT_TRUE(r->Step(SnapMsg(2, 1, 1, Snap(1, 1, {1, 2}))).ok());  // at or below commit
  EXPECT_EQ(r->log().committed(), 1u);
  EXPECT_FALSE(r->log().UnstableSnapshot());
  ASSERT_TRUE(r->Step(SnapMsg(2, 1, 1, Snap(2, 1, {1, 2}))).ok());  // matching entry
  EXPECT_EQ(r->log().committed(), 2u);
  EXPECT_FALSE(r->log().UnstableSnapshot());
  EXPECT_EQ(r->log().LastIndex(), 3u);  // nothing truncated
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(msgs[1].index(), 2u);
}

// A snapshot whose last entry conflicts with the log replaces the log.
TEST(Snapshot, RestoreReplacesConflictingLog) {
  auto r = NewRaftWithLog(1, {1, 2}, Terms(1, {1, 1, 1}), HS(1, 0, 1));
  ASSERT_TRUE(r->Step(SnapMsg(2, 1, 3, Snap(3, 2, {1, 2}))).ok());
  EXPECT_EQ(r->log().LastIndex(), 3u);
  EXPECT_EQ(r->log().TermOrZero(3), 2u);
  EXPECT_EQ(r->log().committed(), 3u);
  EXPECT_TRUE(r->log().UnstableSnapshot());
}

// A candidate receiving a snapshot from the leader of its term falls back first.
TEST(Snapshot, CandidateFallsBackOnSnapshot) {
  auto r = NewRaft(1, {1, 2, 3});
  r->BecomeCandidate();
  ASSERT_TRUE(r->Step(SnapMsg(2, 1, r->term(), Snap(11, 11, {1, 2, 3}))).ok());
  EXPECT_EQ(r->state(), StateType::kFollower);
  EXPECT_EQ(r->lead(), 2u);
  EXPECT_EQ(r->log().committed(), 11u);
}

// The leader sends a snapshot to a follower that needs compacted entries.
TEST(Snapshot, LeaderProvidesSnapshot) {
  auto r = LeaderAfterSnapshot();
  // 2 rejects the probe: its next moves below the first index.
  Progress* p = r->tracker().Get(2);
  p->next = r->log().FirstIndex();
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP_RESP,
                           .from = 2,
                           .to = 1,
                           .term = r->term(),
                           .index = p->next - 1,
                           .reject = true,
                           .reject_hint = 0}))
                  .ok());
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u) << Str(msgs);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_SNAP);
  EXPECT_EQ(msgs[0].snapshot().metadata().index(), 11u);
  EXPECT_EQ(p->state, ProgressState::kSnapshot);
  EXPECT_EQ(p->pending_snapshot, 11u);
  // Snapshot state pauses replication.
  ASSERT_TRUE(r->Step(Prop(1)).ok());
  EXPECT_TRUE(ReadMsgs(*r).empty());
}

// A follower that has not been heard from recently gets no snapshot (it may be down).
TEST(Snapshot, IgnoreProvidingSnapshotToInactiveFollower) {
  auto r = LeaderAfterSnapshot();
  Progress* p = r->tracker().Get(2);
  p->next = r->log().FirstIndex() - 1;
  p->recent_active = false;
  ASSERT_TRUE(r->Step(Prop(1)).ok());
  EXPECT_TRUE(ReadMsgs(*r).empty());
  EXPECT_EQ(p->state, ProgressState::kProbe);
}

TEST(Snapshot, SnapshotTemporarilyUnavailableIsRetriedLater) {
  // A storage that cannot produce a snapshot right now.
  class Busy : public TestStorage {
   public:
    using TestStorage::TestStorage;
    Result<raftpb::Snapshot> Snapshot() const override {
      return ErrSnapshotTemporarilyUnavailable();
    }
  };
  auto s = std::make_unique<Busy>();
  ASSERT_TRUE(s->ApplySnapshot(Snap(11, 11, {1, 2})).ok());
  s->SetHardState(HS(11, 0, 11));
  auto r = NewRaft(1, std::move(s));
  r->BecomeCandidate();
  r->BecomeLeader();
  Progress* p = r->tracker().Get(2);
  p->next = 5;
  p->recent_active = true;
  ASSERT_TRUE(r->Step(Prop(1)).ok());
  EXPECT_TRUE(ReadMsgs(*r).empty());
  EXPECT_EQ(p->state, ProgressState::kProbe);
}

// MsgSnapStatus: failure probes again from match (after a heartbeat), success resumes after the
// snapshot.
TEST(Snapshot, ReportFailure) {
  auto r = LeaderAfterSnapshot();
  Progress* p = r->tracker().Get(2);
  p->next = 1;
  p->BecomeSnapshot(11);
  ASSERT_TRUE(
      r->Step(Msg({.type = raftpb::MSG_SNAP_STATUS, .from = 2, .to = 1, .reject = true})).ok());
  EXPECT_EQ(p->pending_snapshot, 0u);
  EXPECT_EQ(p->next, 1u);
  EXPECT_EQ(p->state, ProgressState::kProbe);
  EXPECT_TRUE(p->probe_sent);  // wait for a heartbeat response before probing
}

TEST(Snapshot, ReportSuccess) {
  auto r = LeaderAfterSnapshot();
  Progress* p = r->tracker().Get(2);
  p->next = 1;
  p->BecomeSnapshot(11);
  ASSERT_TRUE(
      r->Step(Msg({.type = raftpb::MSG_SNAP_STATUS, .from = 2, .to = 1, .reject = false})).ok());
  EXPECT_EQ(p->pending_snapshot, 0u);
  EXPECT_EQ(p->next, 12u);
  EXPECT_EQ(p->state, ProgressState::kProbe);
  EXPECT_TRUE(p->probe_sent);
  // The heartbeat response unpauses it: the probe goes out after the snapshot.
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP, .from = 2, .to = 1})).ok());
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_APP);
  EXPECT_EQ(msgs[0].index(), 11u);
}

// A status report for a follower not in snapshot state is ignored.
TEST(Snapshot, ReportIgnoredOutsideSnapshotState) {
  auto r = LeaderAfterSnapshot();
  Progress* p = r->tracker().Get(2);
  p->BecomeReplicate();
  uint64_t next = p->next;
  ASSERT_TRUE(
      r->Step(Msg({.type = raftpb::MSG_SNAP_STATUS, .from = 2, .to = 1, .reject = true})).ok());
  EXPECT_EQ(p->state, ProgressState::kReplicate);
  EXPECT_EQ(p->next, next);
}

// An acknowledgement at or beyond the snapshot (the follower got it) ends snapshot state without
// waiting for the report, and replication resumes at once.
TEST(Snapshot, AckAbortsPendingSnapshot) {
  auto r = LeaderAfterSnapshot();
  Progress* p = r->tracker().Get(2);
  p->next = 1;
  p->BecomeSnapshot(11);
  ASSERT_TRUE(
      r->Step(
           Msg({.type = raftpb::MSG_APP_RESP, .from = 2, .to = 1, .term = r->term(), .index = 11}))
          .ok());
  EXPECT_EQ(p->pending_snapshot, 0u);
  EXPECT_EQ(p->state, ProgressState::kReplicate);
  EXPECT_EQ(p->match, 11u);
  // The leader's empty entry (12) went out at once.
  EXPECT_EQ(p->next, 13u);
  EXPECT_EQ(p->inflights.Count(), 1u);
}

// A follower far behind the compacted log catches up through the snapshot, then by entries.
TEST(Snapshot, SlowNodeRestore) {
  Network nt = Network::Of(3);
  nt.Send(Hup(1));
  nt.Isolate(3);
  for (int j = 0; j <= 100; ++j) nt.Send(Prop(1));
  Raft& lead = nt[1];
  SnapshotAndCompact(nt, 1);
  nt.Recover();
  // Heartbeats until the leader knows 3 is active (it sends snapshots only to active members).
  for (int i = 0; i < 10 && !lead.tracker().Get(3)->recent_active; ++i) {
    nt.Send(Msg({.type = raftpb::MSG_BEAT, .from = 1, .to = 1}));
  }
  ASSERT_TRUE(lead.tracker().Get(3)->recent_active);
  nt.Send(Prop(1));
  Raft& follower = nt[3];
  EXPECT_TRUE(follower.log().UnstableSnapshot());
  nt.Send(Prop(1));
  EXPECT_EQ(follower.log().committed(), lead.log().committed());
  EXPECT_EQ(follower.log().LastIndex(), lead.log().LastIndex());
  EXPECT_EQ(lead.tracker().Get(3)->state, ProgressState::kReplicate);
}

// A learner that joins after the log was compacted is caught up with a snapshot.
TEST(Snapshot, LearnerReceivesSnapshot) {
  std::vector<TestRaft> slots;
  slots.push_back(NewRaft(1, {1}, {.learners = {2}}));
  slots.push_back(BlackHole());
  Network nt(std::move(slots));
  nt.Send(Hup(1));
  ASSERT_EQ(nt[1].state(), StateType::kLeader);
  for (int i = 0; i < 5; ++i) nt.Send(Prop(1));
  Raft& lead = nt[1];
  ASSERT_EQ(lead.log().committed(), 6u);
  PersistAndApply(lead, nt.StorageOf(1));
  raftpb::ConfState cs = lead.tracker().ConfState();
  ASSERT_TRUE(nt.StorageOf(1).CreateSnapshot(lead.log().applied(), &cs).ok());
  ASSERT_TRUE(nt.StorageOf(1).Compact(lead.log().applied()).ok());
  nt.Put(2, NewRaft(2, {1}, {.learners = {2}}));
  nt.Send(Msg({.type = raftpb::MSG_BEAT, .from = 1, .to = 1}));
  EXPECT_TRUE(nt[2].log().UnstableSnapshot());
  EXPECT_EQ(nt[2].log().committed(), lead.log().committed());
  EXPECT_EQ(nt[2].tracker().learners, std::set<uint64_t>({2}));
  EXPECT_EQ(lead.tracker().Get(2)->state, ProgressState::kReplicate);
}

}  // namespace
}  // namespace etcdw::raft
