// What the Raft core reads of the durable log. The application persists entries, hard state
// and snapshots as each Ready tells it to, and exposes them through this interface; the core
// never writes through it. MemoryStorage is the in-memory implementation used by tests and the
// simulation. An error where the core needs the data (other than the errors below, where they
// are expected) is a broken invariant: the core throws std::logic_error (raw_node.h, "Broken
// invariants").
#pragma once

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/raft.pb.h"

namespace etcdw::raft {

// Errors of Storage, by code:
//   kOutOfRange  the index is below the first available one (compacted)
//   kNotFound    the index is above the last one
//   kUnavailable a snapshot cannot be produced right now (try again later)
Status ErrCompacted();
Status ErrUnavailable();
Status ErrSnapshotTemporarilyUnavailable();
bool IsCompacted(const Status& st);

class Storage {
 public:
  virtual ~Storage() = default;
  // The persisted hard state and membership at start.
  virtual Result<std::pair<raftpb::HardState, raftpb::ConfState>> InitialState() const = 0;
  // Entries [lo, hi); at least one if lo < hi, then stops once max_size bytes are exceeded.
  virtual Result<std::vector<raftpb::Entry>> Entries(uint64_t lo, uint64_t hi,
                                                     uint64_t max_size) const = 0;
  // Term of entry i, for i in [FirstIndex()-1, LastIndex()] (FirstIndex()-1: the snapshot's).
  virtual Result<uint64_t> Term(uint64_t i) const = 0;
  virtual uint64_t FirstIndex() const = 0;
  virtual uint64_t LastIndex() const = 0;
  // The most recent snapshot (metadata); its state is fetched by the transport out of band.
  virtual Result<raftpb::Snapshot> Snapshot() const = 0;
};

// Storage kept in memory. Thread-safe.
class MemoryStorage : public Storage {
 public:
  MemoryStorage();

  Result<std::pair<raftpb::HardState, raftpb::ConfState>> InitialState() const override;
  Result<std::vector<raftpb::Entry>> Entries(uint64_t lo, uint64_t hi,
                                             uint64_t max_size) const override;
  Result<uint64_t> Term(uint64_t i) const override;
  uint64_t FirstIndex() const override;
  uint64_t LastIndex() const override;
  Result<raftpb::Snapshot> Snapshot() const override;

  void SetHardState(const raftpb::HardState& hs);
  // Replaces the log with the snapshot (it must be newer than the current one).
  Status ApplySnapshot(const raftpb::Snapshot& snap);
  // Records a snapshot at applied index i (<= LastIndex()).
  Result<raftpb::Snapshot> CreateSnapshot(uint64_t i, const raftpb::ConfState* cs);
  // Discards entries before index `compact_index` (which becomes the dummy entry).
  Status Compact(uint64_t compact_index);
  // Appends entries, replacing any existing entries from the first new index on.
  Status Append(const std::vector<raftpb::Entry>& entries);

 private:
  uint64_t FirstIndexLocked() const { return ents_.front().index() + 1; }
  uint64_t LastIndexLocked() const { return ents_.front().index() + ents_.size() - 1; }

  mutable std::mutex mu_;
  raftpb::HardState hard_state_ ABSL_GUARDED_BY(mu_);
  raftpb::Snapshot snapshot_ ABSL_GUARDED_BY(mu_);
  // ents_[0] is a dummy entry holding the index and term of the last compacted entry.
  std::vector<raftpb::Entry> ents_ ABSL_GUARDED_BY(mu_);
};

// Total serialized size of entries, as the size limits count it.
uint64_t EntriesSize(const std::vector<raftpb::Entry>& ents);
// Keeps a prefix of `ents` within max_size bytes (always at least one entry).
void LimitSize(std::vector<raftpb::Entry>& ents, uint64_t max_size);

}  // namespace etcdw::raft
