// Helpers shared by the Raft unit tests: entries and messages written tersely, members built on
// an in-memory storage with a given membership, and a "network" of Raft state machines that
// delivers messages synchronously (in the style of etcd's raft tests), with links that can be cut
// and message types that can be ignored.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "etcdw/raft/raft.h"
#include "etcdw/raft/raw_node.h"
#include "etcdw/raft/storage.h"

// Messages and structs are written with designated initializers that leave most fields to their
// defaults, which GCC 12's -Wextra reports.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace etcdw::raft::rafttest {

using raftpb::Entry;
using raftpb::Message;
using raftpb::MessageType;

inline Entry E(uint64_t index, uint64_t term, const std::string& data = "",
               raftpb::EntryType type = raftpb::ENTRY_NORMAL) {
  Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_type(type);
  if (!data.empty()) e.set_data(data);
  return e;
}

// Entries with indexes from, from+1, ... and the given terms.
inline std::vector<Entry> Terms(uint64_t from, std::initializer_list<uint64_t> terms) {
  std::vector<Entry> out;
  for (uint64_t t : terms) out.push_back(E(from++, t));
  return out;
}

// Entries [lo, hi) of one term.
inline std::vector<Entry> Range(uint64_t lo, uint64_t hi, uint64_t term) {
  std::vector<Entry> out;
  for (uint64_t i = lo; i < hi; ++i) out.push_back(E(i, term));
  return out;
}

inline raftpb::ConfChange CC(raftpb::ConfChangeType type, uint64_t node) {
  raftpb::ConfChange cc;
  cc.set_type(type);
  cc.set_node_id(node);
  return cc;
}

inline Entry ConfEntry(const raftpb::ConfChange& cc) {
  Entry e;
  e.set_type(raftpb::ENTRY_CONF_CHANGE);
  e.set_data(cc.SerializeAsString());
  return e;
}

inline raftpb::Snapshot Snap(uint64_t index, uint64_t term, std::vector<uint64_t> voters,
                             std::vector<uint64_t> learners = {}) {
  raftpb::Snapshot s;
  s.mutable_metadata()->set_index(index);
  s.mutable_metadata()->set_term(term);
  for (uint64_t v : voters) s.mutable_metadata()->mutable_conf_state()->add_voters(v);
  for (uint64_t l : learners) s.mutable_metadata()->mutable_conf_state()->add_learners(l);
  return s;
}

// A message, spelled with designated initializers in this field order.
struct M {
  MessageType type = raftpb::MSG_HUP;
  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t term = 0;
  uint64_t log_term = 0;
  uint64_t index = 0;
  uint64_t commit = 0;
  std::vector<Entry> entries;
  bool reject = false;
  uint64_t reject_hint = 0;
  std::string context;
  std::optional<raftpb::Snapshot> snapshot;
};

inline Message Msg(const M& s) {
  Message m;
  m.set_type(s.type);
  m.set_from(s.from);
  m.set_to(s.to);
  m.set_term(s.term);
  m.set_log_term(s.log_term);
  m.set_index(s.index);
  m.set_commit(s.commit);
  for (const auto& e : s.entries) *m.add_entries() = e;
  m.set_reject(s.reject);
  m.set_reject_hint(s.reject_hint);
  if (!s.context.empty()) m.set_context(s.context);
  if (s.snapshot) *m.mutable_snapshot() = *s.snapshot;
  return m;
}

// A local proposal of one entry.
inline Message Prop(uint64_t id, const std::string& data = "somedata") {
  return Msg({.type = raftpb::MSG_PROP, .from = id, .to = id, .entries = {E(0, 0, data)}});
}

inline Message Hup(uint64_t id) { return Msg({.type = raftpb::MSG_HUP, .from = id, .to = id}); }

inline std::string Str(const Message& m) {
  std::string s = std::string(MessageTypeName(m.type())) + " " + std::to_string(m.from()) + "->" +
                  std::to_string(m.to()) + " term=" + std::to_string(m.term()) +
                  " log_term=" + std::to_string(m.log_term()) +
                  " index=" + std::to_string(m.index()) + " commit=" + std::to_string(m.commit());
  if (m.reject()) s += " reject hint=" + std::to_string(m.reject_hint());
  if (m.entries_size()) {
    s += " entries=[";
    for (const auto& e : m.entries()) {
      s += std::to_string(e.index()) + "/" + std::to_string(e.term()) + " ";
    }
    s += "]";
  }
  if (m.has_snapshot()) s += " snap=" + std::to_string(m.snapshot().metadata().index());
  if (!m.context().empty()) s += " ctx=" + m.context();
  return s;
}

