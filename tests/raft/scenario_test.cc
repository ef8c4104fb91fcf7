// Scenarios replayed step by step on a small in-process cluster: RawNodes over MemoryStorage
// (which survives crashes), an application loop per member (persist, send, apply, advance) and
// a message queue the test controls (deliver, drop, partition). After every step the harness
// checks Raft's safety properties:
//   election safety       at most one leader per term
//   durable state         per member, term and commit never go back, one vote per term
//   state machine safety  an index is applied with the same entry everywhere (committed entries
//                         never change)
//   leader completeness   a new leader's log holds every entry applied anywhere so far
//   log matching          (at quiescence) logs that agree on an entry agree on all before it
// and the Ready contract: committed entries handed to the application are durable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "raft/raft_test_util.h"

namespace etcdw::raft {
namespace {

using namespace rafttest;  // NOLINT(google-build-using-namespace)

struct Member {
  uint64_t id = 0;
  std::unique_ptr<MemoryStorage> storage;  // the durable part: survives a crash
  std::unique_ptr<RawNode> node;           // null while the member is down
  // The state machine: data of the normal entries applied, in order, and the configuration.
  std::vector<std::string> state;
  uint64_t applied = 0;
  raftpb::ConfState conf;
  std::vector<ReadState> reads;  // answers to ReadIndex requests, in order
};

class Cluster {
 public:
  // A cluster bootstrapped with `voters` (every member bootstraps the same configuration).
  explicit Cluster(std::vector<uint64_t> voters, Opts o = {.pre_vote = true, .check_quorum = true})
      : opts_(o) {
    std::vector<raftpb::ConfChange> peers;
    for (uint64_t id : voters) peers.push_back(CC(raftpb::CONF_CHANGE_ADD_NODE, id));
    for (uint64_t id : voters) {
      Member& m = Add(id);
      EXPECT_TRUE(m.node->Bootstrap(peers).ok());
    }
    Stabilize();
  }

  // A new member with empty storage, not bootstrapped: it learns everything from the leader.
  Member& Add(uint64_t id) {
    Member& m = members_[id];
    m.id = id;
    m.storage = std::make_unique<MemoryStorage>();
    m.node = std::make_unique<RawNode>(MakeConfig(id, m.storage.get(), WithSeed(id)));
    return m;
  }

  Member& M(uint64_t id) { return members_.at(id); }
  RawNode& N(uint64_t id) { return *members_.at(id).node; }
  Raft& R(uint64_t id) { return members_.at(id).node->raft(); }
  bool Up(uint64_t id) const { return members_.count(id) && members_.at(id).node; }
  std::vector<uint64_t> Ids() const {
    std::vector<uint64_t> ids;
    for (const auto& [id, m] : members_) ids.push_back(id);
    return ids;
  }
  std::vector<uint64_t> UpIds() const {
    std::vector<uint64_t> ids;
    for (const auto& [id, m] : members_) {
      if (m.node) ids.push_back(id);
    }
    return ids;
  }

  // A crash loses everything not persisted (unstable entries, messages not yet sent).
  void Crash(uint64_t id) { M(id).node.reset(); }
  // A restart rebuilds the member from its storage; the state machine restarts from the last
  // snapshot and replays the committed entries after it.
  void Restart(uint64_t id) {
    Member& m = M(id);
    ASSERT_FALSE(m.node);
    auto snap = m.storage->Snapshot().value();
    m.applied = snap.metadata().index();
    m.state = m.applied ? snapshot_state_.at(m.applied) : std::vector<std::string>{};
    m.conf = snap.metadata().conf_state();
    m.node = std::make_unique<RawNode>(MakeConfig(id, m.storage.get(), WithSeed(id + ++restarts_)));
  }

  void Cut(uint64_t a, uint64_t b) {
    cut_.insert({a, b});
    cut_.insert({b, a});
  }
  void Isolate(uint64_t id) {
    for (uint64_t other : Ids()) {
      if (other != id) Cut(id, other);
    }
  }
  void Partition(const std::set<uint64_t>& side) {
    for (uint64_t a : Ids()) {
      for (uint64_t b : Ids()) {
        if (side.count(a) != side.count(b)) Cut(a, b);
      }
    }
  }
  void Heal() { cut_.clear(); }
  bool Linked(uint64_t a, uint64_t b) const { return !cut_.count({a, b}); }

  void Tick(uint64_t id, int n = 1) {
    for (int i = 0; i < n; ++i) N(id).Tick();
  }
  void TickAll(int n = 1) {
    for (int i = 0; i < n; ++i) {
      for (uint64_t id : UpIds()) {
        N(id).Tick();
        ObserveLeader(R(id));
      }
    }
  }

