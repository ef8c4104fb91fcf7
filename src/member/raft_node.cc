#include "etcdw/member/raft_node.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <random>
#include <utility>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/thread_name.h"
#include "etcdw/member/raft_log_storage.h"
#include "etcdw/mvcc/snapshot.h"
#include "etcdw/storage/meta_records.h"
#include "snapshot_transfer.h"

namespace etcdw::member {

namespace {

// The node whose wake-ups this thread's CallerStep defers, and whether one was deferred.
thread_local RaftNode* t_deferring = nullptr;
thread_local bool t_deferred = false;

constexpr auto kReadRetry = std::chrono::milliseconds(500);

std::string EncodeIndexTerm(uint64_t index, uint64_t term) {
  return storage::EncodeFixed64BE(index) + storage::EncodeFixed64BE(term);
}

}  // namespace

RaftNode::RaftNode(storage::Engine& engine, mvcc::KvStore& kv, Applier& applier,
                   cluster::Membership& membership, RaftNodeOptions opts)
    : engine_(engine),
      kv_(kv),
      applier_(applier),
      membership_(membership),
      opts_(std::move(opts)),
      log_(opts_.wal_dir) {}

RaftNode::~RaftNode() { Stop(); }

std::chrono::milliseconds RaftNode::RequestTimeout() const {
  // etcd: 5 s plus two election timeouts.
  return std::chrono::milliseconds(5000) + 2 * opts_.election_ticks * opts_.tick_interval;
}

// A snapshot is always "now": the applied state (the transport streams it from a consistent
// copy of the store).
Result<raftpb::Snapshot> RaftNode::SnapshotNow() const {
  uint64_t applied = kv_.ConsistentIndex();
  raftpb::Snapshot s;
  if (applied == 0) return s;
  auto term = log_.Term(applied);
  if (!term.ok()) return raft::ErrSnapshotTemporarilyUnavailable();
  s.mutable_metadata()->set_index(applied);
  s.mutable_metadata()->set_term(term.value());
  *s.mutable_metadata()->mutable_conf_state() = membership_.ConfState();
  return s;
}

std::string RaftNode::SnapshotPath(uint64_t index) const {
  return opts_.snapshot_dir + "/" + std::to_string(index) + ".snap";
}

Status RaftNode::Start() {
  ETCDW_RETURN_IF_ERROR(log_.Open(&engine_));
  if (!opts_.snapshot_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opts_.snapshot_dir, ec);
    if (ec) return Unavailable("cannot create " + opts_.snapshot_dir + ": " + ec.message());
  }
  ETCDW_RETURN_IF_ERROR(RecoverInterruptedInstall());
  ETCDW_RETURN_IF_ERROR(ReconcileCommitWithApplied());
  raft_storage_ = std::make_unique<RaftLogStorage>(
      log_, [this] { return membership_.ConfState(); }, [this] { return SnapshotNow(); });

  raft::Config c;
  c.id = opts_.member_id;
  c.election_tick = opts_.election_ticks;
  c.heartbeat_tick = 1;
  c.storage = raft_storage_.get();
  c.applied = kv_.ConsistentIndex();
  c.max_size_per_msg = opts_.max_size_per_msg;
  c.max_inflight_msgs = opts_.max_inflight_msgs;
  c.check_quorum = true;
  c.pre_vote = opts_.pre_vote;
  c.seed = std::random_device{}() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  try {
    raw_ = std::make_unique<raft::RawNode>(c);
    if (log_.LastIndex() == 0 && !opts_.bootstrap_members.empty()) {
      std::vector<raftpb::ConfChange> peers;
      for (const cluster::Member& m : opts_.bootstrap_members) {
        raftpb::ConfChange& cc = peers.emplace_back();
        cc.set_type(raftpb::CONF_CHANGE_ADD_NODE);
        cc.set_node_id(m.id);
        cc.set_context(m.Serialize());
      }
      ETCDW_RETURN_IF_ERROR(raw_->Bootstrap(peers));
    }
    // Persist and apply what is committed (the bootstrap entries, or a restart's unapplied
    // tail): Raft refuses to campaign while configuration changes are unapplied.
    if (!ProcessReadies()) return Internal("raft node failed to start");
    // A member alone in its configuration elects itself at once instead of after an
    // election timeout (etcd advances its ticks the same way).
    const auto& voters = raw_->raft().tracker().voters;
    single_voter_ = voters.size() == 1 && voters.count(opts_.member_id);
    if (single_voter_) raw_->Campaign();
    if (!ProcessReadies()) return Internal("raft node failed to start");
  } catch (const std::logic_error& e) {
    return Internal(std::string("raft: ") + e.what());
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  running_ = true;
  loop_ = common::NamedThread("raft-loop", [this] { Loop(); });
  return Status::Ok();
}

void RaftNode::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !loop_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  running_ = false;
}