inline std::string Str(const std::vector<Message>& ms) {
  std::string s;
  for (const auto& m : ms) s += Str(m) + "\n";
  return s;
}

inline bool SameEntry(const Entry& a, const Entry& b) {
  return a.index() == b.index() && a.term() == b.term() && a.type() == b.type() &&
         a.data() == b.data();
}

inline std::string Str(const std::vector<Entry>& es) {
  std::string s;
  for (const auto& e : es) {
    s += std::to_string(e.index()) + "/" + std::to_string(e.term());
    if (!e.data().empty() && e.type() == raftpb::ENTRY_NORMAL) s += ":" + e.data();
    if (e.type() == raftpb::ENTRY_CONF_CHANGE) s += ":cc";
    s += " ";
  }
  return s;
}

// gtest assertion helper: entries equal as (index, term, type, data).
inline ::testing::AssertionResult EntriesEq(const std::vector<Entry>& got,
                                            const std::vector<Entry>& want) {
  bool eq =
      got.size() == want.size() && std::equal(got.begin(), got.end(), want.begin(), SameEntry);
  if (eq) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got [" << Str(got) << "] want [" << Str(want) << "]";
}

// MemoryStorage that reports a fixed membership until a snapshot brings one (etcd's tests seed
// the membership the same way; our MemoryStorage learns it only from snapshots).
class TestStorage : public MemoryStorage {
 public:
  explicit TestStorage(std::vector<uint64_t> voters = {}, std::vector<uint64_t> learners = {}) {
    for (uint64_t v : voters) cs_.add_voters(v);
    for (uint64_t l : learners) cs_.add_learners(l);
  }
  Result<std::pair<raftpb::HardState, raftpb::ConfState>> InitialState() const override {
    auto r = MemoryStorage::InitialState();
    if (!r.ok()) return r;
    auto v = r.value();
    if (v.second.voters_size() == 0 && v.second.learners_size() == 0) v.second = cs_;
    return v;
  }

 private:
  raftpb::ConfState cs_;
};

struct Opts {
  int election = 10;
  int heartbeat = 1;
  bool pre_vote = false;
  bool check_quorum = false;
  std::vector<uint64_t> learners;
  size_t max_inflight = 256;
  uint64_t max_size_per_msg = UINT64_MAX;
  uint64_t max_uncommitted = 0;
  uint64_t max_committed_size_per_ready = 64 << 20;
  uint64_t seed = 1;
};

inline Config MakeConfig(uint64_t id, const Storage* s, const Opts& o) {
  Config c;
  c.id = id;
  c.election_tick = o.election;
  c.heartbeat_tick = o.heartbeat;
  c.storage = s;
  c.max_size_per_msg = o.max_size_per_msg;
  c.max_inflight_msgs = o.max_inflight;
  c.max_uncommitted_entries_size = o.max_uncommitted;
  c.max_committed_size_per_ready = o.max_committed_size_per_ready;
  c.pre_vote = o.pre_vote;
  c.check_quorum = o.check_quorum;
  c.seed = o.seed;
  return c;
}

// A Raft state machine with the storage it reads. Empty when default-constructed (a Network
// fills such a slot with a fresh member); BlackHole() is a member that swallows messages.
struct TestRaft {
  std::unique_ptr<TestStorage> storage;
  std::unique_ptr<Raft> raft;
  bool black_hole = false;

  Raft* operator->() const { return raft.get(); }
  Raft& operator*() const { return *raft; }
};

inline TestRaft NewRaft(uint64_t id, std::unique_ptr<TestStorage> s, const Opts& o = {}) {
  TestRaft t;
  t.storage = std::move(s);
  t.raft = std::make_unique<Raft>(MakeConfig(id, t.storage.get(), o));
  return t;
}

