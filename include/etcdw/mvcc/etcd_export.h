// Our store written as etcd's backend: the bbolt database etcd 3.4 keeps in member/snap/db and
// streams from Maintenance.Snapshot, so that `etcdctl snapshot status/restore` and an etcd
// started on the restored directory see our history. The reverse of the import (import.h).
//
// The buckets written (big-endian integers; etcd 3.4's layout, as data_dir's reader of it
// documents in src/data_dir/etcd_backend.h):
//   alarm            marshalled etcdserverpb.AlarmMember -> "" (the alarms given)
//   auth             authRevision -> be64 1 (auth off, as a new etcd 3.4 leaves it)
//   authRoles, authUsers   empty
//   cluster          clusterVersion -> e.g. "3.4.0" (when given)
//   key              <be64 main>'_'<be64 sub> (+'t' for a deletion) -> mvccpb.KeyValue, every
//                    version our store keeps, in revision order (a deletion's KeyValue holds only
//                    the key, as etcd writes it)
//   lease            <be64 ID> -> leasepb.Lease {ID = 1, TTL = 2, RemainingTTL = 3}
//   members          <hex ID> -> etcd's JSON of the member; members_removed <hex ID> -> "removed"
//   meta             consistent_index -> be64; scheduledCompactRev, finishedCompactRev ->
//                    <be64 rev>'_'<be64 0> when there was a compaction
//
// Our Keys column keeps every version a key still has, but the Revisions column (which knows a
// change's sub-revision) only from the finished compaction revision F on (import.h). So the
// `key` bucket is made of two runs: the versions below F, ordered by revision with an external
// sort (sorted runs of at most `sort_memory` bytes spilled next to the output, then merged),
// their sub-revisions numbered 0, 1, ... in key order within each main revision (compaction
// left no two changes of one key there, and the original numbering is not kept); then the
// changes from F on, straight from the Revisions column. Memory stays within about
// `sort_memory` plus one value, whatever the store's size.
//
// Everything is read from one pinned storage snapshot: the file is the state at one revision.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "etcdw/common/hash.h"
#include "etcdw/common/status.h"
#include "etcdw/storage/engine.h"

namespace etcdw::mvcc {

struct EtcdExportMember {
  uint64_t id = 0;
  std::string name;
  std::vector<std::string> peer_urls;
  std::vector<std::string> client_urls;
  bool is_learner = false;
};

struct EtcdExportAlarm {
  uint64_t member_id = 0;
  int alarm = 0;  // etcdserverpb.AlarmType
};

struct EtcdExportOptions {
  std::vector<EtcdExportMember> members;
  std::vector<uint64_t> removed_members;
  std::vector<EtcdExportAlarm> alarms;
  std::string cluster_version;  // empty: no clusterVersion record
  // Bytes of (revision, key) pairs sorted in memory before a run is spilled to a file.
  size_t sort_memory = size_t{64} << 20;
};

struct EtcdExportSummary {
  int64_t revision = 0;            // the store's revision
  int64_t compact_revision = -1;   // the finished compaction, -1 when none
  uint64_t changes = 0;            // records of the key bucket
  uint64_t compacted_changes = 0;  // of them, below the compaction (sorted)
  uint64_t sort_runs = 0;          // runs spilled to files by the sort (0: all in memory)
  uint64_t leases = 0;
  uint64_t db_bytes = 0;  // the database's size (a multiple of 4096)
};

// Writes etcd's backend for the state `snapshot` pins in `engine` to `path`, which must not
// exist. Sort runs go to "<path>.sort-<n>" and are removed; on any error `path` is removed too.
// DataLoss names the record when our store's records do not hang together (a revision record
// without its version).
Result<EtcdExportSummary> ExportEtcdBackend(const storage::Engine& engine,
                                            const storage::Snapshot& snapshot,
                                            const std::string& path,
                                            const EtcdExportOptions& options);

// Appends the SHA-256 of the file's contents to it: the trailer etcd's Maintenance.Snapshot
// sends after the database and `etcdctl snapshot restore` checks (size % 512 == 32). The file is
// not synced (it is streamed, then deleted).
Status AppendSha256Trailer(const std::string& path);

// A finished database file read front to back by one reader, as Maintenance.Snapshot streams
// it: the file's bytes, then their SHA-256 (computed while they are read, as etcd computes it
// while sending), so the stream is what `etcdctl snapshot restore` checks (size % 512 == 32
// when the file is page-sized). The file is unlinked as soon as it is open: it disappears with
// the reader, whatever happens.
class SnapshotFileStream {
 public:
  static Result<std::unique_ptr<SnapshotFileStream>> OpenAndUnlink(const std::string& path);
  ~SnapshotFileStream();
  SnapshotFileStream(const SnapshotFileStream&) = delete;
  SnapshotFileStream& operator=(const SnapshotFileStream&) = delete;

  // The stream's length: the file's size plus the 32-byte digest.
  uint64_t size() const;
  // Appends up to `max_bytes` (at least 1) of the file to `out`, or the digest once the file is
  // read (in one call, whatever `max_bytes`). False once everything was read.
  Result<bool> Next(std::string& out, size_t max_bytes);

 private:
  static constexpr uint64_t kSha256Bytes = 32;
  SnapshotFileStream(int fd, uint64_t file_size, std::string path)
      : fd_(fd), file_size_(file_size), path_(std::move(path)) {}
  int fd_;
  uint64_t file_size_;
  uint64_t read_ = 0;
  bool trailer_done_ = false;
  std::string path_;
  common::Sha256 sha_;
};

}  // namespace etcdw::mvcc
