// A member's data directory while the member is not running: what the backup-restore sidecar
// needs to validate it and to rebuild it from backups (the role etcdutl and a temporary embedded
// etcd play for gardener's sidecar).
//
// The library (src/data_dir/, include/etcdw/data_dir/) owns the offline tools: the checks, the
// MVCC consistency check, the restore of a snapshot into a new data directory and the offline
// store that replays deltas. It uses the store's libraries (mvcc, storage), the stored
// membership (cluster), common and proto; never the running member, Raft or the transports, so
// the sidecar links it alone. The allowed graph: scripts/include-rules.txt.
//
// Layout: <dir>/member/store (RocksDB: state, Raft log, hard state, identity) and
// <dir>/member/snap (received Raft snapshots in transit).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "etcd/mvccpb/kv.pb.h"
#include "etcdw/common/password_hash.h"
#include "etcdw/common/status.h"
#include "etcdw/mvcc/etcd_export.h"

namespace etcdw::data_dir {

// The cluster a restored member belongs to, as `etcdutl snapshot restore` takes it.
struct RestoreTarget {
  std::string name;             // --name
  std::string initial_cluster;  // "name=url,name=url"
  std::string initial_cluster_token = "etcd-cluster";
  std::vector<std::string> initial_advertise_peer_urls;
};

// Creates the data directory `dir` (which must not exist) from `snapshot_path`, a file in our
// Maintenance.Snapshot format (mvcc/snapshot.h) or in etcd's (a bbolt database as `etcdctl
// snapshot save` writes it, or a member's member/snap/db; recognised by its first bytes, read
// for etcd 3.4 to 3.6). The SHA-256 trailer is verified unless skip_hash_check; an etcd database
// without a trailer (its size not 32 more than a multiple of 512) is accepted only with
// skip_hash_check, as etcd's restore accepts it. The result holds the snapshot's keys, revisions,
// leases and compaction state with the membership and identity of a new cluster described by
// `target` (the snapshot's own members and Raft state are dropped, as etcd's restore does); started
// with initial-cluster-state "new" and the same initial cluster, the member serves exactly the
// snapshot's data at the snapshot's revision. On error nothing is left at `dir`.
Status RestoreDataDir(const std::string& snapshot_path, const std::string& dir,
                      const RestoreTarget& target, bool skip_hash_check);

// Writes to the store of a stopped member directly: the replay of delta snapshots after a
// restore. No lease expires while replaying (no lessor runs), unlike gardener's embedded etcd.
class OfflineStore {
 public:
  // Opens the store of the data directory `dir`. Fails if another process holds it.
  static Result<std::unique_ptr<OfflineStore>> Open(const std::string& dir);
  ~OfflineStore();

  int64_t Rev() const;

  // Applies the events of one revision as one transaction: PUTs (key, value, lease) and DELETEs
  // (single keys), in order. All must carry the same mod_revision, which must be Rev() + 1;
  // otherwise "mismatched event revision while applying delta snapshot, expected X but applied Y"
  // and nothing changes. A PUT whose lease is not in the store attaches no lease and is reported
  // through `orphaned_lease_keys()`, never silently.
  Status ApplyRevision(const std::vector<mvccpb::Event>& events);

  // Keys put with a lease the store does not know (granted after the full snapshot).
  const std::vector<std::string>& orphaned_lease_keys() const;

  // Compacts the history to the current revision, as etcd's Compact then its physical
  // compaction: only each key's newest version stays (deleted keys go). Nothing to do when the
  // store is already compacted there.
  Status CompactToCurrentRevision();
  // Rewrites the engine's files without what compaction deleted (etcd's defragmentation).
  Status Defragment();
  // Writes the store as etcd's backend with the SHA-256 trailer etcd's Maintenance.Snapshot
  // appends (mvcc/etcd_export.h) to `path`, which must not exist: a full snapshot's file. No
  // member records (a restore makes its own membership).
  Result<mvcc::EtcdExportSummary> ExportEtcdSnapshot(const std::string& path);

  // Syncs everything written to stable storage and closes the store.
  Status Close();

  class Impl;

