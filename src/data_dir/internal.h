// Helpers shared by the offline data-directory operations (data_dir.h): restore, check and the
// offline store. Not a public interface.
#pragma once

#include <memory>
#include <string>

#include "etcdw/common/status.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/storage/engine.h"

namespace etcdw::data_dir::internal {

// <dir>/member and <dir>/member/store.
std::string MemberDir(const std::string& dir);
std::string StoreDir(const std::string& dir);
std::string WalDir(const std::string& dir);  // the Raft log (storage::RaftLog)

// Renames `from` to `to`, failing with kAlreadyExists if `to` exists (rename(2) would replace
// an empty directory).
Status RenameNoReplace(const std::string& from, const std::string& to);
// Exchanges the two existing paths in one step (renameat2 RENAME_EXCHANGE); kFailedPrecondition
// when the file system cannot.
Status ExchangePaths(const std::string& a, const std::string& b);

// Opens the existing store of data directory `dir` without creating anything. NotFound when
// there is no store; kFailedPrecondition when another open holds it (Engine::Open).
Result<std::unique_ptr<storage::Engine>> OpenExistingStore(const std::string& dir);

// The logical consistency of the MVCC columns (Keys, Revisions, Leases) against the store's
// revision records, reading every record once:
//   * every version lies in [1, current revision] and holds a KeyValue naming its own key and
//     revision (or is a tombstone);
//   * the versions and the revision-log records at or above the compaction boundary are the
//     same set (kind, revision, key); below it, what compaction keeps: no revision records
//     under the finished compaction revision, and per key at most one version at or below it,
//     a put;
//   * the live keys with a lease and the lease attachments are the same set, and every such
//     lease exists.
// DataLoss naming the first problem found.
Status CheckMvccConsistency(const storage::Engine& engine, const mvcc::KvStore& kv);

}  // namespace etcdw::data_dir::internal