inline TestRaft NewRaft(uint64_t id, std::vector<uint64_t> voters, const Opts& o = {}) {
  return NewRaft(id, std::make_unique<TestStorage>(voters, o.learners), o);
}

// Moves `r` into state `st` from its current term; a follower becomes one of `follower_term`
// following `lead`.
inline void BecomeState(Raft& r, StateType st, uint64_t follower_term, uint64_t lead) {
  switch (st) {
    case StateType::kFollower:
      r.BecomeFollower(follower_term, lead);
      break;
    case StateType::kPreCandidate:
      r.BecomePreCandidate();
      break;
    case StateType::kCandidate:
      r.BecomeCandidate();
      break;
    case StateType::kLeader:
      r.BecomeCandidate();
      r.BecomeLeader();
      break;
  }
}

// A member whose storage already holds `ents` and `hs`.
inline TestRaft NewRaftWithLog(uint64_t id, std::vector<uint64_t> voters,
                               const std::vector<Entry>& ents, raftpb::HardState hs = {},
                               const Opts& o = {}) {
  auto s = std::make_unique<TestStorage>(voters, o.learners);
  EXPECT_TRUE(s->Append(ents).ok());
  s->SetHardState(hs);
  return NewRaft(id, std::move(s), o);
}

inline TestRaft BlackHole() {
  TestRaft t;
  t.black_hole = true;
  return t;
}

inline raftpb::HardState HS(uint64_t term, uint64_t vote, uint64_t commit) {
  raftpb::HardState hs;
  hs.set_term(term);
  hs.set_vote(vote);
  hs.set_commit(commit);
  return hs;
}

inline std::vector<Message> ReadMsgs(Raft& r) {
  std::vector<Message> out = std::move(r.msgs);
  r.msgs.clear();
  return out;
}

inline std::vector<Message> ReadMsgs(Raft& r, MessageType type) {
  std::vector<Message> out;
  for (auto& m : ReadMsgs(r)) {
    if (m.type() == type) out.push_back(std::move(m));
  }
  return out;
}

// The whole log: [FirstIndex, LastIndex].
inline std::vector<Entry> AllEntries(const Log& l) {
  auto r = l.Slice(l.FirstIndex(), l.LastIndex() + 1, UINT64_MAX);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : std::vector<Entry>{};
}

inline std::string LogString(const Log& l) {
  return "committed=" + std::to_string(l.committed()) + " applied=" + std::to_string(l.applied()) +
         " first=" + std::to_string(l.FirstIndex()) + " [" + Str(AllEntries(l)) + "]";
}

// Makes a freshly elected leader's empty entry committed, persisted and applied, as the
// application would, so that tests start from a quiet leader.
inline void CommitNoopEntry(Raft& r, MemoryStorage& s) {
  ASSERT_EQ(r.state(), StateType::kLeader);
  for (uint64_t id : r.tracker().voters) {
    if (id == r.id()) continue;
    ASSERT_TRUE(r.Step(Msg({.type = raftpb::MSG_APP_RESP,
                            .from = id,
                            .to = r.id(),
                            .term = r.term(),
                            .index = r.log().LastIndex()}))
                    .ok());
  }
  ASSERT_EQ(r.log().committed(), r.log().LastIndex());
  ReadMsgs(r);
  auto unstable = r.log().UnstableEntries();
  ASSERT_TRUE(s.Append(unstable).ok());
  if (!unstable.empty()) r.log().StableTo(unstable.back().index(), unstable.back().term());
  r.log().AppliedTo(r.log().committed());
}

// Persists what the log holds unstable (as an application would) and marks it stable.
inline void Persist(Raft& r, MemoryStorage& s) {
  if (auto snap = r.log().UnstableSnapshot()) {
    raftpb::Snapshot copy = *snap;
    ASSERT_TRUE(s.ApplySnapshot(copy).ok());
    r.log().StableSnapTo(copy.metadata().index());
  }
  auto unstable = r.log().UnstableEntries();
  ASSERT_TRUE(s.Append(unstable).ok());
  if (!unstable.empty()) r.log().StableTo(unstable.back().index(), unstable.back().term());
}

// Persists the unstable part and applies everything committed (as an application would).
inline void PersistAndApply(Raft& r, MemoryStorage& s) {
  Persist(r, s);
  if (r.log().committed() > r.log().applied()) r.log().AppliedTo(r.log().committed());
}

