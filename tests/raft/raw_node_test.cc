// RawNode: the Ready / Advance contract the application relies on.
#include "etcdw/raft/raw_node.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "raft/raft_test_util.h"

namespace etcdw::raft {
namespace {

using namespace rafttest;  // NOLINT(google-build-using-namespace)

// What the application does with a Ready before Advance: persist the snapshot, the entries and
// the hard state. Checks on the way that every committed entry is durable by then.
void PersistReady(MemoryStorage& s, const Ready& rd) {
  if (rd.snapshot) {
    ASSERT_TRUE(s.ApplySnapshot(*rd.snapshot).ok());
  }
  ASSERT_TRUE(s.Append(rd.entries).ok());
  if (rd.hard_state) s.SetHardState(*rd.hard_state);
  for (const auto& e : rd.committed_entries) {
    ASSERT_LE(e.index(), s.LastIndex()) << "committed entry " << e.index() << " not persisted";
    ASSERT_EQ(s.Term(e.index()).value(), e.term());
  }
  if (rd.hard_state) {
    EXPECT_LE(rd.hard_state->commit(), s.LastIndex());
  }
}

// Runs Ready / persist / apply / Advance until nothing is ready; returns the entries applied.
std::vector<Entry> DrainReady(RawNode& n, MemoryStorage& s) {
  std::vector<Entry> applied;
  for (int i = 0; i < 100 && n.HasReady(); ++i) {
    Ready rd = n.GetReady();
    PersistReady(s, rd);
    for (const auto& e : rd.committed_entries) {
      applied.push_back(e);
      if (e.type() == raftpb::ENTRY_CONF_CHANGE) {
        raftpb::ConfChange cc;
        EXPECT_TRUE(cc.ParseFromString(e.data()));
        n.ApplyConfChange(cc);
      }
    }
    n.Advance(rd);
  }
  EXPECT_FALSE(n.HasReady());
  return applied;
}

TEST(RawNode, StepRefusesLocalMessagesAndUnknownPeers) {
  TestStorage s({1, 2});
  RawNode n(MakeConfig(1, &s, {}));
  for (MessageType t : {raftpb::MSG_HUP, raftpb::MSG_BEAT, raftpb::MSG_UNREACHABLE,
                        raftpb::MSG_SNAP_STATUS, raftpb::MSG_CHECK_QUORUM}) {
    Status st = n.Step(Msg({.type = t, .from = 2, .to = 1}));
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << MessageTypeName(t);
  }
  for (MessageType t : {raftpb::MSG_APP_RESP, raftpb::MSG_VOTE_RESP, raftpb::MSG_HEARTBEAT_RESP,
                        raftpb::MSG_PRE_VOTE_RESP}) {
    EXPECT_FALSE(n.Step(Msg({.type = t, .from = 9, .to = 1, .term = 1})).ok())
        << MessageTypeName(t);
  }
  // A malformed proposal from a peer is refused, not a crash.
  EXPECT_FALSE(n.Step(Msg({.type = raftpb::MSG_PROP, .from = 2, .to = 1})).ok());
  // A normal message from a member is accepted.
  EXPECT_TRUE(n.Step(Msg({.type = raftpb::MSG_HEARTBEAT, .from = 2, .to = 1, .term = 1})).ok());
  EXPECT_EQ(n.raft().lead(), 2u);
}

// Bootstrap: the first Ready carries the conf change entries (to persist and apply) and the
// hard state (term 1, commit n), and must be synced.
TEST(RawNode, BootstrapThenReady) {
  MemoryStorage s;
  RawNode n(MakeConfig(1, &s, {}));
  EXPECT_FALSE(n.HasReady());
  ASSERT_TRUE(n.Bootstrap({CC(raftpb::CONF_CHANGE_ADD_NODE, 1)}).ok());
  ASSERT_TRUE(n.HasReady());
  Ready rd = n.GetReady();
  ASSERT_TRUE(rd.hard_state);
  EXPECT_TRUE(HardStateEqual(*rd.hard_state, HS(1, 0, 1)));
  ASSERT_EQ(rd.entries.size(), 1u);
  EXPECT_EQ(rd.entries[0].type(), raftpb::ENTRY_CONF_CHANGE);
  ASSERT_EQ(rd.committed_entries.size(), 1u);
  EXPECT_TRUE(rd.must_sync);
  EXPECT_FALSE(rd.soft_state);  // still a follower without a leader
  EXPECT_TRUE(rd.messages.empty());
  PersistReady(s, rd);
  raftpb::ConfChange cc;
  ASSERT_TRUE(cc.ParseFromString(rd.committed_entries[0].data()));
  n.ApplyConfChange(cc);
  n.Advance(rd);
  EXPECT_FALSE(n.HasReady());
  // Now it can campaign: a single voter wins at once.
  n.Campaign();
  ASSERT_TRUE(n.HasReady());
  rd = n.GetReady();
  ASSERT_TRUE(rd.soft_state);
  EXPECT_EQ(rd.soft_state->state, StateType::kLeader);
  EXPECT_EQ(rd.soft_state->lead, 1u);
  ASSERT_TRUE(rd.hard_state);
  EXPECT_EQ(rd.hard_state->term(), 2u);
  EXPECT_EQ(rd.hard_state->vote(), 1u);
  EXPECT_TRUE(rd.must_sync);
  ASSERT_EQ(rd.entries.size(), 1u);  // the leader's empty entry
  PersistReady(s, rd);
  n.Advance(rd);
  // Proposals commit and come back as committed entries.
  ASSERT_TRUE(n.Propose("foo").ok());
  auto applied = DrainReady(n, s);
  ASSERT_FALSE(applied.empty());
  EXPECT_EQ(applied.back().data(), "foo");
  // Bootstrapping again is refused.
  EXPECT_FALSE(n.Bootstrap({CC(raftpb::CONF_CHANGE_ADD_NODE, 1)}).ok());
}

// Campaigning before the bootstrap entries are applied is refused (they change membership).
TEST(RawNode, NoCampaignBeforeBootstrapApplied) {
  MemoryStorage s;
  RawNode n(MakeConfig(1, &s, {}));
  ASSERT_TRUE(n.Bootstrap({CC(raftpb::CONF_CHANGE_ADD_NODE, 1)}).ok());
  n.Campaign();
  EXPECT_EQ(n.raft().state(), StateType::kFollower);
}

// Hard state only when it changed; must_sync only when entries, term or vote changed (not for
// a commit-only change).
TEST(RawNode, HardStateOnlyWhenChanged) {
  TestStorage s({1, 2});
  RawNode n(MakeConfig(1, &s, {}));
  EXPECT_FALSE(n.HasReady());
  n.Tick();
  EXPECT_FALSE(n.HasReady());
  // A leader's heartbeat at term 1 makes it a follower of term 1: term changed.
  ASSERT_TRUE(n.Step(Msg({.type = raftpb::MSG_APP,
                          .from = 2,
                          .to = 1,
                          .term = 1,
                          .entries = {E(1, 1, "a"), E(2, 1, "b")}}))
                  .ok());
  Ready rd = n.GetReady();
  ASSERT_TRUE(rd.hard_state);
  EXPECT_EQ(rd.hard_state->term(), 1u);
  EXPECT_EQ(rd.hard_state->commit(), 0u);
  EXPECT_TRUE(rd.must_sync);
  ASSERT_TRUE(rd.soft_state);
  EXPECT_EQ(rd.soft_state->lead, 2u);
  EXPECT_EQ(rd.messages.size(), 1u);
  PersistReady(s, rd);
  n.Advance(rd);
  EXPECT_FALSE(n.HasReady());
  // Commit moves: hard state again, no sync needed.
  ASSERT_TRUE(
      n.Step(Msg({.type = raftpb::MSG_HEARTBEAT, .from = 2, .to = 1, .term = 1, .commit = 2}))
          .ok());
  rd = n.GetReady();
  ASSERT_TRUE(rd.hard_state);
  EXPECT_EQ(rd.hard_state->commit(), 2u);
  EXPECT_FALSE(rd.must_sync);
  EXPECT_FALSE(rd.soft_state);
  EXPECT_EQ(rd.committed_entries.size(), 2u);
  PersistReady(s, rd);
  n.Advance(rd);
  // A heartbeat that changes nothing: only the response.
  ASSERT_TRUE(
      n.Step(Msg({.type = raftpb::MSG_HEARTBEAT, .from = 2, .to = 1, .term = 1, .commit = 2}))
          .ok());
  rd = n.GetReady();
  EXPECT_FALSE(rd.hard_state);
  EXPECT_FALSE(rd.must_sync);
  EXPECT_EQ(rd.messages.size(), 1u);
  EXPECT_TRUE(rd.committed_entries.empty());
  n.Advance(rd);
  EXPECT_FALSE(n.HasReady());
}

// A vote changes the hard state and must be synced before the response is sent.
TEST(RawNode, VoteMustSync) {
  TestStorage s({1, 2, 3});
  RawNode n(MakeConfig(1, &s, {}));
  ASSERT_TRUE(n.Step(Msg({.type = raftpb::MSG_VOTE, .from = 2, .to = 1, .term = 3})).ok());
  Ready rd = n.GetReady();
  ASSERT_TRUE(rd.hard_state);
  EXPECT_EQ(rd.hard_state->vote(), 2u);
  EXPECT_TRUE(rd.must_sync);
  ASSERT_EQ(rd.messages.size(), 1u);
  EXPECT_FALSE(rd.messages[0].reject());
}

// A restarted member replays its committed but unapplied entries, without a hard state update.
TEST(RawNode, Restart) {
  TestStorage s({1});
  ASSERT_TRUE(s.Append({E(1, 1, "a"), E(2, 1, "b")}).ok());
  s.SetHardState(HS(1, 0, 1));
  RawNode n(MakeConfig(1, &s, {}));
  ASSERT_TRUE(n.HasReady());
  Ready rd = n.GetReady();
  EXPECT_FALSE(rd.hard_state);
  EXPECT_FALSE(rd.must_sync);
  EXPECT_TRUE(rd.entries.empty());
  EXPECT_TRUE(EntriesEq(rd.committed_entries, {E(1, 1, "a")}));
  n.Advance(rd);
  EXPECT_FALSE(n.HasReady());
  // With Config::applied, what was applied is not replayed.
  TestStorage s2({1});
  ASSERT_TRUE(s2.Append({E(1, 1, "a"), E(2, 1, "b")}).ok());
  s2.SetHardState(HS(1, 0, 2));
  Config c = MakeConfig(1, &s2, {});
  c.applied = 1;
  RawNode n2(c);
  rd = n2.GetReady();
  EXPECT_TRUE(EntriesEq(rd.committed_entries, {E(2, 1, "b")}));
}

TEST(RawNode, RestartFromSnapshot) {
  MemoryStorage s;
  ASSERT_TRUE(s.ApplySnapshot(Snap(2, 1, {1, 2})).ok());
  ASSERT_TRUE(s.Append({E(3, 1, "foo")}).ok());
  s.SetHardState(HS(1, 0, 3));
  RawNode n(MakeConfig(1, &s, {}));
  Ready rd = n.GetReady();
  EXPECT_TRUE(EntriesEq(rd.committed_entries, {E(3, 1, "foo")}));
  EXPECT_FALSE(rd.hard_state);
  EXPECT_EQ(n.raft().tracker().voters, std::set<uint64_t>({1, 2}));
  n.Advance(rd);
  EXPECT_EQ(n.GetStatus().applied, 3u);
}

// Committed entries come in pages of max_committed_size_per_ready bytes.
TEST(RawNode, CommitPagination) {
  TestStorage s({1});
  std::vector<Entry> ents;
  for (uint64_t i = 1; i <= 10; ++i) ents.push_back(E(i, 1, std::string(100, 'a')));
  ASSERT_TRUE(s.Append(ents).ok());
  s.SetHardState(HS(1, 0, 10));
  Config c = MakeConfig(1, &s, {});
  c.max_committed_size_per_ready = 3 * ents[0].ByteSizeLong();
  RawNode n(c);
  std::vector<uint64_t> sizes;
  uint64_t next = 1;
  while (n.HasReady()) {
    Ready rd = n.GetReady();
    for (const auto& e : rd.committed_entries) EXPECT_EQ(e.index(), next++);
    sizes.push_back(rd.committed_entries.size());
    n.Advance(rd);
  }
  EXPECT_EQ(next, 11u);
  EXPECT_EQ(sizes, std::vector<uint64_t>({3, 3, 3, 1}));
}

// A snapshot from the leader arrives in a Ready; after Advance the member counts it as applied.
TEST(RawNode, SnapshotInReady) {
  TestStorage s({1, 2});
  RawNode n(MakeConfig(1, &s, {}));
  ASSERT_TRUE(n.Step(Msg({.type = raftpb::MSG_SNAP,
                          .from = 2,
                          .to = 1,
                          .term = 3,
                          .snapshot = Snap(10, 2, {1, 2})}))
                  .ok());
  Ready rd = n.GetReady();
  ASSERT_TRUE(rd.snapshot);
  EXPECT_EQ(rd.snapshot->metadata().index(), 10u);
  EXPECT_TRUE(rd.committed_entries.empty());
  ASSERT_TRUE(rd.hard_state);
  EXPECT_EQ(rd.hard_state->commit(), 10u);
  PersistReady(s, rd);
  n.Advance(rd);
  EXPECT_EQ(n.GetStatus().applied, 10u);
  EXPECT_FALSE(n.HasReady());
  // Entries continue after it.
  ASSERT_TRUE(n.Step(Msg({.type = raftpb::MSG_APP,
                          .from = 2,
                          .to = 1,
                          .term = 3,
                          .log_term = 2,
                          .index = 10,
                          .commit = 11,
                          .entries = {E(11, 3, "x")}}))
                  .ok());
  auto applied = DrainReady(n, s);
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0].data(), "x");
}