void RaftNode::Fail(const Status& st) {
  log::Error("raft node stopped", {log::F("error", st)});
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();  // a CallerStep's failure must end the loop too
  if (opts_.on_fatal) opts_.on_fatal(st);
}

void RaftNode::Push(Event e) {
  {
    std::lock_guard lock(mu_);
    inbox_.push_back(std::move(e));
  }
  Wake();
}

Status RaftNode::Propose(std::string data, common::Clock::TimePoint deadline) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !running_) return errors::Stopped();
    Event e{Event::kPropose, {}, std::move(data), {}, 0, false, {}, deadline};
    inbox_.push_back(std::move(e));
  }
  Wake();
  return Status::Ok();
}

Status RaftNode::ProposeConfChange(const raftpb::ConfChange& cc) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !running_) return errors::Stopped();
    Event e{Event::kConfChange, {}, {}, cc, 0, false, {}};
    inbox_.push_back(std::move(e));
  }
  Wake();
  return Status::Ok();
}

Status RaftNode::ProposeAsLeader(std::string data, uint64_t term) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !running_) return errors::Stopped();
    Event e{Event::kPropose, {}, std::move(data), {}, 0, false, {}};
    e.leader_term = term;
    inbox_.push_back(std::move(e));
  }
  Wake();
  return Status::Ok();
}

void RaftNode::ReadIndex(std::function<void(Status)> ready) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !running_) {
      ready(errors::Stopped());
      return;
    }
    read_waiters_.push_back(std::move(ready));
  }
  Wake();
}

void RaftNode::Wake() {
  if (t_deferring == this) {
    t_deferred = true;
  } else {
    cv_.notify_one();
  }
}

RaftNode::CallerStep::CallerStep(RaftNode& node) {
  if (t_deferring != nullptr) return;  // nested: the outer scope steps
  node_ = &node;
  t_deferring = node_;
  t_deferred = false;
}

bool RaftNode::CallerStep::Finish(bool may_step) {
  if (node_ == nullptr) return false;
  RaftNode* node = std::exchange(node_, nullptr);
  t_deferring = nullptr;
  return std::exchange(t_deferred, false) && node->StepHereOrWake(may_step);
}

bool RaftNode::StepHereOrWake(bool may_step) {
  // Only a single voter that leads: its step is the whole write (no acknowledgements to wait
  // for) and never installs a snapshot, so the caller's thread is held for one sync at most.
  if (may_step && CanReadLocally()) {
    std::unique_lock step(step_mu_, std::try_to_lock);
    if (step.owns_lock() && running_.load()) {
      // A failing step stops the node itself (Fail wakes the loop to notice).
      Step(/*tick=*/false);
      return true;
    }
  }
  cv_.notify_one();
  return false;
}

bool RaftNode::CanReadLocally() const { return single_voter_.load() && is_leader_.load(); }

void RaftNode::TransferLeadership(uint64_t to, std::chrono::milliseconds timeout,
                                  std::function<void(Status)> done) {
  Event e{Event::kTransfer, {}, {}, {}, to, false, std::move(done)};
  e.msg.set_index(static_cast<uint64_t>(timeout.count()));
  Push(std::move(e));
}

std::optional<uint64_t> RaftNode::MatchIndex(uint64_t member) const {
  std::lock_guard lock(status_mu_);
  auto it = match_.find(member);
  if (it == match_.end()) return std::nullopt;
  return it->second;
}

