// The Raft log as the core sees it: the entries in Storage (persisted) followed by the
// "unstable" part (entries and possibly a snapshot the application has not persisted yet),
// with the commit and applied indexes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/raft.pb.h"
#include "etcdw/raft/storage.h"

namespace etcdw::raft {

// Entries (and a snapshot) not yet persisted. entries[i] has index offset + i.
struct Unstable {
  std::optional<raftpb::Snapshot> snapshot;
  std::vector<raftpb::Entry> entries;
  uint64_t offset = 0;

  std::optional<uint64_t> MaybeFirstIndex() const;
  std::optional<uint64_t> MaybeLastIndex() const;
  std::optional<uint64_t> MaybeTerm(uint64_t i) const;
  // Entries up to (i, t) have been persisted: drop them (if still the same).
  void StableTo(uint64_t i, uint64_t t);
  void StableSnapTo(uint64_t i);
  void Restore(const raftpb::Snapshot& s);
  // Appends, replacing any unstable entries from the first new index on.
  void TruncateAndAppend(const std::vector<raftpb::Entry>& ents);
  // Entries [lo, hi), which must be within the unstable range.
  std::vector<raftpb::Entry> Slice(uint64_t lo, uint64_t hi) const;
};

class Log {
 public:
  // Starts from the storage's state; committed and applied begin at the snapshot index.
  Log(const Storage* storage, uint64_t max_committed_size_per_ready);

  uint64_t FirstIndex() const;
  uint64_t LastIndex() const;
  uint64_t LastTerm() const;
  // Term of entry i. 0 (and OK) outside [FirstIndex()-1, LastIndex()]; an error if the
  // storage has compacted it meanwhile.
  Result<uint64_t> Term(uint64_t i) const;
  uint64_t TermOrZero(uint64_t i) const;
  bool MatchTerm(uint64_t i, uint64_t term) const;
  // Raft's election restriction: is a log ending at (lasti, term) at least as up to date?
  bool IsUpToDate(uint64_t lasti, uint64_t term) const;

  // Follower side of AppendEntries. Returns the last index of the new entries if the log
  // matched (index, log_term); nullopt otherwise.
  std::optional<uint64_t> MaybeAppend(uint64_t index, uint64_t log_term, uint64_t committed,
                                      const std::vector<raftpb::Entry>& ents);
  // Appends (truncating a conflicting unstable suffix); returns the new last index.
  uint64_t Append(const std::vector<raftpb::Entry>& ents);
  // The first index whose entry conflicts with (or is missing from) the log; 0 if none.
  uint64_t FindConflict(const std::vector<raftpb::Entry>& ents) const;
  // The largest index <= `index` whose term is <= `term`, with that term (a rejection hint
  // that lets a leader skip a whole term at once).
  std::pair<uint64_t, uint64_t> FindConflictByTerm(uint64_t index, uint64_t term) const;

  std::vector<raftpb::Entry> UnstableEntries() const { return unstable_.entries; }
  const std::optional<raftpb::Snapshot>& UnstableSnapshot() const { return unstable_.snapshot; }
  // Committed entries not yet applied, up to the size limit.
  std::vector<raftpb::Entry> NextCommittedEntries() const;
  bool HasNextCommittedEntries() const;
  Result<raftpb::Snapshot> Snapshot() const;

  // Entries from i on, up to max_size bytes (at least one).
  Result<std::vector<raftpb::Entry>> Entries(uint64_t i, uint64_t max_size) const;
  Result<std::vector<raftpb::Entry>> Slice(uint64_t lo, uint64_t hi, uint64_t max_size) const;

  void CommitTo(uint64_t to);
  void AppliedTo(uint64_t i);
  void StableTo(uint64_t i, uint64_t t) { unstable_.StableTo(i, t); }
  void StableSnapTo(uint64_t i) { unstable_.StableSnapTo(i); }
  // Commits up to max_index if that entry is from `term` (Raft commits only entries of the
  // leader's term by counting replicas). Returns whether the commit index moved.
  bool MaybeCommit(uint64_t max_index, uint64_t term);
  void Restore(const raftpb::Snapshot& s);

  uint64_t committed() const { return committed_; }
  uint64_t applied() const { return applied_; }

 private:
  const Storage* storage_;
  Unstable unstable_;
  uint64_t committed_ = 0;
  uint64_t applied_ = 0;
  uint64_t max_next_size_;
};

}  // namespace etcdw::raft
