#include "sim/sim_cluster.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "etcdw/raft/raw_node.h"
#include "etcdw/raft/storage.h"
#include "sim/kv_state_machine.h"
#include "sim/linearizability.h"

namespace etcdw::sim {
namespace {

using raft::RawNode;
using raft::Ready;

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

std::string N(uint64_t v) { return std::to_string(v); }

bool SameEntry(const raftpb::Entry& a, const raftpb::Entry& b) {
  return a.index() == b.index() && a.term() == b.term() && a.type() == b.type() &&
         a.data() == b.data();
}

std::string Str(const raftpb::Entry& e) {
  return "(index " + N(e.index()) + ", term " + N(e.term()) + ", " +
         (e.type() == raftpb::ENTRY_CONF_CHANGE ? std::string("conf change")
                                                : "'" + e.data() + "'") +
         ")";
}

// MemoryStorage learns the membership only from its snapshot. An application that keeps its
// applied state across restarts (durable_apply) keeps the membership that state has reached as
// well, and reports it at restart: SetConfState records it (durably, like the state).
class SimStorage : public raft::MemoryStorage {
 public:
  Result<std::pair<raftpb::HardState, raftpb::ConfState>> InitialState() const override {
    auto r = MemoryStorage::InitialState();
    if (!r.ok() || !has_conf_) return r;
    auto v = r.value();
    v.second = conf_;
    return v;
  }
  void SetConfState(const raftpb::ConfState& cs) {
    has_conf_ = true;
    conf_ = cs;
  }

 private:
  bool has_conf_ = false;
  raftpb::ConfState conf_;
};

// Where a pending crash hits the member's handling of its next Ready.
enum class CrashPoint { kNone, kAfterPersist, kAfterSend, kAfterApply };

struct PendingOp {
  size_t op = 0;          // index in the history
  uint64_t deadline = 0;  // the step the client gives up at
  std::optional<uint64_t> read_index;
};

struct Member {
  uint64_t id = 0;
  // Durable: survives crashes.
  SimStorage storage;
  std::string snap_data;  // the state machine at storage's snapshot index
  uint64_t snap_index = 0;
  // Durable with durable_apply; rebuilt from the snapshot at restart otherwise.
  KvStateMachine sm;
  uint64_t applied = 0;
  raftpb::ConfState conf;
  // Volatile.
  std::unique_ptr<RawNode> node;  // null while crashed
  uint64_t incarnation = 0;
  int tick_phase = 0;
  uint64_t down_until = 0;
  CrashPoint crash_at = CrashPoint::kNone;
  bool quick_restart = false;  // the pending crash is followed by a restart within a few steps
  std::map<uint64_t, std::string> received_snaps;  // snapshot index -> state, not installed
  std::map<uint64_t, PendingOp> puts;              // by request id
  std::map<uint64_t, PendingOp> gets;

  bool up() const { return node != nullptr; }
};

// What the transport tells a member about its messages, delivered at the next step.
struct Report {
  enum class Kind { kSnapshotOk, kSnapshotFailed, kUnreachable };
  uint64_t to = 0;
  uint64_t incarnation = 0;
  uint64_t peer = 0;
  Kind kind = Kind::kUnreachable;
};

class Cluster {
 public:
  explicit Cluster(const SimOptions& o) : o_(o), rng_(o.seed * kGolden + 0x5151), net_(rng_) {}

  SimResult Run();