  // The application loop of one member, once. Returns whether there was a Ready.
  bool ProcessReady(uint64_t id) {
    Member& m = M(id);
    if (!m.node || !m.node->HasReady()) return false;
    Ready rd = m.node->GetReady();
    Raft& r = m.node->raft();
    if (rd.soft_state && rd.soft_state->state == StateType::kLeader) OnLeader(m);
    for (const auto& rs : rd.read_states) m.reads.push_back(rs);
    // 1. Persist: snapshot, entries, hard state.
    if (rd.snapshot) {
      uint64_t index = rd.snapshot->metadata().index();
      EXPECT_TRUE(m.storage->ApplySnapshot(*rd.snapshot).ok());
      EXPECT_TRUE(snapshot_state_.count(index)) << "no state for snapshot " << index;
      m.state = snapshot_state_[index];
      m.applied = index;
      m.conf = rd.snapshot->metadata().conf_state();
    }
    EXPECT_TRUE(m.storage->Append(rd.entries).ok());
    if (rd.hard_state) {
      const raftpb::HardState& hs = *rd.hard_state;
      const raftpb::HardState prev = m.storage->InitialState()->first;
      EXPECT_LE(hs.commit(), m.storage->LastIndex()) << "commit beyond the durable log";
      // Durable state only moves forward: terms grow, a vote given in a term stays, the commit
      // index never goes back.
      EXPECT_GE(hs.term(), prev.term()) << "member " << id;
      if (hs.term() == prev.term() && prev.vote() != kNone) {
        EXPECT_EQ(hs.vote(), prev.vote()) << "member " << id << " voted twice in " << hs.term();
      }
      EXPECT_GE(hs.commit(), prev.commit()) << "member " << id;
      m.storage->SetHardState(hs);
    }
    for (const auto& e : rd.committed_entries) {
      EXPECT_LE(e.index(), m.storage->LastIndex()) << "committed entry applied before persisted";
    }
    // 2. Send (the transport merges the sender's current state into snapshots, as etcd does).
    for (Message msg : rd.messages) {
      if (msg.type() == raftpb::MSG_SNAP) MergeSnapshot(m, msg);
      queue_.push_back(std::move(msg));
    }
    // 3. Apply.
    for (const auto& e : rd.committed_entries) Apply(m, e);
    // 4. Advance.
    m.node->Advance(rd);
    ObserveLeader(r);
    return true;
  }

  // Delivers the message at position i of the queue (or drops it if its link is cut or its
  // receiver is down). A delivered or dropped snapshot is reported to its sender.
  void DeliverAt(size_t i) {
    Message msg = std::move(queue_[i]);
    queue_.erase(queue_.begin() + static_cast<long>(i));
    bool ok = Up(msg.to()) && Linked(msg.from(), msg.to());
    if (ok) {
      (void)N(msg.to()).Step(msg);
      ObserveLeader(R(msg.to()));
    }
    if (msg.type() == raftpb::MSG_SNAP && Up(msg.from())) {
      N(msg.from())
          .ReportSnapshot(msg.to(), ok ? SnapshotStatus::kFinish : SnapshotStatus::kFailure);
    }
  }
  void DropAll() { queue_.clear(); }
  size_t Queued() const { return queue_.size(); }

  // Processes Readies and delivers messages until nothing moves.
  void Stabilize(int max_rounds = 10000) {
    for (int round = 0; round < max_rounds; ++round) {
      bool moved = false;
      for (uint64_t id : UpIds()) moved |= ProcessReady(id);
      while (!queue_.empty()) {
        DeliverAt(0);
        moved = true;
      }
      if (!moved) {
        CheckLogMatching();
        return;
      }
    }
    ADD_FAILURE() << "cluster did not stabilize";
  }

  // Ticks every member until one is leader and its followers agree (at most `max_ticks`).
  uint64_t ElectByTicks(int max_ticks = 200) {
    for (int i = 0; i < max_ticks; ++i) {
      TickAll();
      Stabilize();
      if (uint64_t l = Leader()) return l;
    }
    return 0;
  }

  // The leader among the members that are up, if exactly one thinks so at the highest term.
  uint64_t Leader() {
    uint64_t lead = 0, term = 0;
    for (uint64_t id : UpIds()) {
      if (R(id).state() == StateType::kLeader && R(id).term() >= term) {
        lead = id;
        term = R(id).term();
      }
    }
    return lead;
  }

  Status Propose(uint64_t id, const std::string& data) {
    Status st = N(id).Propose(data);
    return st;
  }
  Status ProposeConfChange(uint64_t id, raftpb::ConfChangeType type, uint64_t node) {
    return N(id).ProposeConfChange(CC(type, node));
  }

  // Snapshot at the applied index and compaction of the log up to it (as etcd does every
  // --snapshot-count entries).
  void Compact(uint64_t id) {
    Member& m = M(id);
    if (m.applied <= m.storage->Snapshot()->metadata().index()) return;
    RecordState(m.applied, m.state);
    ASSERT_TRUE(m.storage->CreateSnapshot(m.applied, &m.conf).ok());
    ASSERT_TRUE(m.storage->Compact(m.applied).ok());
  }

