// CheckDataDir (data_dir.h): what the sidecar's validator asks of a stopped member's data
// directory, and the store-opening helpers shared with the restore and the offline store.
//
// Sanity mode does what every start does anyway, without starting: the layout, opening the
// store (RocksDB replays its write-ahead log and reads every file's metadata), loading the MVCC
// metadata, leases, membership and identity records, and the Raft log bounds and hard state;
// plus two cheap cross-checks (no revision record above the current revision; the applied
// index lies between the log's compaction point and the commit index). Full mode adds a read
// of every block of every RocksDB file against its checksum, the decoding of every Raft log
// entry, and the MVCC consistency check (data_dir_consistency.cc).
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "data_dir_internal.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/raft.pb.h"
#include "etcdw/server/data_dir.h"
#include "etcdw/server/membership.h"
#include "etcdw/storage/raft_log.h"

namespace etcdw::server {

namespace data_dir_internal {

std::string MemberDir(const std::string& dir) { return dir + "/member"; }
std::string StoreDir(const std::string& dir) { return dir + "/member/store"; }

Result<std::unique_ptr<storage::Engine>> OpenExistingStore(const std::string& dir) {
  struct stat st;
  // RocksDB's CURRENT file names the live manifest: without it there is no database.
  if (::stat((StoreDir(dir) + "/CURRENT").c_str(), &st) != 0) {
    return NotFound("data directory \"" + dir + "\" has no store (member/store)");
  }
  storage::EngineOptions o;
  o.create_if_missing = false;
  return storage::Engine::Open(StoreDir(dir), o);
}

}  // namespace data_dir_internal

namespace {

using data_dir_internal::MemberDir;
using data_dir_internal::StoreDir;

DataDirCheck Fail(DataDirState state, std::string detail) {
  DataDirCheck c;
  c.state = state;
  c.detail = std::move(detail);
  return c;
}

// Checks that `path` is a directory; a missing one is `missing`.
std::optional<DataDirCheck> CheckDirectory(const std::string& path, DataDirState missing) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Fail(missing, "\"" + path + "\" does not exist");
    return Fail(DataDirState::kUnknown, "\"" + path + "\": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Fail(DataDirState::kInvalidStruct, "\"" + path + "\" is not a directory");
  }
  return std::nullopt;
}

// What a failure to open or read the store means for the directory.
DataDirCheck Classify(const Status& st) {
  // Only Engine::Open fails so, when another open holds the store's LOCK.
  if (st.code() == Code::kFailedPrecondition) return Fail(DataDirState::kLocked, st.message());
  if (st.code() == Code::kUnavailable &&
      st.message().find("Permission denied") != std::string::npos) {
    return Fail(DataDirState::kUnknown, st.message());
  }
  return Fail(DataDirState::kCorrupt, st.ToString());
}

// No revision record may lie above the current revision: the newest one is one seek away.
Status CheckNewestRevision(const storage::Engine& engine, const mvcc::KvStore& kv) {
  auto it = engine.NewIterator(storage::Column::kRevisions);
  it->SeekToLast();
  if (it->Valid()) {
    if (it->key().size() != 16) return DataLoss("revision log record is corrupt");
    const mvcc::Revision r = mvcc::DecodeRevisionKey(it->key());
    if (r.main > kv.Rev()) {
      return DataLoss("the revision log reaches revision " + std::to_string(r.main) +
                      ", above the store's current revision " + std::to_string(kv.Rev()));
    }
  }
  return it->status();
}

