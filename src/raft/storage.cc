#include "etcdw/raft/storage.h"

namespace etcdw::raft {

Status ErrCompacted() {
  return Status(Code::kOutOfRange, "requested index is unavailable due to compaction");
}
Status ErrUnavailable() {
  return Status(Code::kNotFound, "requested entry at index is unavailable");
}
Status ErrSnapshotTemporarilyUnavailable() {
  return Status(Code::kUnavailable, "snapshot is temporarily unavailable");
}
bool IsCompacted(const Status& st) { return st.code() == Code::kOutOfRange; }

uint64_t EntriesSize(const std::vector<raftpb::Entry>& ents) {
  uint64_t n = 0;
  for (const auto& e : ents) n += e.ByteSizeLong();
  return n;
}

void LimitSize(std::vector<raftpb::Entry>& ents, uint64_t max_size) {
  if (ents.empty()) return;
  uint64_t size = ents[0].ByteSizeLong();
  size_t keep = 1;
  for (; keep < ents.size(); ++keep) {
    size += ents[keep].ByteSizeLong();
    if (size > max_size) break;
  }
  ents.resize(keep);
}

MemoryStorage::MemoryStorage() { ents_.emplace_back(); }

Result<std::pair<raftpb::HardState, raftpb::ConfState>> MemoryStorage::InitialState() const {
  std::lock_guard lock(mu_);
  return std::make_pair(hard_state_, snapshot_.metadata().conf_state());
}

Result<std::vector<raftpb::Entry>> MemoryStorage::Entries(uint64_t lo, uint64_t hi,
                                                          uint64_t max_size) const {
  std::lock_guard lock(mu_);
  uint64_t offset = ents_.front().index();
  if (lo <= offset) return ErrCompacted();
  if (hi > LastIndexLocked() + 1) return ErrUnavailable();
  std::vector<raftpb::Entry> out(ents_.begin() + static_cast<long>(lo - offset),
                                 ents_.begin() + static_cast<long>(hi - offset));
  LimitSize(out, max_size);
  return out;
}

Result<uint64_t> MemoryStorage::Term(uint64_t i) const {
  std::lock_guard lock(mu_);
  uint64_t offset = ents_.front().index();
  if (i < offset) return ErrCompacted();
  if (i - offset >= ents_.size()) return ErrUnavailable();
  return ents_[i - offset].term();
}

uint64_t MemoryStorage::FirstIndex() const {
  std::lock_guard lock(mu_);
  return FirstIndexLocked();
}

uint64_t MemoryStorage::LastIndex() const {
  std::lock_guard lock(mu_);
  return LastIndexLocked();
}

Result<raftpb::Snapshot> MemoryStorage::Snapshot() const {
  std::lock_guard lock(mu_);
  return snapshot_;
}

void MemoryStorage::SetHardState(const raftpb::HardState& hs) {
  std::lock_guard lock(mu_);
  hard_state_ = hs;
}

Status MemoryStorage::ApplySnapshot(const raftpb::Snapshot& snap) {
  std::lock_guard lock(mu_);
  if (snapshot_.metadata().index() >= snap.metadata().index()) {
    return Status(Code::kFailedPrecondition, "requested index is older than the existing snapshot");
  }
  snapshot_ = snap;
  ents_.clear();
  raftpb::Entry& dummy = ents_.emplace_back();
  dummy.set_index(snap.metadata().index());
  dummy.set_term(snap.metadata().term());
  return Status::Ok();
}

Result<raftpb::Snapshot> MemoryStorage::CreateSnapshot(uint64_t i, const raftpb::ConfState* cs) {
  std::lock_guard lock(mu_);
  if (i <= snapshot_.metadata().index()) {
    return Status(Code::kFailedPrecondition, "requested index is older than the existing snapshot");
  }
  if (i > LastIndexLocked()) return Internal("snapshot index is beyond the last entry");
  uint64_t offset = ents_.front().index();
  // Compacted past i (beyond the last snapshot): the term of entry i is gone.
  if (i < offset) return ErrCompacted();
  snapshot_.mutable_metadata()->set_index(i);
  snapshot_.mutable_metadata()->set_term(ents_[i - offset].term());
  if (cs) *snapshot_.mutable_metadata()->mutable_conf_state() = *cs;
  return snapshot_;
}

Status MemoryStorage::Compact(uint64_t compact_index) {
  std::lock_guard lock(mu_);
  uint64_t offset = ents_.front().index();
  if (compact_index <= offset) return ErrCompacted();
  if (compact_index > LastIndexLocked()) return Internal("compact index is beyond the last entry");
  uint64_t i = compact_index - offset;
  std::vector<raftpb::Entry> rest;
  rest.reserve(ents_.size() - i);
  raftpb::Entry& dummy = rest.emplace_back();
  dummy.set_index(ents_[i].index());
  dummy.set_term(ents_[i].term());
  rest.insert(rest.end(), ents_.begin() + static_cast<long>(i + 1), ents_.end());
  ents_ = std::move(rest);
  return Status::Ok();
}

Status MemoryStorage::Append(const std::vector<raftpb::Entry>& entries) {
  if (entries.empty()) return Status::Ok();
  std::lock_guard lock(mu_);
  uint64_t first = FirstIndexLocked();
  uint64_t last = entries.back().index();
  if (last < first) return Status::Ok();  // everything is already compacted
  // Skip the part that is already compacted.
  size_t skip = entries.front().index() < first ? first - entries.front().index() : 0;
  uint64_t from = entries[skip].index();
  uint64_t offset = ents_.front().index();
  if (from - offset > ents_.size()) {
    return Internal("missing log entry before index " + std::to_string(from));
  }
  ents_.resize(from - offset);  // drop the conflicting suffix
  ents_.insert(ents_.end(), entries.begin() + static_cast<long>(skip), entries.end());
  return Status::Ok();
}

}  // namespace etcdw::raft