  // Every up member (or each of `only`) applied the same entries and is at the same commit index.
  void ExpectConverged(std::vector<uint64_t> only = {}) {
    auto ids = only.empty() ? UpIds() : only;
    ASSERT_FALSE(ids.empty());
    const Member& first = M(ids[0]);
    for (uint64_t id : ids) {
      const Member& m = M(id);
      EXPECT_EQ(m.applied, first.applied) << "member " << id;
      EXPECT_EQ(m.state, first.state) << "member " << id;
      EXPECT_EQ(R(id).log().committed(), R(ids[0]).log().committed()) << "member " << id;
      EXPECT_EQ(R(id).log().LastIndex(), R(ids[0]).log().LastIndex()) << "member " << id;
    }
  }

  std::set<uint64_t> Voters(uint64_t id) {
    const auto& cs = M(id).conf;
    return std::set<uint64_t>(cs.voters().begin(), cs.voters().end());
  }
  std::set<uint64_t> Learners(uint64_t id) {
    const auto& cs = M(id).conf;
    return std::set<uint64_t>(cs.learners().begin(), cs.learners().end());
  }

  std::mt19937_64 rng{1};

  // Random schedule helpers.
  void DeliverRandom() {
    if (queue_.empty()) return;
    DeliverAt(std::uniform_int_distribution<size_t>(0, queue_.size() - 1)(rng));
  }
  // Delivers a copy of a random message now (the original stays queued): a duplicate.
  void DuplicateRandom() {
    if (queue_.empty()) return;
    size_t i = std::uniform_int_distribution<size_t>(0, queue_.size() - 1)(rng);
    Message msg = queue_[i];
    if (msg.type() == raftpb::MSG_SNAP) return;  // keeps the snapshot report simple
    queue_.push_back(msg);
    DeliverAt(queue_.size() - 1);
  }

  // Loses a random message. A lost snapshot is reported as failed, as the transport must.
  void DropRandom() {
    if (queue_.empty()) return;
    size_t i = std::uniform_int_distribution<size_t>(0, queue_.size() - 1)(rng);
    Message msg = std::move(queue_[i]);
    queue_.erase(queue_.begin() + static_cast<long>(i));
    if (msg.type() == raftpb::MSG_SNAP && Up(msg.from())) {
      N(msg.from()).ReportSnapshot(msg.to(), SnapshotStatus::kFailure);
    }
  }

 private:
  Opts WithSeed(uint64_t seed) const {
    Opts o = opts_;
    o.seed = seed;
    return o;
  }

  void RecordState(uint64_t index, const std::vector<std::string>& state) {
    auto [it, inserted] = snapshot_state_.emplace(index, state);
    if (!inserted) {
      EXPECT_EQ(it->second, state) << "two states at index " << index;
    }
  }

  void MergeSnapshot(Member& m, Message& msg) {
    auto* md = msg.mutable_snapshot()->mutable_metadata();
    ASSERT_GE(m.applied, md->index());
    md->set_index(m.applied);
    md->set_term(m.storage->Term(m.applied).value());
    *md->mutable_conf_state() = m.conf;
    RecordState(m.applied, m.state);
  }

  void Apply(Member& m, const Entry& e) {
    ASSERT_EQ(e.index(), m.applied + 1) << "member " << m.id << " applies out of order";
    auto [it, inserted] = committed_.emplace(e.index(), e);
    EXPECT_TRUE(SameEntry(it->second, e))
        << "member " << m.id << " applies a different entry at " << e.index() << ": "
        << Str(std::vector<Entry>{e}) << " vs " << Str(std::vector<Entry>{it->second});
    m.applied = e.index();
    if (e.type() == raftpb::ENTRY_CONF_CHANGE) {
      raftpb::ConfChange cc;
      ASSERT_TRUE(cc.ParseFromString(e.data()));
      m.conf = m.node->ApplyConfChange(cc);
    } else if (!e.data().empty()) {
      m.state.push_back(e.data());
    }
  }

  // Election safety: at most one leader per term, ever.
  void ObserveLeader(const Raft& r) {
    if (r.state() != StateType::kLeader) return;
    auto [it, inserted] = leaders_.emplace(r.term(), r.id());
    EXPECT_EQ(it->second, r.id()) << "two leaders in term " << r.term();
  }

  void OnLeader(const Member& m) {
    const Raft& r = m.node->raft();
    ObserveLeader(r);
    // Leader completeness: everything applied anywhere is in the new leader's log.
    for (const auto& [index, e] : committed_) {
      if (index < r.log().FirstIndex()) continue;  // compacted: covered by its snapshot
      EXPECT_EQ(r.log().TermOrZero(index), e.term())
          << "leader " << m.id << " (term " << r.term() << ") lacks committed entry " << index;
    }
  }

