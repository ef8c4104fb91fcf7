// The durable Raft log and hard state, kept in the RaftLog and Meta columns of the engine.
// Entries are keyed by big-endian index. Writes are staged into a caller's Batch so that
// entries, hard state and anything else the caller needs land atomically in one (synced) write;
// the caller then calls Committed...() to advance this object's in-memory view.
//
// Thread-safety: one writer thread; const readers may run concurrently with it only through
// Entries()/Term() on indexes the writer is not truncating.
//
// Terms are kept in memory as runs (the first index of each term), so Term() of an entry this
// process appended needs no read and no parse: Raft asks for terms several times per Ready.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/raft.pb.h"
#include "etcdw/storage/engine.h"

namespace etcdw::storage {

class RaftLog {
 public:
  explicit RaftLog(Engine& engine) : engine_(engine) {}

  // Reads the log bounds and hard state from the engine.
  Status Load();

  // Index of the first entry held (compacted entries are gone); LastIndex()+1 when empty.
  uint64_t FirstIndex() const { return first_; }
  uint64_t LastIndex() const { return last_; }
  // Index and term of the last entry removed by compaction (0/0 if none).
  uint64_t CompactedIndex() const { return first_ - 1; }
  uint64_t CompactedTerm() const { return compacted_term_; }
  const raftpb::HardState& hard_state() const { return hard_state_; }

  // Term of entry `index`; for CompactedIndex() the recorded term. OutOfRange outside the log.
  Result<uint64_t> Term(uint64_t index) const;
  // Entries [lo, hi), at least one when lo < hi, stopping early once max_bytes is exceeded.
  Result<std::vector<raftpb::Entry>> Entries(uint64_t lo, uint64_t hi, uint64_t max_bytes) const;

  // Stages entries (contiguous, first index <= LastIndex()+1); any existing entries from the
  // first new index on are replaced.
  void StageAppend(Batch& batch, const std::vector<raftpb::Entry>& entries);
  void StageHardState(Batch& batch, const raftpb::HardState& hs);
  // Stages removal of every entry with index <= `index` (index <= LastIndex()).
  void StageCompact(Batch& batch, uint64_t index, uint64_t term);
  // Stages removal of every entry: the log restarts after (index, term), a snapshot's point.
  void StageReset(Batch& batch, uint64_t index, uint64_t term);

  // After the batch holding the staged changes has been written: update the in-memory view.
  void CommittedAppend(const std::vector<raftpb::Entry>& entries);
  void CommittedHardState(const raftpb::HardState& hs) { hard_state_ = hs; }
  void CommittedCompact(uint64_t index, uint64_t term);
  void CommittedReset(uint64_t index, uint64_t term);

 private:
  Engine& engine_;
  uint64_t first_ = 1;
  uint64_t last_ = 0;
  uint64_t compacted_term_ = 0;
  raftpb::HardState hard_state_;

  // Term runs of the entries [runs_from_, last_]: runs_[k] = (first index, term), ascending.
  // Entries below runs_from_ (held before this process started) are read from the engine.
  struct TermRun {
    uint64_t first;
    uint64_t term;
  };
  void TruncateRunsFrom(uint64_t index);  // forget terms of entries >= index
  std::optional<uint64_t> CachedTerm(uint64_t index) const;
  mutable std::mutex runs_mu_;  // readers may call Term() concurrently with the writer
  std::vector<TermRun> runs_;
  uint64_t runs_from_ = 1;
};

}  // namespace etcdw::storage