void RaftNode::OnMessage(raftpb::Message m) {
  Push(Event{Event::kMessage, std::move(m), {}, {}, 0, false, {}});
}

void RaftNode::OnUnreachable(uint64_t peer) {
  Push(Event{Event::kUnreachable, {}, {}, {}, peer, false, {}});
}

void RaftNode::OnSnapshotSent(uint64_t peer, bool ok) {
  Push(Event{Event::kSnapStatus, {}, {}, {}, peer, ok, {}});
}

std::unique_ptr<peer_transport::SnapshotSink> RaftNode::OnSnapshot(const raftpb::Message& m) {
  if (opts_.snapshot_dir.empty()) return nullptr;
  return std::make_unique<SnapshotFileSink>(SnapshotPath(m.snapshot().metadata().index()));
}

void RaftNode::OnSnapshotReceived(raftpb::Message m) { OnMessage(std::move(m)); }

void RaftNode::ApplyConfChange(const raftpb::ConfChange& cc) {
  raw_->ApplyConfChange(cc);
  const auto& voters = raw_->raft().tracker().voters;
  single_voter_ = voters.size() == 1 && voters.count(opts_.member_id);
  if (cc.node_id() == 0) return;  // refused by the membership
  if (opts_.on_conf_change) opts_.on_conf_change(cc);
  if (cc.type() == raftpb::CONF_CHANGE_REMOVE_NODE && cc.node_id() == opts_.member_id) {
    log::Warn("this member has been permanently removed from the cluster",
              {log::Hex("member-id", opts_.member_id)});
    if (opts_.on_removed) opts_.on_removed();
  }
}

// ---------------------------------------------------------------------------------------------
// The loop

void RaftNode::Loop() {
  const common::Clock& clock = *opts_.clock;
  auto next_tick = clock.Now() + opts_.tick_interval;
  while (true) {
    {
      std::unique_lock lock(mu_);
      clock.WaitUntil(lock, cv_, next_tick,
                      [&] { return stopping_ || !inbox_.empty() || !read_waiters_.empty(); });
      if (stopping_) break;
    }
    std::lock_guard step(step_mu_);
    const auto now = clock.Now();
    const bool tick = now >= next_tick;
    if (tick) {
      next_tick += opts_.tick_interval;
      if (next_tick < now) next_tick = now + opts_.tick_interval;
    }
    if (!Step(tick)) break;
  }
  std::lock_guard step(step_mu_);  // a CallerStep in progress finishes first
  running_ = false;
  // Readers still waiting learn that the node stopped.
  std::vector<std::function<void(Status)>> waiters;
  {
    std::lock_guard lock(mu_);
    waiters.swap(read_waiters_);
  }
  for (auto& w : next_round_) waiters.push_back(std::move(w));
  if (read_round_) {
    for (auto& w : read_round_->waiters) waiters.push_back(std::move(w));
  }
  for (auto& [idx, ws] : ready_reads_) {
    for (auto& w : ws) waiters.push_back(std::move(w));
  }
  for (auto& w : waiters) w(errors::Stopped());
  for (auto& t : transfers_) t.done(errors::Stopped());
}