 private:
  bool Chance(double p) { return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  uint64_t Uniform(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  void Fail(const std::string& what) {
    if (failure_) return;
    failure_ = what;
    fail_step_ = now_;
    Trace("FAILURE: " + what);
  }
  void Trace(const std::string& what) const {
    if (o_.trace) std::fprintf(stderr, "[%6llu] %s\n", (unsigned long long)now_, what.c_str());
  }
  Member* Find(uint64_t id) {
    return id >= 1 && id <= members_.size() ? members_[id - 1].get() : nullptr;
  }
  std::vector<Member*> Up();
  Member* Leader();

  void Start(Member& m, bool bootstrap);
  void Crash(Member& m, const char* where);
  void Step(bool faulty, bool clients);
  void InjectFaults();
  void Partition();
  void IssueClientOp();
  void QueueReport(uint64_t to, uint64_t peer, Report::Kind kind);
  void ProcessReports();
  void DeliverMessages();
  void Tick();
  void HandleReadies(Member& m);
  bool HandleReady(Member& m);
  void Send(Member& m, const raftpb::Message& msg);
  void InstallSnapshot(Member& m, const raftpb::Snapshot& snap);
  void Apply(Member& m, const raftpb::Entry& e);
  void CompletePut(Member& m, std::map<uint64_t, PendingOp>::iterator it);
  void ServeGets(Member& m);
  void MaybeCompact(Member& m);
  void ExpireOps();
  void Observe(Member& m);
  void CheckLeaderCompleteness(Member& m);
  void CheckStateHash(Member& m, uint64_t index);
  void CheckLogs(bool full);
  void Heal();
  void CheckHistory();

  SimOptions o_;
  std::mt19937_64 rng_;
  SimNetwork net_;
  std::vector<std::unique_ptr<Member>> members_;
  uint64_t now_ = 0;    // the step
  uint64_t clock_ = 0;  // event clock of the client history: strictly increasing
  std::vector<Operation> history_;
  std::vector<bool> dropped_;  // refused proposals and unanswered gets: left out of the check
  uint64_t next_request_ = 1;
  uint64_t next_barrier_ = 1;
  std::vector<Report> reports_;
  std::map<uint64_t, uint64_t> barrier_index_;  // barrier -> the index it was committed at
  bool faulty_ = true;                          // false once healing began
  bool partitioned_ = false;
  uint64_t partition_until_ = 0;
  // Invariant records.
  std::map<uint64_t, uint64_t> leader_of_term_;
  std::map<uint64_t, raftpb::Entry> committed_;  // index -> entry, as first applied by anyone
  std::map<uint64_t, uint64_t> state_hash_;      // index -> state machine hash after it
  std::optional<std::string> failure_;
  uint64_t fail_step_ = 0;
  SimStats stats_;
};

std::vector<Member*> Cluster::Up() {
  std::vector<Member*> up;
  for (auto& m : members_) {
    if (m->up()) up.push_back(m.get());
  }
  return up;
}

Member* Cluster::Leader() {
  Member* best = nullptr;
  for (Member* m : Up()) {
    const raft::Raft& r = m->node->raft();
    if (r.state() != raft::StateType::kLeader) continue;
    if (!best || r.term() > best->node->raft().term()) best = m;
  }
  return best;
}

SimResult Cluster::Run() {
  try {
    net_.set_faults(o_.faults);
    for (int i = 1; i <= o_.members; ++i) {
      members_.push_back(std::make_unique<Member>());
      members_.back()->id = static_cast<uint64_t>(i);
    }
    for (auto& m : members_) Start(*m, true);
    for (int i = 0; i < o_.steps && !failure_; ++i) Step(true, true);
    if (!failure_) Heal();
    if (!failure_) CheckLogs(true);
    if (!failure_) CheckHistory();
  } catch (const std::exception& e) {
    Fail(std::string("exception: ") + e.what());
  }
  SimResult r;
  r.ok = !failure_;
  if (failure_) r.failure = *failure_;
  r.step = fail_step_;
  stats_.messages = net_.stats().sent;
  r.stats = stats_;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Members: start, crash

void Cluster::Start(Member& m, bool bootstrap) {
  if (!bootstrap) {
    // A restart: what the application finds on its disk. The state machine is rebuilt from the
    // stored snapshot unless it is durable and at least as recent.
    if (!o_.durable_apply || m.snap_index > m.applied) {
      auto sm = KvStateMachine::Parse(m.snap_data);
      if (!sm) return Fail("member " + N(m.id) + ": its stored snapshot does not parse");
      m.sm = std::move(*sm);
      m.applied = m.snap_index;
      auto snap = m.storage.Snapshot();
      m.conf = snap.value().metadata().conf_state();
      if (o_.durable_apply) m.storage.SetConfState(m.conf);
    }
    Trace("member " + N(m.id) + " restarts at applied " + N(m.applied) + " (snapshot " +
          N(m.snap_index) + ", last index " + N(m.storage.LastIndex()) + ")");
  }
  raft::Config c;
  c.id = m.id;
  c.election_tick = o_.election_tick;
  c.heartbeat_tick = 1;
  c.storage = &m.storage;
  c.applied = m.applied;
  c.max_size_per_msg = o_.max_size_per_msg;
  c.max_inflight_msgs = o_.max_inflight;
  c.check_quorum = true;
  c.pre_vote = true;
  c.seed = o_.seed + m.incarnation * kGolden;
  m.node = std::make_unique<RawNode>(c);
  m.tick_phase = static_cast<int>(Uniform(0, static_cast<uint64_t>(o_.tick_every - 1)));
  m.crash_at = CrashPoint::kNone;
  if (bootstrap) {
    std::vector<raftpb::ConfChange> peers;
    for (int i = 1; i <= o_.members; ++i) {
      raftpb::ConfChange& cc = peers.emplace_back();
      cc.set_type(raftpb::CONF_CHANGE_ADD_NODE);
      cc.set_node_id(static_cast<uint64_t>(i));
    }
    Status st = m.node->Bootstrap(peers);
    if (!st.ok()) return Fail("bootstrap of member " + N(m.id) + ": " + st.ToString());
  }
  HandleReadies(m);
}

void Cluster::Crash(Member& m, const char* where) {
  Trace("member " + N(m.id) + " crashes " + where);
  m.node.reset();
  m.received_snaps.clear();
  stats_.indeterminate += m.puts.size();  // they stay in the history, open-ended
  for (const auto& [req, p] : m.gets) dropped_[p.op] = true;
  m.puts.clear();
  m.gets.clear();
  m.crash_at = CrashPoint::kNone;
  m.down_until = now_ + (m.quick_restart ? Uniform(1, 8)
                                         : Uniform(static_cast<uint64_t>(o_.down_min),
                                                   static_cast<uint64_t>(o_.down_max)));
  m.quick_restart = false;
  ++m.incarnation;
  ++stats_.crashes;
}

// ---------------------------------------------------------------------------------------------
// One step

void Cluster::Step(bool faulty, bool clients) {
  ++now_;
  ProcessReports();
  if (failure_) return;
  if (faulty) {
    InjectFaults();
    for (auto& m : members_) {
      if (!m->up() && m->down_until <= now_) Start(*m, false);
    }
  }
  if (failure_) return;
  if (clients) IssueClientOp();
  DeliverMessages();
  if (failure_) return;
  Tick();
  for (auto& m : members_) {
    if (m->up()) HandleReadies(*m);
    if (failure_) return;
  }
  for (auto& m : members_) {
    if (m->up() && m->crash_at != CrashPoint::kNone) Crash(*m, "between steps");
  }
  ExpireOps();
  if (now_ % 50 == 0) CheckLogs(false);
}

void Cluster::InjectFaults() {
  if (partitioned_ && now_ >= partition_until_) {
    net_.HealAll();
    partitioned_ = false;
    Trace("partition healed");
  }
  if (!partitioned_ && Chance(o_.partition_rate)) Partition();
  if (Chance(o_.crash_rate)) {
    auto up = Up();
    if (static_cast<int>(members_.size() - up.size()) < o_.max_down && !up.empty()) {
      Member& victim = *up[Uniform(0, up.size() - 1)];
      switch (Uniform(0, 5)) {
        case 0:
          victim.crash_at = CrashPoint::kAfterPersist;
          break;
        case 1:
          victim.crash_at = CrashPoint::kAfterSend;
          break;
        case 2:
          victim.crash_at = CrashPoint::kAfterApply;
          break;
        default:
          Crash(victim, "between steps");
      }
    }
  }
  if (Chance(o_.transfer_rate)) {
    if (Member* l = Leader()) {
      uint64_t to = Uniform(1, members_.size());
      if (to != l->id) {
        Trace("member " + N(l->id) + " asked to transfer leadership to " + N(to));
        l->node->TransferLeader(to);
        ++stats_.transfers;
        Observe(*l);
      }
    }
  }
}

void Cluster::Partition() {
  const uint64_t n = members_.size();
  std::string what;
  switch (Uniform(0, 3)) {
    case 0:
    case 1: {
      // Isolate one member: the leader if there is one (half of the time), else any.
      Member* l = Leader();
      uint64_t v = l && Chance(0.5) ? l->id : Uniform(1, n);
      for (uint64_t i = 1; i <= n; ++i) {
        if (i == v) continue;
        net_.Cut(v, i);
        net_.Cut(i, v);
      }
      what = "member " + N(v) + " isolated";
      break;
    }
    case 2: {
      std::vector<bool> side(n + 1);
      for (uint64_t i = 1; i <= n; ++i) side[i] = Chance(0.5);
      side[Uniform(1, n)] = !side[1];  // never everyone on one side
      for (uint64_t i = 1; i <= n; ++i) {
        for (uint64_t j = 1; j <= n; ++j) {
          if (side[i] != side[j]) net_.Cut(i, j);
        }
      }
      what = "split:";
      for (uint64_t i = 1; i <= n; ++i) what += side[i] ? " " + N(i) : "";
      what += " |";
      for (uint64_t i = 1; i <= n; ++i) what += side[i] ? "" : " " + N(i);
      break;
    }
    default: {
      // Asymmetric: some directed links fail, their reverse keeps working.
      uint64_t k = Uniform(1, n);
      what = "one-way cuts:";
      for (uint64_t c = 0; c < k; ++c) {
        uint64_t a = Uniform(1, n), b = Uniform(1, n);
        if (a == b) b = a % n + 1;
        net_.Cut(a, b);
        what += " " + N(a) + "->" + N(b);
      }
    }
  }
  partitioned_ = true;
  partition_until_ = now_ + Uniform(static_cast<uint64_t>(o_.partition_min),
                                    static_cast<uint64_t>(o_.partition_max));
  ++stats_.partitions;
  Trace("partition until step " + N(partition_until_) + ": " + what);
}

void Cluster::IssueClientOp() {
  if (!Chance(o_.client_rate)) return;
  auto up = Up();
  if (up.empty()) return;
  Member& m = *up[Uniform(0, up.size() - 1)];
  Operation op;
  op.id = next_request_++;
  op.key = "k" + N(Uniform(0, static_cast<uint64_t>(o_.keys - 1)));
  op.call = ++clock_;
  PendingOp p{history_.size(), now_ + static_cast<uint64_t>(o_.op_timeout), std::nullopt};
  ++stats_.ops;
  if (Chance(o_.put_ratio)) {
    op.kind = OpKind::kPut;
    op.value = static_cast<int64_t>(op.id);
    history_.push_back(op);
    dropped_.push_back(false);
    Status st = m.node->Propose(Command::EncodePut(op.id, op.key, op.value));
    Observe(m);
    if (!st.ok()) {
      dropped_.back() = true;  // refused before it reached any log: it cannot take effect
      --stats_.ops;
      return;
    }
    m.puts[op.id] = p;
  } else if (o_.local_reads) {
    op.kind = OpKind::kGet;
    op.value = m.sm.Get(op.key);
    op.ret = ++clock_;
    history_.push_back(op);
    dropped_.push_back(false);
  } else {
    op.kind = OpKind::kGet;
    history_.push_back(op);
    dropped_.push_back(false);
    m.node->ReadIndex(N(op.id));
    Observe(m);
    m.gets[op.id] = p;
  }
}

void Cluster::QueueReport(uint64_t to, uint64_t peer, Report::Kind kind) {
  Member* m = Find(to);
  if (!m || !m->up()) return;
  reports_.push_back(Report{to, m->incarnation, peer, kind});
}

void Cluster::ProcessReports() {
  std::vector<Report> reports = std::move(reports_);
  reports_.clear();
  for (const Report& r : reports) {
    Member* m = Find(r.to);
    if (!m || !m->up() || m->incarnation != r.incarnation) continue;
    switch (r.kind) {
      case Report::Kind::kSnapshotOk:
        m->node->ReportSnapshot(r.peer, raft::SnapshotStatus::kFinish);
        break;
      case Report::Kind::kSnapshotFailed:
        m->node->ReportSnapshot(r.peer, raft::SnapshotStatus::kFailure);
        break;
      case Report::Kind::kUnreachable:
        m->node->ReportUnreachable(r.peer);
        break;
    }
    Observe(*m);
  }
}

void Cluster::DeliverMessages() {
  for (Envelope& env : net_.TakeDue(now_)) {
    const raftpb::Message& msg = env.msg;
    const bool snap = msg.type() == raftpb::MSG_SNAP;
    Member* to = Find(msg.to());
    if (!to || !to->up() || !net_.Connected(msg.from(), msg.to())) {
      // The transport of the sender notices the failed connection.
      if (snap) QueueReport(msg.from(), msg.to(), Report::Kind::kSnapshotFailed);
      QueueReport(msg.from(), msg.to(), Report::Kind::kUnreachable);
      continue;
    }
    if (snap) {
      to->received_snaps[msg.snapshot().metadata().index()] = std::move(env.attachment);
      QueueReport(msg.from(), msg.to(), Report::Kind::kSnapshotOk);
    }
    (void)to->node->Step(msg);  // refusals (e.g. a response from a removed peer) are fine
    Observe(*to);
    if (failure_) return;
  }
}

void Cluster::Tick() {
  for (Member* m : Up()) {
    if ((now_ + static_cast<uint64_t>(m->tick_phase)) % static_cast<uint64_t>(o_.tick_every) != 0)
      continue;
    if (Chance(o_.tick_skip)) continue;
    m->node->Tick();
    Observe(*m);
  }
}

// ---------------------------------------------------------------------------------------------
// The application loop of a member

void Cluster::HandleReadies(Member& m) {
  for (int i = 0; i < 32 && m.up() && !failure_ && m.node->HasReady(); ++i) {
    if (!HandleReady(m)) return;
  }
}

bool Cluster::HandleReady(Member& m) {
  Ready rd = m.node->GetReady();
  const std::string who = "member " + N(m.id);
  // 1. Persist: snapshot, entries, hard state.
  if (rd.snapshot) {
    uint64_t idx = rd.snapshot->metadata().index();
    auto it = m.received_snaps.find(idx);
    if (it == m.received_snaps.end()) {
      Fail(who + " must install a snapshot at index " + N(idx) + " whose state never arrived");
      return false;
    }
    Status st = m.storage.ApplySnapshot(*rd.snapshot);
    if (!st.ok()) {
      Fail(who + " cannot persist the snapshot at " + N(idx) + ": " + st.ToString());
      return false;
    }
    m.snap_data = it->second;
    m.snap_index = idx;
  }
  Status st = m.storage.Append(rd.entries);
  if (!st.ok()) {
    Fail(who + " cannot persist the Ready's entries: " + st.ToString());
    return false;
  }
  if (rd.hard_state) {
    m.storage.SetHardState(*rd.hard_state);
    if (rd.hard_state->commit() > m.storage.LastIndex()) {
      Fail(who + " hard state commits " + N(rd.hard_state->commit()) + " beyond its last index " +
           N(m.storage.LastIndex()));
      return false;
    }
  }
  // Only entries durable here may be handed out for applying.
  for (const auto& e : rd.committed_entries) {
    auto t = m.storage.Term(e.index());
    if (!t.ok() || t.value() != e.term()) {
      Fail(who + " was given committed entry " + Str(e) + " that is not in its durable log");
      return false;
    }
  }
  // A targeted fault: crash right after granting a vote, and come back at once, while the
  // election may still be running (the vote must have been persisted).
  if (faulty_ && m.crash_at == CrashPoint::kNone && Chance(o_.crash_after_vote) &&
      static_cast<int>(members_.size() - Up().size()) < o_.max_down) {
    for (const auto& msg : rd.messages) {
      if (msg.type() == raftpb::MSG_VOTE_RESP && !msg.reject()) {
        m.crash_at = CrashPoint::kAfterSend;
        m.quick_restart = true;
      }
    }
  }
  if (m.crash_at == CrashPoint::kAfterPersist) {
    Crash(m, "after persisting a Ready");
    return false;
  }
  // 2. Send.
  for (const auto& msg : rd.messages) Send(m, msg);
  if (failure_) return false;
  if (m.crash_at == CrashPoint::kAfterSend) {
    Crash(m, "after sending a Ready's messages");
    return false;
  }
  // 3. Install, apply, note read states.
  if (rd.snapshot) InstallSnapshot(m, *rd.snapshot);
  for (const auto& e : rd.committed_entries) {
    if (failure_) return false;
    Apply(m, e);
  }
  for (const auto& rs : rd.read_states) {
    auto it = m.gets.find(std::strtoull(rs.request_ctx.c_str(), nullptr, 10));
    if (it != m.gets.end() && !it->second.read_index) it->second.read_index = rs.index;
  }
  if (failure_) return false;
  if (m.crash_at == CrashPoint::kAfterApply) {
    Crash(m, "after applying a Ready");
    return false;
  }
  // 4. Advance.
  m.node->Advance(rd);
  Observe(m);
  MaybeCompact(m);
  ServeGets(m);
  return !failure_;
}

void Cluster::Send(Member& m, const raftpb::Message& msg) {
  if (msg.to() == m.id) return Fail("member " + N(m.id) + " sent a message to itself");
  std::string attachment;
  if (msg.type() == raftpb::MSG_SNAP) {
    uint64_t idx = msg.snapshot().metadata().index();
    if (idx != m.snap_index) {
      return Fail("member " + N(m.id) + " sent a snapshot at index " + N(idx) +
                  " but its stored snapshot is at " + N(m.snap_index));
    }
    attachment = m.snap_data;
    ++stats_.snapshots_sent;
    Trace("member " + N(m.id) + " sends snapshot " + N(idx) + " to " + N(msg.to()));
  }
  if (!net_.Send(now_, msg, attachment) && msg.type() == raftpb::MSG_SNAP) {
    QueueReport(m.id, msg.to(), Report::Kind::kSnapshotFailed);
  }
}

void Cluster::InstallSnapshot(Member& m, const raftpb::Snapshot& snap) {
  const auto& md = snap.metadata();
  const std::string who = "member " + N(m.id);
  if (md.index() <= m.applied) {
    return Fail(who + " told to install snapshot " + N(md.index()) + " at applied index " +
                N(m.applied));
  }
  auto it = committed_.find(md.index());
  if (it != committed_.end() && it->second.term() != md.term()) {
    return Fail(who + " installs snapshot (index " + N(md.index()) + ", term " + N(md.term()) +
                ") but that index was committed as " + Str(it->second));
  }
  auto sm = KvStateMachine::Parse(m.snap_data);
  if (!sm) return Fail(who + ": snapshot state does not parse");
  m.sm = std::move(*sm);
  m.applied = md.index();
  m.conf = md.conf_state();
  if (o_.durable_apply) m.storage.SetConfState(m.conf);
  m.received_snaps.erase(m.received_snaps.begin(), m.received_snaps.upper_bound(md.index()));
  ++stats_.snapshots_installed;
  Trace(who + " installed snapshot " + N(md.index()));
  CheckStateHash(m, md.index());
  // Puts this member proposed that the snapshot already contains took effect.
  for (auto p = m.puts.begin(); p != m.puts.end();) {
    if (m.sm.Applied(p->first)) {
      CompletePut(m, p++);
    } else {
      ++p;
    }
  }
}

void Cluster::Apply(Member& m, const raftpb::Entry& e) {
  const std::string who = "member " + N(m.id);
  if (e.index() != m.applied + 1) {
    return Fail(who + " applies entry " + N(e.index()) + " after " + N(m.applied) +
                " (applied entries must be consecutive)");
  }
  auto [it, inserted] = committed_.emplace(e.index(), e);
  if (!inserted && !SameEntry(it->second, e)) {
    return Fail("committed entry changed: index " + N(e.index()) + " was applied as " +
                Str(it->second) + ", now " + who + " applies " + Str(e));
  }
  stats_.committed = std::max(stats_.committed, e.index());
  if (e.type() == raftpb::ENTRY_CONF_CHANGE) {
    raftpb::ConfChange cc;
    if (!cc.ParseFromString(e.data())) return Fail(who + ": undecodable conf change " + Str(e));
    m.conf = m.node->ApplyConfChange(cc);
    if (o_.durable_apply) m.storage.SetConfState(m.conf);
  } else {
    auto c = Command::Decode(e.data());
    if (!c) return Fail(who + ": undecodable entry " + Str(e));
    if (c->kind == Command::Kind::kPut) {
      m.sm.ApplyPut(*c);
      auto p = m.puts.find(c->request);
      if (p != m.puts.end()) CompletePut(m, p);
    } else if (c->kind == Command::Kind::kBarrier) {
      barrier_index_.emplace(c->request, e.index());
    }
  }
  m.applied = e.index();
  CheckStateHash(m, e.index());
}

void Cluster::CompletePut(Member& m, std::map<uint64_t, PendingOp>::iterator it) {
  history_[it->second.op].ret = ++clock_;
  ++stats_.completed;
  m.puts.erase(it);
}

void Cluster::ServeGets(Member& m) {
  for (auto it = m.gets.begin(); it != m.gets.end();) {
    if (it->second.read_index && *it->second.read_index <= m.applied) {
      Operation& op = history_[it->second.op];
      op.value = m.sm.Get(op.key);
      op.ret = ++clock_;
      ++stats_.completed;
      it = m.gets.erase(it);
    } else {
      ++it;
    }
  }
}

void Cluster::MaybeCompact(Member& m) {
  if (o_.snapshot_every <= 0) return;
  if (m.applied < m.snap_index + static_cast<uint64_t>(o_.snapshot_every)) return;
  auto snap = m.storage.CreateSnapshot(m.applied, &m.conf);
  if (!snap.ok()) {
    return Fail("member " + N(m.id) + " cannot snapshot at " + N(m.applied) + ": " +
                snap.status().ToString());
  }
  m.snap_data = m.sm.Serialize();
  m.snap_index = m.applied;
  uint64_t keep = static_cast<uint64_t>(o_.compact_keep);
  uint64_t to = m.applied > keep ? m.applied - keep : 0;
  if (to >= m.storage.FirstIndex()) {
    Status st = m.storage.Compact(to);
    if (!st.ok()) return Fail("member " + N(m.id) + " cannot compact to " + N(to));
  }
  ++stats_.compactions;
}

void Cluster::ExpireOps() {
  for (Member* m : Up()) {
    for (auto it = m->puts.begin(); it != m->puts.end();) {
      if (it->second.deadline <= now_) {
        ++stats_.indeterminate;  // stays in the history, open-ended
        it = m->puts.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = m->gets.begin(); it != m->gets.end();) {
      if (it->second.deadline <= now_) {
        dropped_[it->second.op] = true;
        it = m->gets.erase(it);
      } else {
        ++it;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Invariants

// After every input to a member: election safety (one leader per term) and, for a new leader,
// leader completeness (its log holds every entry known to be committed).
void Cluster::Observe(Member& m) {
  if (!m.up()) return;
  const raft::Raft& r = m.node->raft();
  if (r.state() != raft::StateType::kLeader) return;
  auto [it, inserted] = leader_of_term_.emplace(r.term(), m.id);
  if (!inserted) {
    if (it->second != m.id) {
      Fail("election safety: members " + N(it->second) + " and " + N(m.id) +
           " are both leader of term " + N(r.term()));
    }
    return;
  }
  ++stats_.leaders;
  Trace("member " + N(m.id) + " leads term " + N(r.term()));
  CheckLeaderCompleteness(m);
}

void Cluster::CheckLeaderCompleteness(Member& m) {
  const raft::Log& log = m.node->raft().log();
  for (auto it = committed_.lower_bound(log.FirstIndex()); it != committed_.end(); ++it) {
    uint64_t i = it->first;
    if (i > log.LastIndex() || log.TermOrZero(i) != it->second.term()) {
      return Fail("leader completeness: member " + N(m.id) + " leads term " +
                  N(m.node->raft().term()) + " but its log has term " + N(log.TermOrZero(i)) +
                  " at index " + N(i) + " (last " + N(log.LastIndex()) + "), committed as " +
                  Str(it->second));
    }
  }
}

void Cluster::CheckStateHash(Member& m, uint64_t index) {
  uint64_t h = m.sm.Hash();
  auto [it, inserted] = state_hash_.emplace(index, h);
  if (!inserted && it->second != h) {
    Fail("state machine divergence: member " + N(m.id) + "'s state after index " + N(index) +
         " differs from the state another member had there");
  }
}

// Log matching over the durable logs of every pair of members (crashed ones included): if two
// logs have an entry of the same term at an index, they are identical up to it. With `full`, also
// every durable entry up to a member's durable commit index must be the committed one.
void Cluster::CheckLogs(bool full) {
  for (size_t a = 0; a < members_.size(); ++a) {
    for (size_t b = a + 1; b < members_.size(); ++b) {
      const SimStorage& sa = members_[a]->storage;
      const SimStorage& sb = members_[b]->storage;
      uint64_t lo = std::max(sa.FirstIndex(), sb.FirstIndex());
      uint64_t hi = std::min(sa.LastIndex(), sb.LastIndex());
      if (lo > hi) continue;
      uint64_t i = hi;
      while (sa.Term(i).value() != sb.Term(i).value()) {
        if (i == lo) break;
        --i;
      }
      if (sa.Term(i).value() != sb.Term(i).value()) continue;
      // Periodic checks look at the recent part only; the final one at everything.
      if (!full && i > lo + 256) lo = i - 256;
      auto ea = sa.Entries(lo, i + 1, UINT64_MAX).value();
      auto eb = sb.Entries(lo, i + 1, UINT64_MAX).value();
      for (size_t k = 0; k < ea.size() && k < eb.size(); ++k) {
        if (!SameEntry(ea[k], eb[k])) {
          return Fail("log matching: members " + N(a + 1) + " and " + N(b + 1) +
                      " both have term " + N(sa.Term(i).value()) + " at index " + N(i) +
                      " but differ at index " + N(ea[k].index()) + ": " + Str(ea[k]) + " vs " +
                      Str(eb[k]));
        }
      }
    }
  }
  if (!full) return;
  for (auto& m : members_) {
    uint64_t commit = m->storage.InitialState().value().first.commit();
    uint64_t first = m->storage.FirstIndex();
    if (commit < first) continue;
    auto ents = m->storage.Entries(first, commit + 1, UINT64_MAX).value();
    for (const auto& e : ents) {
      auto it = committed_.find(e.index());
      if (it != committed_.end() && !SameEntry(it->second, e)) {
        return Fail("durability: member " + N(m->id) + " holds " + Str(e) +
                    " below its commit index, but the committed entry is " + Str(it->second));
      }
    }
  }
}

// The liveness check: once every fault is gone, a barrier proposed to the leader must be applied
// by every member within heal_steps.
void Cluster::Heal() {
  Trace("healing: faults off, every member up");
  faulty_ = false;
  net_.HealAll();
  partitioned_ = false;
  NetworkFaults calm;
  calm.min_delay = 1;
  calm.max_delay = 3;
  net_.set_faults(calm);
  for (auto& m : members_) {
    if (m->up()) {
      m->crash_at = CrashPoint::kNone;
      m->quick_restart = false;
    } else {
      Start(*m, false);
    }
  }
  uint64_t barrier = 0;
  uint64_t proposed_at = 0;
  for (int i = 0; i < o_.heal_steps && !failure_; ++i) {
    Step(false, false);
    auto at = barrier_index_.find(barrier);
    if (at != barrier_index_.end()) {
      bool done = true;
      for (auto& m : members_) done = done && m->up() && m->applied >= at->second;
      if (done) return;
    }
    if (barrier == 0 || (!barrier_index_.count(barrier) && now_ - proposed_at > 200)) {
      if (Member* l = Leader()) {
        uint64_t b = next_barrier_++;
        if (l->node->Propose(Command::EncodeBarrier(b)).ok()) {
          barrier = b;
          proposed_at = now_;
        }
      }
    }
  }
  if (failure_) return;
  std::string state;
  for (auto& m : members_) {
    state +=
        " " + N(m->id) + ":" +
        (m->up() ? raft::StateName(m->node->raft().state()) + std::string("/term ") +
                       N(m->node->raft().term()) + "/commit " + N(m->node->raft().log().committed())
                 : std::string("down")) +
        "/applied " + N(m->applied);
  }
  Fail("liveness: " + N(static_cast<uint64_t>(o_.heal_steps)) +
       " fault-free steps after healing, barrier " + N(barrier) + " is not applied everywhere;" +
       state);
}

void Cluster::CheckHistory() {
  std::vector<Operation> h;
  for (size_t i = 0; i < history_.size(); ++i) {
    if (dropped_[i]) continue;
    if (history_[i].kind == OpKind::kGet && history_[i].ret == kNeverReturned) continue;
    h.push_back(history_[i]);
  }
  CheckResult r = CheckLinearizable(h);
  stats_.check_steps = r.steps;
  if (r.verdict == Verdict::kNotLinearizable) {
    Fail("linearizability: the history of key " + r.key + " is not linearizable\n" + r.detail);
  } else if (r.verdict == Verdict::kUnknown) {
    stats_.check_unknown = true;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string SimOptions::ToString() const {
  auto d = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return std::string(buf);
  };
  return "profile=" + profile + " members=" + N(members) + " steps=" + N(steps) +
         " tick_every=" + N(tick_every) + " election_tick=" + N(election_tick) +
         " max_inflight=" + N(max_inflight) + " max_size_per_msg=" + N(max_size_per_msg) +
         " drop=" + d(faults.drop) + " duplicate=" + d(faults.duplicate) + " delay=[" +
         N(faults.min_delay) + "," + N(faults.max_delay) + "] slow=" + d(faults.slow) + "/" +
         N(faults.slow_max) + " tick_skip=" + d(tick_skip) + " client_rate=" + d(client_rate) +
         " keys=" + N(keys) + " op_timeout=" + N(op_timeout) + " crash_rate=" + d(crash_rate) +
         " max_down=" + N(max_down) + " down=[" + N(down_min) + "," + N(down_max) +
         "] crash_after_vote=" + d(crash_after_vote) + " durable_apply=" + N(durable_apply) +
         " partition_rate=" + d(partition_rate) + " partition=[" + N(partition_min) + "," +
         N(partition_max) + "] transfer_rate=" + d(transfer_rate) +
         " snapshot_every=" + N(snapshot_every) + " compact_keep=" + N(compact_keep) +
         (local_reads ? " local_reads=1" : "");
}

void SimStats::Add(const SimStats& o) {
  ops += o.ops;
  completed += o.completed;
  indeterminate += o.indeterminate;
  crashes += o.crashes;
  partitions += o.partitions;
  transfers += o.transfers;
  leaders += o.leaders;
  snapshots_sent += o.snapshots_sent;
  snapshots_installed += o.snapshots_installed;
  compactions += o.compactions;
  committed += o.committed;
  messages += o.messages;
  check_steps += o.check_steps;
  check_unknown = check_unknown || o.check_unknown;
}

std::string SimStats::ToString() const {
  return "ops=" + N(ops) + " completed=" + N(completed) + " indeterminate=" + N(indeterminate) +
         " crashes=" + N(crashes) + " partitions=" + N(partitions) + " transfers=" + N(transfers) +
         " leaders=" + N(leaders) + " snapshots_sent=" + N(snapshots_sent) +
         " snapshots_installed=" + N(snapshots_installed) + " compactions=" + N(compactions) +
         " committed=" + N(committed) + " messages=" + N(messages) +
         " check_steps=" + N(check_steps) + (check_unknown ? " (some checks unknown)" : "");
}

SimResult RunSchedule(const SimOptions& options) { return Cluster(options).Run(); }

}  // namespace etcdw::sim
