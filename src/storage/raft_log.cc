#include "etcdw/storage/raft_log.h"

#include <algorithm>
#include <string>

namespace etcdw::storage {

namespace {
const char kHardStateKey[] = "raft/hard_state";
// Index and term of the last compacted entry: 16 bytes, big-endian.
const char kCompactedKey[] = "raft/compacted";
}  // namespace

Status RaftLog::Load() {
  ETCDW_ASSIGN_OR_RETURN(auto hs, engine_.Get(Column::kMeta, kHardStateKey));
  if (hs && !hard_state_.ParseFromString(*hs)) {
    return DataLoss("raft hard state record is corrupt");
  }
  ETCDW_ASSIGN_OR_RETURN(auto compacted, engine_.Get(Column::kMeta, kCompactedKey));
  uint64_t compacted_index = 0;
  if (compacted) {
    if (compacted->size() != 16) return DataLoss("raft log compaction record is corrupt");
    compacted_index = DecodeFixed64BE(compacted->data());
    compacted_term_ = DecodeFixed64BE(compacted->data() + 8);
  }
  first_ = compacted_index + 1;
  last_ = compacted_index;
  auto it = engine_.NewIterator(Column::kRaftLog);
  it->SeekToLast();
  if (it->Valid()) {
    if (it->key().size() != 8) return DataLoss("raft log key is corrupt");
    last_ = DecodeFixed64BE(it->key().data());
    it->SeekToFirst();
    uint64_t first_held = DecodeFixed64BE(it->key().data());
    if (first_held != first_) {
      return DataLoss("raft log starts at index " + std::to_string(first_held) + ", expected " +
                      std::to_string(first_));
    }
  }
  ETCDW_RETURN_IF_ERROR(it->status());
  std::lock_guard lock(runs_mu_);
  runs_.clear();
  runs_from_ = last_ + 1;
  return Status::Ok();
}

std::optional<uint64_t> RaftLog::CachedTerm(uint64_t index) const {
  std::lock_guard lock(runs_mu_);
  if (index < runs_from_ || runs_.empty()) return std::nullopt;
  // The last run starting at or before `index`.
  auto it = std::upper_bound(runs_.begin(), runs_.end(), index,
                             [](uint64_t i, const TermRun& r) { return i < r.first; });
  if (it == runs_.begin()) return std::nullopt;
  return std::prev(it)->term;
}

void RaftLog::TruncateRunsFrom(uint64_t index) {
  while (!runs_.empty() && runs_.back().first >= index) runs_.pop_back();
  if (index < runs_from_) {
    runs_.clear();
    runs_from_ = index;
  }
}

Result<uint64_t> RaftLog::Term(uint64_t index) const {
  if (index == first_ - 1) return compacted_term_;
  if (index < first_ || index > last_) {
    return Status(Code::kOutOfRange, "raft log has no entry " + std::to_string(index));
  }
  if (auto cached = CachedTerm(index)) return *cached;
  ETCDW_ASSIGN_OR_RETURN(auto v, engine_.Get(Column::kRaftLog, EncodeFixed64BE(index)));
  raftpb::Entry e;
  if (!v || !e.ParseFromString(*v)) {
    return DataLoss("raft log entry " + std::to_string(index) + " is missing or corrupt");
  }
  return e.term();
}

Result<std::vector<raftpb::Entry>> RaftLog::Entries(uint64_t lo, uint64_t hi,
                                                    uint64_t max_bytes) const {
  std::vector<raftpb::Entry> out;
  if (lo >= hi) return out;
  if (lo < first_ || hi > last_ + 1) {
    return Status(Code::kOutOfRange, "raft log range [" + std::to_string(lo) + ", " +
                                         std::to_string(hi) + ") is outside the log");
  }
  ReadOptions ro;
  ro.upper_bound = EncodeFixed64BE(hi);
  auto it = engine_.NewIterator(Column::kRaftLog, ro);
  // Like etcd's limitSize: the total size stays within max_bytes, except that the first entry
  // is returned whatever its size.
  uint64_t bytes = 0, expect = lo;
  bool limited = false;
  for (it->Seek(EncodeFixed64BE(lo)); it->Valid(); it->Next()) {
    if (!out.empty() && bytes + it->value().size() > max_bytes) {
      limited = true;
      break;
    }
    raftpb::Entry e;
    if (!e.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())) ||
        e.index() != expect) {
      return DataLoss("raft log entry " + std::to_string(expect) + " is missing or corrupt");
    }
    bytes += it->value().size();
    out.push_back(std::move(e));
    ++expect;
  }
  ETCDW_RETURN_IF_ERROR(it->status());
  if (!limited && expect < hi) {
    return DataLoss("raft log entry " + std::to_string(expect) + " is missing");
  }
  return out;
}