bool RaftNode::Step(bool tick) {
  std::deque<Event> events;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    events.swap(inbox_);
    for (auto& w : read_waiters_) next_round_.push_back(std::move(w));
    read_waiters_.clear();
  }
  try {
    for (Event& e : events) {
      switch (e.kind) {
        case Event::kMessage: {
          // Refused messages (responses from unknown or removed peers) are stale: drop them.
          Status refused = raw_->Step(e.msg);
          (void)refused;
        } break;
        case Event::kPropose: {
          const auto now = opts_.clock->Now();
          if (now >= e.deadline) break;  // its client gave up before it could be proposed
          if (e.leader_term != 0 && (raw_->raft().state() != raft::StateType::kLeader ||
                                     raw_->raft().term() != e.leader_term)) {
            break;  // no longer that term's leader: not forwarded, not kept
          }
          if (!raw_->Propose(e.data).ok()) {
            unsent_props_.push_back({std::move(e.data), now, e.deadline});
          }
        } break;
        case Event::kConfChange:
          if (!raw_->ProposeConfChange(e.cc).ok()) {
            log::Warn("membership change dropped: no leader",
                      {log::Hex("member-id", e.cc.node_id())});
          }
          break;
        case Event::kUnreachable:
          raw_->ReportUnreachable(e.peer);
          break;
        case Event::kSnapStatus:
          raw_->ReportSnapshot(
              e.peer, e.ok ? raft::SnapshotStatus::kFinish : raft::SnapshotStatus::kFailure);
          break;
        case Event::kTransfer:
          raw_->TransferLeader(e.peer);
          transfers_.push_back({e.peer,
                                opts_.clock->Now() + std::chrono::milliseconds(e.msg.index()),
                                std::move(e.done)});
          break;
      }
    }
    // Proposals dropped for want of a leader are retried once one is known.
    if (lead_.load() != 0) {
      const auto now = opts_.clock->Now();
      while (!unsent_props_.empty()) {
        // Not proposed once its client's deadline has passed.
        if (now < unsent_props_.front().deadline &&
            !raw_->Propose(unsent_props_.front().data).ok()) {
          break;
        }
        unsent_props_.pop_front();
      }
    }
    if (tick) raw_->Tick();
    MaybeStartReadRound();
    if (!ProcessReadies()) return false;
    ExpireWaits();
  } catch (const std::logic_error& e) {
    Fail(Internal(std::string("raft: ") + e.what()));
    return false;
  }
  return true;
}

bool RaftNode::ProcessReadies() {
  while (raw_->HasReady()) {
    raft::Ready rd = raw_->GetReady();
    Status st = HandleReady(rd);
    if (!st.ok()) {
      Fail(st);
      return false;
    }
    raw_->Advance(rd);
  }
  // Publish the status others read.
  const raft::Raft& r = raw_->raft();
  term_ = r.term();
  commit_ = r.log().committed();
  last_index_ = r.log().LastIndex();
  {
    std::lock_guard lock(status_mu_);
    match_.clear();
    if (r.state() == raft::StateType::kLeader) {
      for (const auto& [id, pr] : r.tracker().progress) match_[id] = pr.match;
    }
  }
  return true;
}

Status RaftNode::HandleReady(raft::Ready& rd) {
  // Published before the entries are applied: the applier's callbacks compare a leader's term
  // with the entries they apply.
  term_ = raw_->raft().term();
  if (rd.soft_state) {
    uint64_t lead = rd.soft_state->lead;
    bool leader = rd.soft_state->state == raft::StateType::kLeader;
    bool changed = lead != lead_.load() || leader != is_leader_.load();
    lead_ = lead;
    is_leader_ = leader;
    if (changed) {
      log::Info("raft leadership changed", {log::Hex("leader", lead), log::F("is-leader", leader),
                                            log::F("term", raw_->raft().term())});
      if (opts_.on_leader_change) opts_.on_leader_change(lead, leader);
    }
  }
  if (rd.snapshot) ETCDW_RETURN_IF_ERROR(InstallSnapshot(*rd.snapshot));

  // A leader sends before its own write, so followers append and sync while it syncs (Raft
  // thesis 10.2.1, as etcd does). Safe: the leader counts its own entries toward a commit only
  // when it steps the followers' acknowledgements, which this loop does after the write below
  // has returned. Other members must persist first (votes, acknowledgements).
  const bool send_first = is_leader_.load();
  if (send_first) SendMessages(rd.messages);

  if (!rd.entries.empty() || rd.hard_state) {
    ETCDW_RETURN_IF_ERROR(
        log_.Append(rd.entries, rd.hard_state ? &*rd.hard_state : nullptr, rd.must_sync)
            .WithContext("append to log"));
    if (rd.must_sync) ++synced_writes_;
  }

  if (!send_first) SendMessages(rd.messages);

  if (!rd.committed_entries.empty()) {
    // Published before applying: results are delivered while applying, and a caller that saw
    // one must not find the commit index behind the applied index.
    commit_ = std::max(commit_.load(), rd.committed_entries.back().index());
    ETCDW_RETURN_IF_ERROR(applier_.Apply(rd.committed_entries));
    ETCDW_RETURN_IF_ERROR(MaybeCompactLog());
  }
  ServeReads(rd.read_states);
  return Status::Ok();
}