TEST(RawNode, ReadIndexInReady) {
  TestStorage s({1});
  RawNode n(MakeConfig(1, &s, {}));
  n.Campaign();
  DrainReady(n, s);
  n.ReadIndex("ctx");
  ASSERT_TRUE(n.HasReady());
  Ready rd = n.GetReady();
  ASSERT_EQ(rd.read_states.size(), 1u);
  EXPECT_EQ(rd.read_states[0].request_ctx, "ctx");
  EXPECT_EQ(rd.read_states[0].index, 1u);
  n.Advance(rd);
  EXPECT_FALSE(n.HasReady());
}

TEST(RawNode, StatusAndReports) {
  TestStorage s({1, 2});
  RawNode n(MakeConfig(1, &s, {}));
  EXPECT_TRUE(n.GetStatus().progress.empty());
  n.Campaign();
  ASSERT_TRUE(n.Step(Msg({.type = raftpb::MSG_VOTE_RESP, .from = 2, .to = 1, .term = 1})).ok());
  NodeStatus st = n.GetStatus();
  EXPECT_EQ(st.soft_state.state, StateType::kLeader);
  ASSERT_EQ(st.progress.size(), 2u);
  EXPECT_EQ(st.hard_state.term(), 1u);
  // Snapshot reports move a follower out of snapshot state.
  n.raft().tracker().Get(2)->BecomeSnapshot(5);
  n.ReportSnapshot(2, SnapshotStatus::kFailure);
  EXPECT_EQ(n.raft().tracker().Get(2)->state, ProgressState::kProbe);
  n.raft().tracker().Get(2)->BecomeReplicate();
  n.ReportUnreachable(2);
  EXPECT_EQ(n.raft().tracker().Get(2)->state, ProgressState::kProbe);
}

