// etcd's backend (its bbolt database: a member's member/snap/db or an `etcdctl snapshot save`
// file) read into a fresh store of ours (mvcc/import.h). The restore's half that knows etcd's
// layout; not a public interface.
//
// The layout read, the same in etcd 3.4, 3.5 and 3.6 (big-endian integers):
//   key      <be64 main>'_'<be64 sub> (17 bytes), plus 't' for a deletion (18 bytes)
//            -> mvccpb.KeyValue (a deletion's holds only the key)
//   meta     consistent_index -> be64; term -> be64 (3.5+); scheduledCompactRev and
//            finishedCompactRev -> a revision as above (17 bytes, the main revision counts);
//            confState, storageVersion (3.5+): not read
//   lease    <be64 ID> -> leasepb.Lease {int64 ID = 1; int64 TTL = 2; int64 RemainingTTL = 3}
//   members, members_removed, alarm, cluster (clusterVersion): the old cluster's, counted and
//            reported, never imported (a restore makes a new cluster)
//   auth     authEnabled -> one byte (1: enabled); authRevision -> be64
//   authUsers, authRoles: <name> -> authpb.User, authpb.Role (bcrypt hashes made by Go)
//            all three imported as our auth records (member/auth_store.h)
// Errors name the bucket and the record's key (hex), and are DataLoss: the file is not what an
// etcd backend holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "etcdw/bbolt/db.h"
#include "etcdw/common/status.h"
#include "etcdw/mvcc/lease_table.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/storage/engine.h"

namespace etcdw::data_dir::internal {

// What the backend held, for logs and tests.
struct EtcdBackendSummary {
  uint64_t consistent_index = 0;
  uint64_t term = 0;                   // 0 before etcd 3.5
  int64_t revision = 0;                // the store's revision after the import
  int64_t scheduled_compact_rev = -1;  // -1: none
  int64_t finished_compact_rev = -1;
  uint64_t puts = 0;
  uint64_t deletions = 0;
  bool auth_enabled = false;
  uint64_t auth_users = 0;
  uint64_t auth_roles = 0;
  uint64_t leases = 0;
  uint64_t members = 0;  // the old cluster's, dropped
  std::string cluster_version;
};

// Whether the file at `path` starts like a bbolt file (bbolt::LooksLikeBolt): an etcd snapshot
// or backend rather than our own snapshot format. NotFound when it cannot be read.
Result<bool> IsBoltFile(const std::string& path);

// The length of the database in an etcd snapshot file, checked as etcd's restore checks it: a
// file whose size modulo 512 is 32 ends in the SHA-256 of everything before it (what
// Maintenance.Snapshot appends), verified unless `skip_hash_check`; any other size is a bare
// database (a member's member/snap/db), accepted only with `skip_hash_check` ("snapshot missing
// hash but --skip-hash-check=false", as etcdutl says).
Result<int64_t> EtcdSnapshotDbLength(const std::string& path, bool skip_hash_check);

// A record key of the `key` bucket: its revision, and whether it marks a deletion.
struct EtcdRevisionKey {
  mvcc::Revision rev;
  bool tombstone = false;
};
Result<EtcdRevisionKey> ParseEtcdRevisionKey(std::string_view key);

// A leasepb.Lease value. Our proto/ does not declare etcd's lease package, so its three
// varint fields are read by hand (EtcdLeaseReader in the .cc).
Result<mvcc::LeaseInfo> ParseEtcdLease(std::string_view value);

// Imports the state of `db` into `engine`, which must hold no state: every change of the `key`
// bucket, streamed, the leases and the compaction revisions (mvcc::StateImporter). Writes no
// membership or Raft record.
Result<EtcdBackendSummary> ImportEtcdBackend(const bbolt::BoltDb& db, storage::Engine& engine);

}  // namespace etcdw::data_dir::internal