// Every entry of the Raft log decodes, carries its own index, and terms never decrease nor
// exceed the hard state's term.
Status CheckLogEntries(const storage::Engine& engine, const storage::RaftLog& log) {
  auto it = engine.NewIterator(storage::Column::kRaftLog);
  uint64_t expect = log.FirstIndex();
  uint64_t term = log.CompactedTerm();
  raftpb::Entry e;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++expect) {
    const std::string where = "raft log entry " + std::to_string(expect);
    if (it->key().size() != 8 || storage::DecodeFixed64BE(it->key().data()) != expect) {
      return DataLoss(where + " is missing");
    }
    if (!e.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())) ||
        e.index() != expect) {
      return DataLoss(where + " is corrupt");
    }
    if (e.term() < term || e.term() > log.hard_state().term()) {
      return DataLoss(where + " has term " + std::to_string(e.term()) + ", outside [" +
                      std::to_string(term) + ", " + std::to_string(log.hard_state().term()) + "]");
    }
    term = e.term();
  }
  return it->status();
}

// The Raft state against the applied (consistent) index; sets the committed entries not yet
// applied.
Status CheckRaftState(storage::Engine& engine, const mvcc::KvStore& kv, bool full,
                      uint64_t* unapplied) {
  storage::RaftLog log(engine);
  ETCDW_RETURN_IF_ERROR(log.Load());
  const uint64_t applied = kv.ConsistentIndex();
  const uint64_t commit = log.hard_state().commit();
  if (commit > log.LastIndex()) {
    return DataLoss("raft hard state commits index " + std::to_string(commit) +
                    " beyond the last log entry " + std::to_string(log.LastIndex()));
  }
  if (applied > commit) {
    return DataLoss("applied index " + std::to_string(applied) + " is above the committed index " +
                    std::to_string(commit));
  }
  if (applied < log.CompactedIndex()) {
    return DataLoss("applied index " + std::to_string(applied) +
                    " is below the raft log's compaction point " +
                    std::to_string(log.CompactedIndex()) + ": entries to apply are gone");
  }
  if (full) ETCDW_RETURN_IF_ERROR(CheckLogEntries(engine, log));
  *unapplied = commit - applied;
  return Status::Ok();
}

}  // namespace

const char* DataDirStateName(DataDirState s) {
  switch (s) {
    case DataDirState::kValid:
      return "valid";
    case DataDirState::kNotExist:
      return "not-exist";
    case DataDirState::kInvalidStruct:
      return "invalid-structure";
    case DataDirState::kCorrupt:
      return "corrupt";
    case DataDirState::kLocked:
      return "locked";
    case DataDirState::kUnknown:
      return "unknown";
  }
  return "?";
}

DataDirCheck CheckDataDir(const std::string& dir, bool full) {
  if (auto bad = CheckDirectory(dir, DataDirState::kNotExist)) return *bad;
  if (auto bad = CheckDirectory(MemberDir(dir), DataDirState::kInvalidStruct)) return *bad;
  if (auto bad = CheckDirectory(StoreDir(dir), DataDirState::kInvalidStruct)) return *bad;
  auto engine = data_dir_internal::OpenExistingStore(dir);
  if (!engine.ok()) {
    if (engine.status().code() == Code::kNotFound) {
      return Fail(DataDirState::kInvalidStruct, engine.status().message());
    }
    return Classify(engine.status());
  }
  storage::Engine& e = **engine;
  auto kv = mvcc::KvStore::Open(e);
  if (!kv.ok()) return Classify(kv.status());
  Membership members;
  Status st = members.Load(e);
  if (st.ok()) st = LoadLocalMemberId(e).status();
  if (st.ok()) st = LoadRestoredIdentity(e).status();
  if (st.ok()) st = CheckNewestRevision(e, **kv);
  uint64_t unapplied = 0;
  if (st.ok()) st = CheckRaftState(e, **kv, full, &unapplied);
  if (st.ok() && full) st = e.VerifyChecksums();
  if (st.ok() && full) st = data_dir_internal::CheckMvccConsistency(e, **kv);
  if (!st.ok()) return Classify(st);

  DataDirCheck c;
  c.state = DataDirState::kValid;
  c.revision = (*kv)->Rev();
  c.unapplied_entries = unapplied;
  return c;
}

}  // namespace etcdw::server
