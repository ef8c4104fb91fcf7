// The durable Raft log and hard state: a directory of preallocated segment files of its own
// (member/wal, as etcd's WAL), not a column of the engine. Appends overwrite zeros in space
// that was allocated and synced beforehand, so a synced append costs one data write and no
// metadata write (format and reasons: src/storage/raft_log_format.h, docs/design.md "The Raft
// log").
//
// The applied state in the engine is written after the log and not synced with it: after a
// crash the engine may be behind the log, and the entries it lacks are applied again from the
// log. So entries may be compacted away only once the state they produced is durable in the
// engine (the caller syncs the engine's write-ahead log before Compact()).
//
// Thread-safety: one writer thread calls Append/Compact/Reset; Term() and Entries() may be
// called from other threads at the same time, on indexes the writer is not replacing.
#pragma once

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "etcdw/common/metrics.h"
#include "etcdw/common/status.h"
#include "etcdw/raft.pb.h"

namespace etcdw::storage {

class Engine;

struct RaftLogOptions {
  // Size each segment is preallocated to. A segment fills up and the next one starts; a write
  // larger than a whole segment extends the one it lands in.
  uint64_t segment_bytes = uint64_t{16} << 20;
};

// What the log's appends cost (etcd's etcd_disk_wal_* metrics).
struct RaftLogStats {
  // Seconds per synced append: the write and its sync (one system call when the append syncs
  // itself), or the sync alone after unsynced writes. etcd's buckets: 1 ms doubling to 8.192 s.
  common::Histogram sync_seconds{common::ExponentialBuckets(0.001, 2, 14)};
  common::Counter bytes_written;  // records appended (entries and hard states)
};

class RaftLog {
 public:
  explicit RaftLog(std::string dir, RaftLogOptions opts = {});
  ~RaftLog();
  RaftLog(const RaftLog&) = delete;
  RaftLog& operator=(const RaftLog&) = delete;

  // Reads the log in `dir`. A missing directory is an empty log; it is created at the first
  // write. A log kept in `engine`'s RaftLog column (data directories of earlier versions) is
  // first moved into `dir`, atomically. Checksums are verified; a record cut short by a crash
  // at the end of the last segment is dropped, anything else damaged is kDataLoss.
  Status Open(Engine* engine);

  const RaftLogStats& stats() const { return stats_; }

  // Index of the first entry held (compacted entries are gone); LastIndex()+1 when empty.
  uint64_t FirstIndex() const { return first_.load(); }
  uint64_t LastIndex() const { return last_.load(); }
  // Index and term of the last entry removed by compaction (0/0 if none).
  uint64_t CompactedIndex() const { return first_.load() - 1; }
  uint64_t CompactedTerm() const;
  raftpb::HardState hard_state() const;

  // Whether the log can carry on a store that applied the entries up to `applied`: DataLoss
  // when entries it has not applied are compacted away (applied < CompactedIndex()) or it
  // applied entries the log lacks (applied > LastIndex()).
  Status CheckApplied(uint64_t applied) const;

  // Term of entry `index`; for CompactedIndex() the recorded term. OutOfRange outside the log.
  Result<uint64_t> Term(uint64_t index) const;
  // Entries [lo, hi), at least one when lo < hi, stopping early once max_bytes is exceeded.
  Result<std::vector<raftpb::Entry>> Entries(uint64_t lo, uint64_t hi, uint64_t max_bytes) const;

  // Appends `entries` (contiguous, first index in [FirstIndex(), LastIndex()+1]; existing entries
  // from the first new index on are replaced) and `hs` if not null, in one write. With `sync`
  // they are on stable storage on return. A failed write leaves the log unusable: the caller
  // must stop (the file's state after a failed write or sync is unknown).
  Status Append(const std::vector<raftpb::Entry>& entries, const raftpb::HardState* hs, bool sync);
  // Forgets every entry with index <= `index` (at most LastIndex()); segments holding only such
  // entries are deleted.
  Status Compact(uint64_t index);
  // Removes every entry: the log restarts after (index, term), a snapshot's point. Durable on
  // return.
  Status Reset(uint64_t index, uint64_t term);

  // Number of segment files, and about the bytes they take (each is at least segment_bytes).
  size_t SegmentCount() const;
  uint64_t SizeOnDisk() const { return SegmentCount() * opts_.segment_bytes; }

 private:
  struct File;
  struct Segment {
    uint64_t seq = 0;
    std::string path;
    std::shared_ptr<File> file;
    uint64_t prev_index = 0;  // from its start record
  };
  // Where an entry's record is: segment seq, offset and length of the serialized entry.
  struct Loc {
    uint64_t seq;
    uint64_t offset;
    uint32_t length;
    uint64_t term;
  };

  Status Load();
  Status LoadSegment(size_t k, bool last);
  Status Migrate(Engine& engine);
  Status PrepareWriter();
  Status Cut(uint64_t prev_index, uint64_t prev_term, bool reset);
  void StartSpare();
  Status RemoveSegments(const std::vector<Segment>& doomed);
  Result<uint64_t> TermLocked(uint64_t index) const;
  void TruncateLocked(uint64_t after);  // drops entries > after

  const std::string dir_;
  const RaftLogOptions opts_;

  // Guards what readers touch. The writer changes these fields under it and reads them without
  // it (no one else changes them).
  mutable std::mutex mu_;
  std::atomic<uint64_t> first_{1};
  std::atomic<uint64_t> last_{0};
  uint64_t compacted_term_ ABSL_GUARDED_BY(mu_) = 0;
  raftpb::HardState hard_state_ ABSL_GUARDED_BY(mu_);
  std::deque<Segment> segments_ ABSL_GUARDED_BY(mu_);  // ascending seq
  std::deque<Loc> locs_ ABSL_GUARDED_BY(mu_);          // entries [first_, last_]

  // Writer state: the writer thread only.
  bool writer_ready_ = false;
  uint64_t write_offset_ = 0;  // in the last segment
  uint64_t start_end_ = 0;     // end of the last segment's start record
  uint64_t dirty_end_ = 0;     // bytes after write_offset_ a crash left non-zero
  bool unsynced_ = false;
  std::future<Status> spare_;
  RaftLogStats stats_;
  std::string scratch_;                              // records of one write
  std::vector<std::pair<uint64_t, size_t>> placed_;  // each entry's offset and length in it
};

}  // namespace etcdw::storage