  // Log matching on the durable logs of the members that are up.
  void CheckLogMatching() {
    auto ids = UpIds();
    for (size_t a = 0; a < ids.size(); ++a) {
      for (size_t b = a + 1; b < ids.size(); ++b) {
        const MemoryStorage& sa = *M(ids[a]).storage;
        const MemoryStorage& sb = *M(ids[b]).storage;
        uint64_t lo = std::max(sa.FirstIndex(), sb.FirstIndex());
        uint64_t hi = std::min(sa.LastIndex(), sb.LastIndex());
        if (lo > hi) continue;
        auto ea = sa.Entries(lo, hi + 1, UINT64_MAX).value();
        auto eb = sb.Entries(lo, hi + 1, UINT64_MAX).value();
        // The last index where both have the same term: everything before must be identical.
        size_t agree = ea.size();
        while (agree > 0 && ea[agree - 1].term() != eb[agree - 1].term()) --agree;
        for (size_t i = 0; i < agree; ++i) {
          EXPECT_TRUE(SameEntry(ea[i], eb[i])) << "log matching violated between " << ids[a]
                                               << " and " << ids[b] << " at " << ea[i].index();
        }
      }
    }
  }

  Opts opts_;
  std::map<uint64_t, Member> members_;
  std::deque<Message> queue_;
  std::set<std::pair<uint64_t, uint64_t>> cut_;
  std::map<uint64_t, uint64_t> leaders_;  // term -> leader
  std::map<uint64_t, Entry> committed_;   // index -> the entry applied there
  std::map<uint64_t, std::vector<std::string>> snapshot_state_;
  uint64_t restarts_ = 100;
};

// ---------------------------------------------------------------------------------------------

class Scenario : public ::testing::TestWithParam<bool> {
 protected:
  Opts O() const { return {.pre_vote = GetParam(), .check_quorum = true}; }
};

TEST_P(Scenario, ElectionWithThreeMembers) {
  Cluster c({1, 2, 3}, O());
  uint64_t lead = c.ElectByTicks();
  ASSERT_NE(lead, 0u);
  for (uint64_t id : {1, 2, 3}) {
    EXPECT_EQ(c.R(id).lead(), lead) << id;
    EXPECT_EQ(c.R(id).term(), c.R(lead).term()) << id;
  }
  ASSERT_TRUE(c.Propose(lead, "a").ok());
  c.Stabilize();
  c.ExpectConverged();
  EXPECT_EQ(c.M(1).state, std::vector<std::string>({"a"}));
  // Heartbeats keep the leader in place: no election for a long while.
  uint64_t term = c.R(lead).term();
  for (int i = 0; i < 100; ++i) {
    c.TickAll();
    c.Stabilize();
  }
  EXPECT_EQ(c.Leader(), lead);
  EXPECT_EQ(c.R(lead).term(), term);
}

TEST_P(Scenario, ElectionWithFiveMembers) {
  Cluster c({1, 2, 3, 4, 5}, O());
  uint64_t lead = c.ElectByTicks();
  ASSERT_NE(lead, 0u);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(c.Propose(lead, "v" + std::to_string(i)).ok());
  c.Stabilize();
  c.ExpectConverged();
  EXPECT_EQ(c.M(5).state.size(), 10u);
  // A follower's proposal is forwarded to the leader.
  uint64_t follower = lead == 1 ? 2 : 1;
  ASSERT_TRUE(c.Propose(follower, "via follower").ok());
  c.Stabilize();
  c.ExpectConverged();
  EXPECT_EQ(c.M(lead).state.back(), "via follower");
}

// The leader crashes: the others elect a new one and go on; the old leader restarts from its
// storage, learns the new leader and catches up.
TEST_P(Scenario, LeaderCrashAndReelection) {
  Cluster c({1, 2, 3}, O());
  uint64_t lead = c.ElectByTicks();
  ASSERT_NE(lead, 0u);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.Propose(lead, "before" + std::to_string(i)).ok());
  c.Stabilize();
  c.Crash(lead);
  uint64_t next = c.ElectByTicks();
  ASSERT_NE(next, 0u);
  EXPECT_NE(next, lead);
  EXPECT_GT(c.R(next).term(), 1u);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.Propose(next, "after" + std::to_string(i)).ok());
  c.Stabilize();
  c.Restart(lead);
  for (int i = 0; i < 30 && c.R(lead).lead() != next; ++i) {
    c.TickAll();
    c.Stabilize();
  }
  EXPECT_EQ(c.R(lead).state(), StateType::kFollower);
  EXPECT_EQ(c.R(lead).lead(), next);
  c.ExpectConverged();
  EXPECT_EQ(c.M(lead).state.size(), 10u);
}