void RaftNode::SendMessages(std::vector<raftpb::Message>& msgs) {
  if (msgs.empty() || !transport_) return;
  std::vector<raftpb::Message> plain;
  plain.reserve(msgs.size());
  for (auto& m : msgs) {
    if (m.type() == raftpb::MSG_SNAP) {
      // The state as of now (nothing is applied between Raft choosing the snapshot point and
      // this call), streamed by the transport.
      transport_->SendSnapshot(std::move(m), std::make_unique<StateSnapshotSource>(engine_));
    } else {
      plain.push_back(std::move(m));
    }
  }
  if (!plain.empty()) transport_->Send(std::move(plain));
}

// Below this many applied entries the log is not compacted for its size: entries are at most a
// request's size (1.5 MiB by default), so half of them is well under compact_log_bytes and
// compaction cannot repeat at every Ready.
constexpr uint64_t kMinEntriesForSizeCompaction = 64;

Status RaftNode::MaybeCompactLog() {
  const uint64_t applied = applier_.AppliedIndex();
  const uint64_t kept = applied - std::min(applied, log_.CompactedIndex());
  uint64_t keep = 0;  // applied entries to keep
  if (kept > opts_.snapshot_count + opts_.catch_up_entries) {
    keep = opts_.catch_up_entries;
  } else if (kept >= kMinEntriesForSizeCompaction && log_.SizeOnDisk() > opts_.compact_log_bytes) {
    // Large entries (1300 Txns of 100 values of 8 KiB are 1 GiB): half of them go, however few
    // they are; a follower further behind gets a snapshot, no dearer than that many entries.
    keep = std::min(opts_.catch_up_entries, kept / 2);
  } else {
    return Status::Ok();
  }
  // The applied state is written without a sync (the log holds what a crash would lose): it
  // must be durable before the entries that produced it go.
  ETCDW_RETURN_IF_ERROR(engine_.SyncWal().WithContext("compact the raft log"));
  return log_.Compact(applied - keep).WithContext("compact the raft log");
}

// The commit index in the hard state is synced only with entries or a vote, while the applied
// state is written whenever entries commit: after a crash the store may have applied entries the
// durable hard state does not count as committed yet. They were committed (only committed
// entries are applied) and are in the log, so the commit index is raised to the applied index.
Status RaftNode::ReconcileCommitWithApplied() {
  const uint64_t applied = kv_.ConsistentIndex();
  raftpb::HardState hs = log_.hard_state();
  ETCDW_RETURN_IF_ERROR(log_.CheckApplied(applied));
  if (applied <= hs.commit()) return Status::Ok();
  hs.set_commit(applied);
  return log_.Append({}, &hs, /*sync=*/true);
}

// ---------------------------------------------------------------------------------------------
// Reads

void RaftNode::MaybeStartReadRound() {
  if (read_round_ || next_round_.empty()) return;
  if (CanReadLocally()) {
    for (auto& w : next_round_) w(Status::Ok());
    next_round_.clear();
    return;
  }
  ReadRound round;
  round.ctx = storage::EncodeFixed64BE(opts_.member_id) + storage::EncodeFixed64BE(++read_seq_);
  round.waiters = std::move(next_round_);
  next_round_.clear();
  round.sent = round.first = opts_.clock->Now();
  raw_->ReadIndex(round.ctx);
  read_round_ = std::move(round);
}

void RaftNode::ServeReads(const std::vector<raft::ReadState>& states) {
  for (const auto& rs : states) {
    if (read_round_ && rs.request_ctx == read_round_->ctx) {
      ready_reads_.emplace_back(rs.index, std::move(read_round_->waiters));
      read_round_.reset();
    }
  }
  uint64_t applied = applier_.AppliedIndex();
  while (!ready_reads_.empty() && ready_reads_.front().first <= applied) {
    for (auto& w : ready_reads_.front().second) w(Status::Ok());
    ready_reads_.pop_front();
  }
}