void RaftLog::StageAppend(Batch& batch, const std::vector<raftpb::Entry>& entries) {
  if (entries.empty()) return;
  uint64_t from = entries.front().index();
  // Replacing a suffix: delete the old entries beyond the new tail.
  if (from <= last_) {
    uint64_t new_last = entries.back().index();
    if (new_last < last_) {
      batch.DeleteRange(Column::kRaftLog, EncodeFixed64BE(new_last + 1),
                        EncodeFixed64BE(last_ + 1));
    }
  }
  std::string buf;
  for (const auto& e : entries) {
    buf.clear();
    e.SerializeToString(&buf);
    batch.Put(Column::kRaftLog, EncodeFixed64BE(e.index()), buf);
  }
}

void RaftLog::StageHardState(Batch& batch, const raftpb::HardState& hs) {
  batch.Put(Column::kMeta, kHardStateKey, hs.SerializeAsString());
}

void RaftLog::StageCompact(Batch& batch, uint64_t index, uint64_t term) {
  if (index < first_) return;
  batch.DeleteRange(Column::kRaftLog, EncodeFixed64BE(first_), EncodeFixed64BE(index + 1));
  std::string rec = EncodeFixed64BE(index) + EncodeFixed64BE(term);
  batch.Put(Column::kMeta, kCompactedKey, rec);
}

void RaftLog::CommittedAppend(const std::vector<raftpb::Entry>& entries) {
  if (entries.empty()) return;
  {
    std::lock_guard lock(runs_mu_);
    // The cache covers [runs_from_, last_] and the entries are contiguous with the log, so
    // after dropping the replaced suffix the new runs continue it.
    TruncateRunsFrom(entries.front().index());
    for (const auto& e : entries) {
      if (runs_.empty() || runs_.back().term != e.term()) runs_.push_back({e.index(), e.term()});
    }
  }
  last_ = entries.back().index();
}

void RaftLog::CommittedCompact(uint64_t index, uint64_t term) {
  if (index < first_) return;
  first_ = index + 1;
  compacted_term_ = term;
  if (last_ < index) last_ = index;
  std::lock_guard lock(runs_mu_);
  // Runs wholly below the new first index go; the one holding it stays.
  size_t drop = 0;
  while (drop + 1 < runs_.size() && runs_[drop + 1].first <= first_) ++drop;
  runs_.erase(runs_.begin(), runs_.begin() + static_cast<std::ptrdiff_t>(drop));
  if (runs_from_ < first_) runs_from_ = first_;
  if (first_ > last_) {
    runs_.clear();
    runs_from_ = first_;
  }
}

}  // namespace etcdw::storage

namespace etcdw::storage {

void RaftLog::StageReset(Batch& batch, uint64_t index, uint64_t term) {
  batch.DeleteRange(Column::kRaftLog, EncodeFixed64BE(0), EncodeFixed64BE(UINT64_MAX));
  batch.Put(Column::kMeta, "raft/compacted", EncodeFixed64BE(index) + EncodeFixed64BE(term));
}

void RaftLog::CommittedReset(uint64_t index, uint64_t term) {
  first_ = index + 1;
  last_ = index;
  compacted_term_ = term;
  std::lock_guard lock(runs_mu_);
  runs_.clear();
  runs_from_ = first_;
}

}  // namespace etcdw::storage