// A minority leader cannot commit; the majority elects a new leader that can; after healing the
// old leader steps down, its uncommitted entries are discarded and all logs converge.
TEST_P(Scenario, PartitionedMinorityLeader) {
  Cluster c({1, 2, 3, 4, 5}, O());
  uint64_t old = c.ElectByTicks();
  ASSERT_NE(old, 0u);
  ASSERT_TRUE(c.Propose(old, "committed").ok());
  c.Stabilize();
  std::set<uint64_t> minority = {old, old % 5 + 1};
  c.Partition(minority);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.Propose(old, "lost" + std::to_string(i)).ok());
  c.Stabilize();
  uint64_t commit_before = c.R(old).log().committed();
  uint64_t term_before = c.R(old).term();
  // The majority elects a leader of its own.
  uint64_t lead = 0;
  for (int i = 0; i < 200 && !lead; ++i) {
    c.TickAll();
    c.Stabilize();
    for (uint64_t id : c.UpIds()) {
      if (!minority.count(id) && c.R(id).state() == StateType::kLeader) lead = id;
    }
  }
  ASSERT_NE(lead, 0u);
  EXPECT_GT(c.R(lead).term(), term_before);
  ASSERT_TRUE(c.Propose(lead, "majority").ok());
  c.Stabilize();
  EXPECT_GT(c.R(lead).log().committed(), commit_before);
  // The minority leader never committed its entries. With check-quorum it steps down within two
  // election timeouts (answers received just before the partition count for the first check).
  EXPECT_EQ(c.R(old).log().committed(), commit_before);
  for (int i = 0; i < 20; ++i) {
    c.TickAll();
    c.Stabilize();
  }
  EXPECT_NE(c.R(old).state(), StateType::kLeader);
  EXPECT_EQ(c.R(old).log().committed(), commit_before);
  c.Heal();
  for (int i = 0; i < 30; ++i) {
    c.TickAll();
    c.Stabilize();
  }
  // With pre-vote the minority's terms did not move and the majority's leader stays; without
  // it, the minority comes back with higher terms and forces a new election (which it cannot
  // win: its logs are behind).
  if (GetParam()) {
    EXPECT_EQ(c.Leader(), lead);
  }
  ASSERT_NE(c.Leader(), 0u);
  EXPECT_FALSE(minority.count(c.Leader()));
  c.ExpectConverged();
  for (uint64_t id : c.Ids()) {
    EXPECT_EQ(c.M(id).state, std::vector<std::string>({"committed", "majority"})) << id;
  }
}

// Without check-quorum an isolated leader stays leader; on healing it learns the newer term from
// the answers to its messages and steps down.
TEST(ScenarioPlain, OldLeaderStepsDownOnHeal) {
  Cluster c({1, 2, 3}, {.pre_vote = false, .check_quorum = false});
  uint64_t old = c.ElectByTicks();
  ASSERT_NE(old, 0u);
  c.Isolate(old);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.Propose(old, "stale" + std::to_string(i)).ok());
  uint64_t lead = 0;
  for (int i = 0; i < 200 && !lead; ++i) {
    c.TickAll();
    c.Stabilize();
    for (uint64_t id : c.UpIds()) {
      if (id != old && c.R(id).state() == StateType::kLeader) lead = id;
    }
  }
  ASSERT_NE(lead, 0u);
  EXPECT_EQ(c.R(old).state(), StateType::kLeader);  // it does not know yet
  ASSERT_TRUE(c.Propose(lead, "new").ok());
  c.Stabilize();
  c.Heal();
  for (int i = 0; i < 5; ++i) {
    c.TickAll();
    c.Stabilize();
  }
  EXPECT_EQ(c.R(old).state(), StateType::kFollower);
  EXPECT_EQ(c.R(old).lead(), lead);
  c.ExpectConverged();
  EXPECT_EQ(c.M(old).state, std::vector<std::string>({"new"}));
}

// Divergent logs are repaired: a follower holding a long tail of entries from an old term that
// never committed has it replaced with the leader's entries.
TEST_P(Scenario, LogDivergenceRepair) {
  Cluster c({1, 2, 3, 4, 5}, O());
  uint64_t a = c.ElectByTicks();
  ASSERT_NE(a, 0u);
  ASSERT_TRUE(c.Propose(a, "base").ok());
  c.Stabilize();
  // a and one follower get 20 entries that never commit.
  uint64_t b = a % 5 + 1;
  c.Partition({a, b});
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(c.Propose(a, "doomed" + std::to_string(i)).ok());
  c.Stabilize();
  ASSERT_EQ(c.R(b).log().LastIndex(), c.R(a).log().LastIndex());
  // The other three write 10 entries of a newer term.
  c.Crash(a);
  c.Heal();
  c.Isolate(b);
  uint64_t lead = c.ElectByTicks();
  ASSERT_NE(lead, 0u);
  ASSERT_NE(lead, b);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(c.Propose(lead, "good" + std::to_string(i)).ok());
  c.Stabilize();
  // b rejoins: its tail is truncated and replaced; a comes back too.
  c.Heal();
  c.Restart(a);
  for (int i = 0; i < 30; ++i) {
    c.TickAll();
    c.Stabilize();
  }
  c.ExpectConverged();
  auto& st = c.M(b).state;
  ASSERT_EQ(st.size(), 11u);
  EXPECT_EQ(st[0], "base");
  EXPECT_EQ(st[10], "good9");
  EXPECT_EQ(c.R(b).log().LastIndex(), c.R(lead).log().LastIndex());
}