 private:
  OfflineStore() = default;
  std::unique_ptr<Impl> impl_;
};

// What a check of a data directory found (gardener's DataDirStatus where they overlap).
enum class DataDirState {
  kValid,
  kNotExist,       // the directory is missing
  kInvalidStruct,  // member/ or member/store missing or not a store
  kCorrupt,        // a checksum or consistency check failed, or the store does not open
  kLocked,         // another process holds the store (gardener: FailToOpenBoltDBError)
  kUnknown,        // an I/O error other than "missing" (permissions, ...)
  // An etcd 3.4 data directory (member/snap/db, member/wal/*.wal, no member/store) that reads:
  // valid, and taken over by the next start of the member (TakeOverEtcdDataDir).
  kEtcdFormat,
};
const char* DataDirStateName(DataDirState s);

struct DataDirCheck {
  DataDirState state = DataDirState::kUnknown;
  std::string detail;    // what is wrong, for logs; empty when valid (kEtcdFormat: what the
                         // takeover will refuse, if anything)
  int64_t revision = 0;  // the store's current revision (valid states only)
  // Committed Raft log entries not yet applied to the store: applying them at start can raise
  // the revision by at most this many (the sidecar's revision check against the backup).
  uint64_t unapplied_entries = 0;
};

// An etcd data directory (kEtcdFormat) is checked as the takeover reads it: its backend opens
// and its revision is read, its WAL and newest .snap file read with their checksums, and the
// WAL holds every entry after the backend's consistent index; full: also every entry translates
// (TakeOverEtcdDataDir). Its revision is the backend's; unapplied_entries, the WAL's entries
// after the consistent index. A directory the takeover will refuse (a user or role name in its WAL
// that is not UTF-8) is still kEtcdFormat, with the reason in detail: it is etcd's valid data,
// never to be replaced.
// sanity (full = false): the directory structure, that the store opens and reads its revision,
// the Raft log against the applied index; it reads no key, so its cost does not grow with the data.
// full: also every checksum of the store (all RocksDB files: state and Raft log) and the
// consistency of the MVCC data (every version has its revision record and the other way round,
// no version above the current revision, leases referenced by keys exist, the Raft hard state
// and log agree with the applied index), and that every Meta record is one this version declares
// (storage/meta_records.h).
DataDirCheck CheckDataDir(const std::string& dir, bool full);

// --- Taking over a data directory etcd 3.4 wrote (takeover.cc, docs/design.md) ---

// Whether `dir`/member is etcd's: member/snap/db is a file and there is no member/store.
bool IsEtcdDataDir(const std::string& dir);

struct TakeoverOptions {
  // bcrypt's cost for the passwords etcd 3.4 logged in plain (user add and password change
  // requests after the backend's consistent index), as etcd's --bcrypt-cost hashed them.
  int bcrypt_cost = common::kDefaultBcryptCost;
  // Called after each durable step with its name ("store-built", "log-written", "synced",
  // "exchanged", "moved-aside"): tests end the process there to check that a rerun finishes.
  std::function<void(const std::string& step)> after_step;
};

struct TakeoverResult {
  bool taken_over = false;  // false: `dir` held nothing of etcd's, nothing was done
  std::string moved_to;     // where etcd's member directory now is
  int64_t revision = 0;     // the backend's revision (before the replayed entries apply)
  uint64_t consistent_index = 0;
  uint64_t replayed_entries = 0;  // WAL entries after the consistent index, left to apply
  uint64_t member_id = 0;
  uint64_t cluster_id = 0;
};

// Converts the etcd data directory `dir` in place into ours, keeping the member ID, cluster ID
// and members: the backend's state is imported (its applied index kept), and the WAL's entries
// after the backend's consistent index become our Raft log with etcd's hard state, so the
// member applies them at its first start. The store and log are built in `dir`/.etcdw-takeover,
// synced, then exchanged atomically with etcd's member/ (renameat2 RENAME_EXCHANGE), and etcd's
// member/ is moved to `dir`/etcd-taken-over (or etcd-taken-over-N when taken), which etcd can
// start from again. etcd's files are never changed or deleted. After a crash at any point the
// next call redoes the build or finishes the move. A `dir` with neither an etcd member nor an
// interrupted takeover: taken_over = false, nothing done. etcd's authentication comes along: the
// backend's users, roles and switch are imported, and the WAL's auth requests replayed with
// their users' permissions checked as etcd checked them (etcd_entries.h). Errors:
// kFailedPrecondition when etcd still holds its files (running) or its WAL holds what our log
// cannot (a user or role name that is not UTF-8); DataLoss for damaged files; with nothing
// changed in `dir` beyond a removed partial build.
Result<TakeoverResult> TakeOverEtcdDataDir(const std::string& dir,
                                           const TakeoverOptions& opts = {});

}  // namespace etcdw::data_dir