void RaftNode::ExpireWaits() {
  auto now = opts_.clock->Now();
  if (read_round_ && now - read_round_->sent >= kReadRetry) {
    if (now - read_round_->first >= RequestTimeout()) {
      for (auto& w : read_round_->waiters) w(errors::Timeout());
      read_round_.reset();
    } else {
      // No answer (leader changed or a message was lost): ask again.
      read_round_->ctx =
          storage::EncodeFixed64BE(opts_.member_id) + storage::EncodeFixed64BE(++read_seq_);
      read_round_->sent = now;
      raw_->ReadIndex(read_round_->ctx);
    }
  }
  // Their waiters time out in the server (their clients were answered at their deadline).
  std::erase_if(unsent_props_, [&](const UnsentProposal& p) {
    return now - p.queued >= RequestTimeout() || now >= p.deadline;
  });
  for (size_t i = 0; i < transfers_.size();) {
    if (lead_.load() == transfers_[i].to) {
      transfers_[i].done(Status::Ok());
    } else if (now >= transfers_[i].deadline) {
      transfers_[i].done(Status(Code::kUnavailable,
                                "etcdserver: request timed out, leader transfer took too long"));
    } else {
      ++i;
      continue;
    }
    transfers_.erase(transfers_.begin() + static_cast<long>(i));
  }
}

// ---------------------------------------------------------------------------------------------
// Snapshots

Status RaftNode::InstallSnapshot(const raftpb::Snapshot& snap) {
  const uint64_t index = snap.metadata().index();
  const uint64_t term = snap.metadata().term();
  const std::string path = SnapshotPath(index);
  log::Info("installing snapshot",
            {log::F("index", index), log::F("term", term), log::F("path", path)});
  ETCDW_RETURN_IF_ERROR(mvcc::VerifySnapshotFile(path));
  // Mark the installation, so a crash in the middle redoes it at the next start.
  storage::Batch mark(engine_);
  mark.Put(storage::Column::kMeta, storage::meta::kInstallingSnapshot.key,
           EncodeIndexTerm(index, term));
  ETCDW_RETURN_IF_ERROR(engine_.Write(mark, true));
  ETCDW_RETURN_IF_ERROR(kv_.ReplaceState([&]() -> Status {
    ETCDW_RETURN_IF_ERROR(mvcc::ClearState(engine_));
    std::ifstream in(path, std::ios::binary);
    if (!in) return Unavailable("cannot read snapshot " + path);
    return mvcc::RestoreSnapshot(in, engine_);
  }));
  if (kv_.ConsistentIndex() != index) {
    return DataLoss("snapshot " + path + " holds state at index " +
                    std::to_string(kv_.ConsistentIndex()) + ", not " + std::to_string(index));
  }
  ETCDW_RETURN_IF_ERROR(membership_.Load(engine_));
  ETCDW_RETURN_IF_ERROR(log_.Reset(index, term));
  storage::Batch done(engine_);
  done.Delete(storage::Column::kMeta, storage::meta::kInstallingSnapshot.key);
  ETCDW_RETURN_IF_ERROR(engine_.Write(done, true));
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (opts_.on_snapshot_installed) opts_.on_snapshot_installed();
  log::Info("installed snapshot", {log::F("index", index), log::F("revision", kv_.Rev())});
  return Status::Ok();
}

Status RaftNode::RecoverInterruptedInstall() {
  ETCDW_ASSIGN_OR_RETURN(
      auto mark, engine_.Get(storage::Column::kMeta, storage::meta::kInstallingSnapshot.key));
  if (!mark) return Status::Ok();
  if (mark->size() != 16) return DataLoss("snapshot installation marker is corrupt");
  raftpb::Snapshot snap;
  snap.mutable_metadata()->set_index(storage::DecodeFixed64BE(mark->data()));
  snap.mutable_metadata()->set_term(storage::DecodeFixed64BE(mark->data() + 8));
  log::Warn("resuming an interrupted snapshot installation",
            {log::F("index", snap.metadata().index())});
  return InstallSnapshot(snap);
}

}  // namespace etcdw::member