// A follower far behind a compacted log catches up by snapshot, then by entries.
TEST_P(Scenario, FollowerCatchesUpViaSnapshot) {
  Cluster c({1, 2, 3}, O());
  uint64_t lead = c.ElectByTicks();
  ASSERT_NE(lead, 0u);
  uint64_t lagging = lead % 3 + 1;
  c.Crash(lagging);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(c.Propose(lead, "e" + std::to_string(i)).ok());
  c.Stabilize();
  for (uint64_t id : c.UpIds()) c.Compact(id);
  ASSERT_GT(c.M(lead).storage->FirstIndex(), c.M(lagging).storage->LastIndex() + 1);
  c.Restart(lagging);
  for (int i = 0; i < 30; ++i) {
    c.TickAll();
    c.Stabilize();
  }
  EXPECT_EQ(c.M(lagging).storage->Snapshot()->metadata().index(),
            c.M(lead).storage->Snapshot()->metadata().index());
  c.ExpectConverged();
  EXPECT_EQ(c.M(lagging).state.size(), 50u);
  // Replication continues normally afterwards.
  ASSERT_TRUE(c.Propose(lead, "after").ok());
  c.Stabilize();
  c.ExpectConverged();
  EXPECT_EQ(c.M(lagging).state.back(), "after");
  EXPECT_EQ(c.R(lead).tracker().Get(lagging)->state, ProgressState::kReplicate);
}

// Scale-up 1 -> 3 the way etcd-druid does it: add a learner, let it catch up (here through a
// snapshot), promote it; repeat. The grown cluster survives the loss of its first member.
TEST_P(Scenario, ScaleUpOneToThree) {
  Cluster c({1}, O());
  ASSERT_EQ(c.ElectByTicks(), 1u);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(c.Propose(1, "d" + std::to_string(i)).ok());
  c.Stabilize();
  c.Compact(1);
  for (uint64_t id : {2, 3}) {
    c.Add(id);
    ASSERT_TRUE(c.ProposeConfChange(1, raftpb::CONF_CHANGE_ADD_LEARNER_NODE, id).ok());
    for (int i = 0; i < 10; ++i) {
      c.TickAll();
      c.Stabilize();
    }
    EXPECT_TRUE(c.Learners(1).count(id));
    EXPECT_TRUE(c.Learners(id).count(id)) << "the learner knows it is one";
    EXPECT_EQ(c.M(id).state, c.M(1).state);
    EXPECT_EQ(c.R(1).tracker().Get(id)->match, c.R(1).log().LastIndex());
    ASSERT_TRUE(c.ProposeConfChange(1, raftpb::CONF_CHANGE_ADD_NODE, id).ok());
    c.Stabilize();
    EXPECT_TRUE(c.Voters(1).count(id));
    EXPECT_TRUE(c.Voters(id).count(id));
    EXPECT_TRUE(c.Learners(1).empty());
    ASSERT_TRUE(c.Propose(1, "with " + std::to_string(id)).ok());
    c.Stabilize();
    c.ExpectConverged();
  }
  EXPECT_EQ(c.Voters(3), std::set<uint64_t>({1, 2, 3}));
  c.Crash(1);
  uint64_t lead = c.ElectByTicks();
  ASSERT_TRUE(lead == 2 || lead == 3) << lead;
  ASSERT_TRUE(c.Propose(lead, "without 1").ok());
  c.Stabilize();
  c.ExpectConverged();
  EXPECT_EQ(c.M(2).state.back(), "without 1");
}