// Raft members 1..n exchanging messages synchronously: Send delivers a message, then every
// message it produced, breadth first, until none is left. Links can be cut one way or both, and
// message types ignored.
class Network {
 public:
  // Slot i is member i+1; an empty slot becomes a fresh member of a cluster of all n members.
  explicit Network(std::vector<TestRaft> slots, const Opts& o = {}) {
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < slots.size(); ++i) ids.push_back(i + 1);
    for (size_t i = 0; i < slots.size(); ++i) {
      uint64_t id = i + 1;
      if (slots[i].black_hole) {
        black_holes_.insert(id);
      } else if (!slots[i].raft) {
        peers_[id] = NewRaft(id, ids, o);
      } else {
        EXPECT_EQ(slots[i]->id(), id);
        peers_[id] = std::move(slots[i]);
      }
    }
  }
  static Network Of(size_t n, const Opts& o = {}) {
    std::vector<TestRaft> slots(n);
    return Network(std::move(slots), o);
  }

  Raft& operator[](uint64_t id) { return *peers_.at(id); }
  Raft* Get(uint64_t id) { return peers_.count(id) ? peers_.at(id).raft.get() : nullptr; }
  TestStorage& StorageOf(uint64_t id) { return *peers_.at(id).storage; }
  std::vector<uint64_t> Ids() const {
    std::vector<uint64_t> ids;
    for (const auto& [id, p] : peers_) ids.push_back(id);
    return ids;
  }
  // Adds (or replaces) a member.
  void Put(uint64_t id, TestRaft r) {
    black_holes_.erase(id);
    peers_[id] = std::move(r);
  }

  void Send(const Message& m) { Send(std::vector<Message>{m}); }
  void Send(std::vector<Message> msgs) {
    std::deque<Message> q(msgs.begin(), msgs.end());
    while (!q.empty()) {
      Message m = std::move(q.front());
      q.pop_front();
      auto it = peers_.find(m.to());
      if (it == peers_.end()) continue;  // black hole, or nobody
      Raft& r = *it->second;
      (void)r.Step(m);
      for (auto& out : ReadMsgs(r)) {
        EXPECT_NE(out.type(), raftpb::MSG_HUP) << "MsgHup is never sent";
        if (Dropped(out)) continue;
        if (hook && !hook(out)) continue;
        q.push_back(std::move(out));
      }
    }
  }

  // Drops messages from -> to (one way).
  void Drop(uint64_t from, uint64_t to) { dropped_.insert({from, to}); }
  void Cut(uint64_t a, uint64_t b) {
    Drop(a, b);
    Drop(b, a);
  }
  void Isolate(uint64_t id) {
    for (uint64_t other : AllIds()) {
      if (other != id) Cut(id, other);
    }
  }
  void Ignore(MessageType t) { ignored_.insert(t); }
  // Sees every message about to be delivered; returning false drops it.
  std::function<bool(const Message&)> hook;
  void Recover() {
    dropped_.clear();
    ignored_.clear();
  }

 private:
  bool Dropped(const Message& m) const {
    return dropped_.count({m.from(), m.to()}) || ignored_.count(m.type());
  }
  std::set<uint64_t> AllIds() const {
    std::set<uint64_t> s(black_holes_);
    for (const auto& [id, p] : peers_) s.insert(id);
    return s;
  }

  std::map<uint64_t, TestRaft> peers_;
  std::set<uint64_t> black_holes_;
  std::set<std::pair<uint64_t, uint64_t>> dropped_;
  std::set<MessageType> ignored_;
};

// Member `id` of `nt` persists and applies what it has, snapshots its applied state and
// compacts its log up to it: a member cut off before that can catch up only by a snapshot.
inline void SnapshotAndCompact(Network& nt, uint64_t id) {
  Raft& r = nt[id];
  PersistAndApply(r, nt.StorageOf(id));
  raftpb::ConfState cs = r.tracker().ConfState();
  ASSERT_TRUE(nt.StorageOf(id).CreateSnapshot(r.log().applied(), &cs).ok());
  ASSERT_TRUE(nt.StorageOf(id).Compact(r.log().applied()).ok());
}

}  // namespace etcdw::raft::rafttest
