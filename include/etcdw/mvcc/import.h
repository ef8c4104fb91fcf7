// Building a store's state from another store's records: the import of etcd's own backend
// (a bbolt file, read by data_dir) into a fresh store, record by record, with bounded memory.
//
// etcd keeps one record per change, keyed by its revision (main, sub) and holding the changed
// key's mvccpb.KeyValue (a deletion's holds only the key). The importer turns each into the
// records our writes produce for the same change (kv_store.h, docs/design.md "Storage layout"):
//   Keys column       <key><be64 main> -> the KeyValue's wire bytes as etcd stored them, or ""
//                     for a deletion
//   Revisions column  <be64 main><be64 sub> -> 'p'/'d' + key, for every change at or above the
//                     finished compaction revision F (our compactor drops the records below F,
//                     etcd's keeps only the versions; a change at F keeps its record)
//   Leases column     the lease records, and an attachment for every key whose newest version
//                     is a put with a lease
//   Meta column       mvcc/current_rev, mvcc/scheduled_compact_rev, mvcc/finished_compact_rev
// so that KvStore::Open afterwards serves what etcd served: every key's value, create and mod
// revision, version and lease, at the current revision and at every revision from the
// compaction revision on. A compaction etcd had scheduled but not finished (S > F) is resumed
// by the first start's compactor, as after a crash of our own member.
//
// What it checks: each record on its own (a KeyValue that parses, names a key, and for a put
// carries mod_revision = main, 1 <= create_revision <= main, version >= 1), and that every live
// key's lease was imported. How the records hang together (one version per key and revision,
// what compaction leaves) is data_dir's consistency check's to judge once the store is built.
//
// Memory: records go to the engine in write batches of about 4 MiB; the importer keeps the lease
// IDs it was given and nothing per key.
//
// Durability: the batches skip the engine's write-ahead log (Engine::WriteUnlogged: the log
// would write every byte twice) and Finish() flushes them to table files. Until Finish()
// returns, a crash leaves a store to be discarded, which the callers do (they build it in a
// temporary directory).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_set>

#include "etcdw/common/status.h"
#include "etcdw/mvcc/lease_table.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/storage/engine.h"

namespace etcdw::mvcc {

// The compaction state of the imported store: revisions, -1 when none.
struct ImportedCompaction {
  int64_t scheduled = -1;  // the last compaction requested
  int64_t finished = -1;   // the last compaction whose deletions are complete
};

struct ImportStats {
  uint64_t puts = 0;
  uint64_t deletions = 0;
  uint64_t leases = 0;
  uint64_t value_bytes = 0;  // KeyValue bytes written to the Keys column
};

class StateImporter {
 public:
  // `engine` must hold no state (a store just created). A finished compaction above the
  // scheduled one is read as etcd reads it: compacted to `finished`, nothing scheduled after.
  StateImporter(storage::Engine& engine, ImportedCompaction compaction);
  ~StateImporter();

  // Stages one change: the version of a key written at `rev` (`tombstone`: its deletion), whose
  // mvccpb.KeyValue wire bytes are `kv_bytes`. Any order. DataLoss naming the revision when the
  // record is malformed.
  Status AddVersion(Revision rev, bool tombstone, std::string_view kv_bytes);
  // Stages one lease with its granted TTL and last checkpointed remaining TTL (0: none).
  // InvalidArgument for ID 0 or a TTL outside [0, kMaxLeaseTtl].
  Status AddLease(const LeaseInfo& lease);

  // Writes what is staged, attaches the live keys to their leases and writes the store's
  // revision records, then flushes everything to the engine's files (durable on return). The
  // revision is the highest main revision staged, or the compaction revision when higher
  // (compaction may have removed the newest changes: deletions), at least 1. DataLoss naming the
  // key when a live key's lease was not staged. Returns it.
  Result<int64_t> Finish();

  const ImportStats& stats() const { return stats_; }

 private:
  Status FlushIfFull();
  Status AttachLeases();

  storage::Engine& engine_;
  ImportedCompaction compaction_;
  std::unique_ptr<storage::Batch> batch_;
  std::unordered_set<int64_t> lease_ids_;
  int64_t max_main_ = 0;
  uint64_t leased_puts_ = 0;  // puts carrying a lease: the attachment pass is skipped when none
  ImportStats stats_;
  bool finished_ = false;
};

}  // namespace etcdw::mvcc