// Removing a member: the rest goes on with the smaller quorum; the removed member, still
// running, neither receives anything nor disturbs the cluster. Then the leader removes itself:
// it steps down and the remaining member elects itself.
TEST_P(Scenario, RemoveMember) {
  Cluster c({1, 2, 3}, O());
  uint64_t lead = c.ElectByTicks();
  ASSERT_NE(lead, 0u);
  uint64_t gone = lead % 3 + 1;
  ASSERT_TRUE(c.ProposeConfChange(lead, raftpb::CONF_CHANGE_REMOVE_NODE, gone).ok());
  c.Stabilize();
  EXPECT_FALSE(c.Voters(lead).count(gone));
  EXPECT_EQ(c.Voters(lead).size(), 2u);
  uint64_t term = c.R(lead).term();
  uint64_t gone_last = c.R(gone).log().LastIndex();
  for (int i = 0; i < 100; ++i) {
    c.TickAll();
    c.Stabilize();
  }
  EXPECT_EQ(c.Leader(), lead);
  EXPECT_EQ(c.R(lead).term(), term);
  ASSERT_TRUE(c.Propose(lead, "two left").ok());
  c.Stabilize();
  EXPECT_EQ(c.R(gone).log().LastIndex(), gone_last);
  uint64_t other = 6 - lead - gone;
  EXPECT_EQ(c.M(other).state.back(), "two left");
  // The leader removes itself.
  ASSERT_TRUE(c.ProposeConfChange(lead, raftpb::CONF_CHANGE_REMOVE_NODE, lead).ok());
  c.Stabilize();
  EXPECT_NE(c.R(lead).state(), StateType::kLeader);
  c.Crash(gone);
  uint64_t next = c.ElectByTicks();
  EXPECT_EQ(next, other);
  EXPECT_EQ(c.Voters(other), std::set<uint64_t>({other}));
  ASSERT_TRUE(c.Propose(other, "one left").ok());
  c.Stabilize();
  EXPECT_EQ(c.M(other).state.back(), "one left");
}

// Leadership transfer to an up-to-date member, then to one that lags behind.
TEST_P(Scenario, LeadershipTransfer) {
  Cluster c({1, 2, 3}, O());
  uint64_t lead = c.ElectByTicks();
  ASSERT_NE(lead, 0u);
  uint64_t to = lead % 3 + 1;
  c.N(lead).TransferLeader(to);
  c.Stabilize();
  EXPECT_EQ(c.Leader(), to);
  for (uint64_t id : {1, 2, 3}) EXPECT_EQ(c.R(id).lead(), to);
  // Transfer to a member that missed entries.
  uint64_t lagging = to % 3 + 1;
  c.Isolate(lagging);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.Propose(to, "x" + std::to_string(i)).ok());
  c.Stabilize();
  c.Heal();
  c.N(to).TransferLeader(lagging);
  c.Stabilize();
  for (int i = 0; i < 5 && c.Leader() != lagging; ++i) {
    c.TickAll();
    c.Stabilize();
  }
  EXPECT_EQ(c.Leader(), lagging);
  ASSERT_TRUE(c.Propose(lagging, "new leader").ok());
  c.Stabilize();
  c.ExpectConverged();
  EXPECT_EQ(c.M(1).state.size(), 6u);
}

// Linearizable reads: a ReadIndex answered on any member is at least the commit index of every
// write acknowledged before the request.
TEST_P(Scenario, ReadIndexAfterWrites) {
  Cluster c({1, 2, 3}, O());
  uint64_t lead = c.ElectByTicks();
  ASSERT_NE(lead, 0u);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(c.Propose(lead, "w" + std::to_string(round)).ok());
    c.Stabilize();
    uint64_t committed = c.R(lead).log().committed();
    for (uint64_t id : {1, 2, 3}) {
      std::string ctx = "r" + std::to_string(round) + "-" + std::to_string(id);
      c.N(id).ReadIndex(ctx);
      c.Stabilize();
      ASSERT_FALSE(c.M(id).reads.empty()) << ctx;
      EXPECT_EQ(c.M(id).reads.back().request_ctx, ctx);
      EXPECT_GE(c.M(id).reads.back().index, committed) << ctx;
      EXPECT_LE(c.M(id).reads.back().index, c.M(id).applied) << "served once applied";
    }
  }
  // A read on a member cut off from the leader is not answered.
  uint64_t f = lead % 3 + 1;
  c.Isolate(f);
  size_t before = c.M(f).reads.size();
  c.N(f).ReadIndex("cut off");
  c.Stabilize();
  EXPECT_EQ(c.M(f).reads.size(), before);
}

INSTANTIATE_TEST_SUITE_P(Raft, Scenario, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "PreVote" : "Plain"; });

// ---------------------------------------------------------------------------------------------
// Randomized schedules: ticks, proposals, delivery in random order, drops, partitions, crashes,
// restarts, compactions and transfers, all from one seed; the invariants are checked throughout,
// and in the end, with the faults gone, the cluster must converge.

class RandomSchedule : public ::testing::TestWithParam<uint64_t> {};

