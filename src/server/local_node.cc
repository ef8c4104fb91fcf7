#include "etcdw/server/local_node.h"

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/logging.h"

namespace etcdw::server {

LocalNode::LocalNode(storage::Engine& engine, Applier& applier, LocalNodeOptions opts)
    : engine_(engine), log_(engine), applier_(applier), opts_(std::move(opts)) {}

LocalNode::~LocalNode() { Stop(); }

Status LocalNode::Start() {
  ETCDW_RETURN_IF_ERROR(log_.Load());
  raftpb::HardState hs = log_.hard_state();

  // Replay: every entry in the log is committed (this member is the whole quorum); apply those
  // the state machine has not applied yet. The applier skips entries at or below its index.
  const uint64_t first = log_.FirstIndex(), last = log_.LastIndex();
  for (uint64_t lo = first; lo <= last;) {
    ETCDW_ASSIGN_OR_RETURN(auto entries, log_.Entries(lo, last + 1, uint64_t{64} << 20));
    ETCDW_RETURN_IF_ERROR(applier_.Apply(entries));
    lo = entries.back().index() + 1;
  }
  if (last >= first)
    log::Info("replayed log", {log::F("first-index", first), log::F("last-index", last)});

  // Starting is an election won alone: a new term, opened by an empty entry as a Raft leader
  // does, so terms and indexes move like etcd's on a restarted single member.
  hs.set_term(std::max<uint64_t>(hs.term(), 1) + 1);
  hs.set_vote(opts_.member_id);
  raftpb::Entry noop;
  noop.set_term(hs.term());
  noop.set_index(last + 1);
  hs.set_commit(noop.index());
  std::vector<raftpb::Entry> entries{noop};
  storage::Batch batch(engine_);
  log_.StageAppend(batch, entries);
  log_.StageHardState(batch, hs);
  ETCDW_RETURN_IF_ERROR(engine_.Write(batch, /*sync=*/true));
  log_.CommittedAppend(entries);
  log_.CommittedHardState(hs);
  ETCDW_RETURN_IF_ERROR(applier_.Apply(entries));
  term_ = hs.term();
  commit_ = noop.index();
  applied_ = noop.index();

  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  running_ = true;
  loop_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void LocalNode::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !loop_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  running_ = false;
}

Status LocalNode::Propose(std::string data) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !running_) return errors::Stopped();
    pending_.push_back(std::move(data));
  }
  cv_.notify_one();
  return Status::Ok();
}

void LocalNode::ReadIndex(std::function<void(Status)> ready) {
  // Writes are acknowledged only after they are applied, so the applied state already
  // includes every acknowledged write.
  ready(running_ ? Status::Ok() : errors::Stopped());
}

bool LocalNode::Process(std::vector<raftpb::Entry>& entries) {
  storage::Batch batch(engine_);
  log_.StageAppend(batch, entries);
  raftpb::HardState hs = log_.hard_state();
  hs.set_commit(entries.back().index());
  log_.StageHardState(batch, hs);
  // Compact the log behind the applied index. Entries applied before this write are durable
  // once it is synced (one write-ahead log), so they are no longer needed for recovery.
  uint64_t applied = applied_.load();
  bool compact = applied > log_.CompactedIndex() + opts_.snapshot_count + kCatchUpEntries;
  uint64_t compact_to = applied - kCatchUpEntries;
  uint64_t compact_term = 0;
  if (compact) {
    auto t = log_.Term(compact_to);
    compact = t.ok();
    if (t.ok()) compact_term = t.value();
  }
  if (compact) log_.StageCompact(batch, compact_to, compact_term);

  Status st = engine_.Write(batch, /*sync=*/true);
  if (!st.ok()) {
    if (opts_.on_fatal) opts_.on_fatal(st.WithContext("append to log"));
    return false;
  }
  ++synced_writes_;
  log_.CommittedAppend(entries);
  log_.CommittedHardState(hs);
  if (compact) log_.CommittedCompact(compact_to, compact_term);
  commit_ = entries.back().index();

  st = applier_.Apply(entries);
  if (!st.ok()) {
    if (opts_.on_fatal) opts_.on_fatal(st);
    return false;
  }
  applied_ = entries.back().index();
  return true;
}

void LocalNode::Loop() {
  std::vector<raftpb::Entry> entries;
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) break;  // stopping with nothing queued
      entries.clear();
      size_t bytes = 0;
      uint64_t index = log_.LastIndex();
      while (!pending_.empty() && entries.size() < opts_.max_batch_entries &&
             (bytes < opts_.max_batch_bytes || entries.empty())) {
        raftpb::Entry& e = entries.emplace_back();
        e.set_term(term_.load());
        e.set_index(++index);
        bytes += pending_.front().size();
        e.set_data(std::move(pending_.front()));
        pending_.pop_front();
      }
    }
    if (!Process(entries)) {
      std::lock_guard lock(mu_);
      stopping_ = true;
      pending_.clear();
      break;
    }
  }
  running_ = false;
}

}  // namespace etcdw::server