// While partitioned, a leader's proposals stop being accepted once the uncommitted tail reaches
// the limit; once entries are committed and handed to the application, the budget is free.
TEST(RawNode, BoundedLogGrowthWithPartition) {
  const std::string data = "testdata";
  const uint64_t max_entries = 16;
  TestStorage s({1, 2});
  Opts o;
  o.max_uncommitted = max_entries * data.size();
  RawNode n(MakeConfig(1, &s, o));
  n.Campaign();
  ASSERT_TRUE(n.Step(Msg({.type = raftpb::MSG_VOTE_RESP, .from = 2, .to = 1, .term = 1})).ok());
  ASSERT_EQ(n.raft().state(), StateType::kLeader);
  ASSERT_TRUE(
      n.Step(Msg({.type = raftpb::MSG_APP_RESP, .from = 2, .to = 1, .term = 1, .index = 1})).ok());
  DrainReady(n, s);
  // 2 is unreachable: nothing commits.
  int accepted = 0;
  for (int i = 0; i < 1024; ++i) accepted += n.Propose(data).ok();
  EXPECT_EQ(accepted, static_cast<int>(max_entries));
  EXPECT_EQ(n.raft().uncommitted_size(), max_entries * data.size());
  DrainReady(n, s);
  EXPECT_FALSE(n.Propose(data).ok());
  // 2 comes back and acknowledges everything.
  ASSERT_TRUE(n.Step(Msg({.type = raftpb::MSG_APP_RESP,
                          .from = 2,
                          .to = 1,
                          .term = 1,
                          .index = n.raft().log().LastIndex()}))
                  .ok());
  auto applied = DrainReady(n, s);
  EXPECT_EQ(applied.size(), max_entries);
  EXPECT_EQ(n.raft().uncommitted_size(), 0u);
  EXPECT_TRUE(n.Propose(data).ok());
}

TEST(RawNode, TransferLeader) {
  TestStorage s({1, 2});
  RawNode n(MakeConfig(1, &s, {}));
  n.Campaign();
  ASSERT_TRUE(n.Step(Msg({.type = raftpb::MSG_VOTE_RESP, .from = 2, .to = 1, .term = 1})).ok());
  ASSERT_TRUE(
      n.Step(Msg({.type = raftpb::MSG_APP_RESP, .from = 2, .to = 1, .term = 1, .index = 1})).ok());
  DrainReady(n, s);
  n.TransferLeader(2);
  Ready rd = n.GetReady();
  ASSERT_EQ(rd.messages.size(), 1u);
  EXPECT_EQ(rd.messages[0].type(), raftpb::MSG_TIMEOUT_NOW);
  EXPECT_EQ(rd.messages[0].to(), 2u);
  EXPECT_EQ(n.GetStatus().lead_transferee, 2u);
}

}  // namespace
}  // namespace etcdw::raft