TEST_P(RandomSchedule, SafetyAndConvergence) {
  const uint64_t seed = GetParam();
  // The seed also picks the configuration: pre-vote or not; tight flow control (two messages in
  // flight, one entry per message); one committed entry per Ready.
  Opts o = {.pre_vote = seed % 2 == 0, .check_quorum = true, .seed = seed};
  if (seed % 3 == 0) {
    o.max_inflight = 2;
    o.max_size_per_msg = 0;
  }
  if (seed % 5 == 0) o.max_committed_size_per_ready = 0;
  Cluster c({1, 2, 3, 4, 5}, o);
  c.rng.seed(seed);
  auto& rng = c.rng;
  auto pick = [&](const std::vector<uint64_t>& ids) {
    return ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
  };
  int proposals = 0;
  uint64_t next_id = 6;
  for (int step = 0; step < 1500; ++step) {
    int op = std::uniform_int_distribution<int>(0, 99)(rng);
    auto up = c.UpIds();
    if (op < 30) {
      c.TickAll();
    } else if (op < 45) {
      uint64_t id = pick(up);
      if (c.Propose(id, "p" + std::to_string(proposals)).ok()) ++proposals;
    } else if (op < 78) {
      size_t n = 5 + c.Queued() / 8;  // keep the backlog bounded
      for (size_t i = 0; i < n; ++i) c.DeliverRandom();
    } else if (op < 80) {
      c.DuplicateRandom();
    } else if (op < 83) {
      c.DropRandom();
    } else if (op < 86) {
      std::set<uint64_t> side;
      for (uint64_t id : c.Ids()) {
        if (rng() % 2) side.insert(id);
      }
      c.Heal();
      c.Partition(side);
    } else if (op < 90) {
      c.Heal();
    } else if (op < 92) {
      if (up.size() > 3) c.Crash(pick(up));
    } else if (op < 95) {
      for (uint64_t id : c.Ids()) {
        if (!c.Up(id)) {
          c.Restart(id);
          break;
        }
      }
    } else if (op < 97) {
      c.Compact(pick(up));
    } else if (op < 98) {
      uint64_t lead = c.Leader();
      if (lead) c.N(lead).TransferLeader(pick(up));
    } else if (uint64_t lead = c.Leader()) {
      // Membership: add a fresh learner, promote one, or remove a voter (maybe the leader).
      const raftpb::ConfState& cs = c.M(lead).conf;
      int kind = static_cast<int>(rng() % 3);
      if (kind == 0 && cs.voters_size() > 3) {
        uint64_t victim = cs.voters(static_cast<int>(rng() % cs.voters_size()));
        (void)c.ProposeConfChange(lead, raftpb::CONF_CHANGE_REMOVE_NODE, victim);
      } else if (kind == 1 && cs.learners_size() > 0) {
        (void)c.ProposeConfChange(lead, raftpb::CONF_CHANGE_ADD_NODE, cs.learners(0));
      } else if (cs.voters_size() + cs.learners_size() < 7) {
        uint64_t id = next_id++;
        c.Add(id);
        (void)c.ProposeConfChange(lead, raftpb::CONF_CHANGE_ADD_LEARNER_NODE, id);
      }
    }
    // Every member runs its application loop regularly.
    for (uint64_t id : c.UpIds()) c.ProcessReady(id);
    if (::testing::Test::HasFailure()) FAIL() << "seed " << seed << " step " << step;
  }
  // Faults end: everybody up and connected; a leader emerges and everything converges.
  c.Heal();
  for (uint64_t id : c.Ids()) {
    if (!c.Up(id)) c.Restart(id);
  }
  uint64_t lead = c.ElectByTicks(500);
  ASSERT_NE(lead, 0u) << "seed " << seed;
  // A leadership transfer still pending drops proposals until it completes or times out; a
  // leader that removes itself hands over to another one.
  bool proposed = false;
  for (int i = 0; i < 200 && !proposed; ++i) {
    lead = c.Leader();
    proposed = lead && c.Propose(lead, "final").ok();
    c.TickAll();
    c.Stabilize();
  }
  ASSERT_TRUE(proposed) << "seed " << seed;
  for (int i = 0; i < 50; ++i) {
    c.TickAll();
    c.Stabilize();
  }
  lead = c.Leader();
  ASSERT_NE(lead, 0u) << "seed " << seed;
  // The members of the final configuration converge; removed members are out of it.
  std::vector<uint64_t> members;
  for (uint64_t id : c.M(lead).conf.voters()) members.push_back(id);
  for (uint64_t id : c.M(lead).conf.learners()) members.push_back(id);
  c.ExpectConverged(members);
  EXPECT_EQ(c.M(lead).state.back(), "final") << "seed " << seed;
  for (uint64_t id : members) EXPECT_EQ(c.Voters(id), c.Voters(lead)) << "seed " << seed;
}

// 100 seeds by default (about a second); ETCDW_RAFT_SEEDS=N runs N of them (thousands pass).
uint64_t SeedCount() {
  const char* env = std::getenv("ETCDW_RAFT_SEEDS");
  return env ? std::max<uint64_t>(1, std::strtoull(env, nullptr, 10)) : 100;
}

INSTANTIATE_TEST_SUITE_P(Raft, RandomSchedule, ::testing::Range<uint64_t>(1, SeedCount() + 1));

}  // namespace
}  // namespace etcdw::raft
