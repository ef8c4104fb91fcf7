// CheckDataDir (data_dir.h): what the sidecar's validator asks of a stopped member's data
// directory, and the store-opening helpers shared with the restore and the offline store.
//
// Sanity mode does what every start does anyway, without starting: the layout, opening the
// store (RocksDB replays its write-ahead log and reads every file's metadata), loading the MVCC
// metadata, leases, membership and identity records, and the Raft log bounds and hard state;
// plus two cheap cross-checks (no revision record above the current revision; the applied
// index lies between the log's compaction point and the commit index). Full mode adds a read
// of every block of every RocksDB file against its checksum, the decoding of every Raft log
// entry, the MVCC consistency check (consistency.cc), and that every record of the Meta column
// is one this version declares (storage/meta_records.h).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "etcd/authpb/auth.pb.h"
#include "etcd_backend.h"
#include "etcd_data_dir.h"
#include "etcd_entries.h"
#include "etcdw/cluster/membership.h"
#include "etcdw/common/password_hash.h"
#include "etcdw/data_dir/data_dir.h"
#include "etcdw/mvcc/key_index.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/raft.pb.h"
#include "etcdw/storage/meta_records.h"
#include "etcdw/storage/raft_log.h"
#include "internal.h"

namespace etcdw::data_dir {

namespace internal {

std::string MemberDir(const std::string& dir) { return dir + "/member"; }
std::string StoreDir(const std::string& dir) { return dir + "/member/store"; }
std::string WalDir(const std::string& dir) { return dir + "/member/wal"; }

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

}  // namespace internal

namespace {

using internal::MemberDir;
using internal::StoreDir;

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
Status CheckNewestRevision(const storage::Engine& engine, int64_t rev) {
  auto it = engine.NewIterator(storage::Column::kRevisions);
  it->SeekToLast();
  if (it->Valid()) {
    if (it->key().size() != 16) return DataLoss("revision log record is corrupt");
    const mvcc::Revision r = mvcc::DecodeRevisionKey(it->key());
    if (r.main > rev) {
      return DataLoss("the revision log reaches revision " + std::to_string(r.main) +
                      ", above the store's current revision " + std::to_string(rev));
    }
  }
  return it->status();
}

// Every entry of the Raft log decodes (opening the log checked their checksums), carries its
// own index, and terms never decrease nor exceed the hard state's term.
Status CheckLogEntries(const storage::RaftLog& log) {
  uint64_t term = log.CompactedTerm();
  const uint64_t max_term = log.hard_state().term();
  for (uint64_t next = log.FirstIndex(); next <= log.LastIndex();) {
    ETCDW_ASSIGN_OR_RETURN(auto entries, log.Entries(next, log.LastIndex() + 1, 4 << 20));
    for (const raftpb::Entry& e : entries) {
      if (e.term() < term || e.term() > max_term) {
        return DataLoss("raft log entry " + std::to_string(e.index()) + " has term " +
                        std::to_string(e.term()) + ", outside [" + std::to_string(term) + ", " +
                        std::to_string(max_term) + "]");
      }
      term = e.term();
    }
    next += entries.size();
  }
  return Status::Ok();
}

// The Raft state against the applied (consistent) index; sets the committed entries not yet
// applied. The store may have applied entries the durable hard state does not count as
// committed yet (RaftNode raises the commit index to the applied index at start), but never
// entries the log lacks.
Status CheckRaftState(const std::string& dir, storage::Engine& engine, uint64_t applied, bool full,
                      uint64_t* unapplied) {
  storage::RaftLog log(internal::WalDir(dir));
  ETCDW_RETURN_IF_ERROR(log.Open(&engine));
  ETCDW_RETURN_IF_ERROR(log.CheckApplied(applied));
  const uint64_t commit = std::max<uint64_t>(log.hard_state().commit(), applied);
  if (commit > log.LastIndex()) {
    return DataLoss("raft hard state commits index " + std::to_string(commit) +
                    " beyond the last log entry " + std::to_string(log.LastIndex()));
  }
  if (full) ETCDW_RETURN_IF_ERROR(CheckLogEntries(log));
  *unapplied = commit - applied;
  return Status::Ok();
}

// An auth record (member/auth_store.h) that the member could not load.
Status CheckAuthRecord(const storage::meta::Record& r, std::string_view key,
                       std::string_view value) {
  namespace meta = storage::meta;
  bool ok = true;
  if (&r == &meta::kAuthEnabled) ok = value.size() == 1;
  if (&r == &meta::kAuthRevision) ok = value.size() == 8;
  auto named = [&](auto message) {
    return message.ParseFromArray(value.data(), static_cast<int>(value.size())) &&
           message.name() == key.substr(r.key.size());
  };
  if (&r == &meta::kAuthUsers) ok = named(authpb::User());
  if (&r == &meta::kAuthRoles) ok = named(authpb::Role());
  if (ok) return Status::Ok();
  return DataLoss("meta record \"" + meta::Printable(key) + "\" is corrupt");
}

// Every Meta record is declared (storage/meta_records.h): one that is not was written by
// something this version does not know, and no snapshot or restore would carry it faithfully.
// The auth records must also decode: the member loads them at start.
Status CheckMetaRecords(const storage::Engine& engine) {
  storage::ReadOptions ro;
  ro.fill_cache = false;
  auto it = engine.NewIterator(storage::Column::kMeta, ro);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const storage::meta::Record* r = storage::meta::Find(it->key());
    if (r == nullptr) {
      return DataLoss("meta record \"" + storage::meta::Printable(it->key()) +
                      "\" is not one this version knows");
    }
    ETCDW_RETURN_IF_ERROR(CheckAuthRecord(*r, it->key(), it->value()));
  }
  return it->status();
}

// A copy of the key index saved by a clean stop is what the member will serve keys from: one
// that decodes but disagrees with the keys (the store was changed behind it) must not be loaded.
// A damaged copy is harmless: the member rebuilds the index.
Status CheckSavedKeyIndex(const storage::Engine& engine, int64_t rev, const mvcc::KeyIndex& keys) {
  mvcc::KeyIndex saved;
  Result<mvcc::KeyIndex::Saved> loaded = saved.LoadSaved(engine, rev);
  if (!loaded.ok() || *loaded != mvcc::KeyIndex::Saved::kLoaded) return Status::Ok();
  if (!saved.SameKeysAs(keys)) {
    return DataLoss("the key index saved at revision " + std::to_string(rev) +
                    " does not match the keys in the store");
  }
  return Status::Ok();
}

// An etcd data directory, read as the takeover reads it (etcd_data_dir.h). Its revision: the
// highest main revision of the backend's changes, or its compaction revision when higher.
DataDirCheck CheckEtcdDataDir(const std::string& dir, bool full) {
  auto etcd = internal::ReadEtcdDataDir(MemberDir(dir));
  if (!etcd.ok()) {
    if (etcd.status().code() == Code::kFailedPrecondition) {
      return Fail(DataDirState::kLocked, etcd.status().message());
    }
    return Classify(etcd.status());
  }
  int64_t rev = 0;
  for (const char* key : {"scheduledCompactRev", "finishedCompactRev"}) {
    auto v = etcd->db->Get({"meta"}, key);
    if (!v.ok()) return Classify(v.status());
    if (*v) {
      auto r = internal::ParseEtcdRevisionKey(**v);
      if (!r.ok()) return Classify(r.status().WithContext(std::string("etcd backend meta ") + key));
      rev = std::max(rev, r->rev.main);
    }
  }
  Status st = etcd->db->ForEach({"key"}, [&](std::string_view k, std::string_view v, bool) {
    auto r = internal::ParseEtcdRevisionKey(k);
    if (!r.ok()) return r.status().WithContext("etcd backend bucket key");
    if (full && !r->tombstone) {
      mvccpb::KeyValue kv;
      if (!kv.ParseFromArray(v.data(), static_cast<int>(v.size())) ||
          kv.mod_revision() != r->rev.main) {
        return DataLoss("etcd backend bucket key: the change at revision " +
                        std::to_string(r->rev.main) + " is not a valid KeyValue");
      }
    }
    rev = std::max(rev, r->rev.main);
    return Status::Ok();
  });
  // What the takeover will refuse (a name our requests cannot hold) is etcd's valid data all the
  // same: reported, never called corrupt, which would have the sidecar replace it.
  std::string refusal;
  if (st.ok() && full) {
    internal::EtcdEntryStats stats;
    for (size_t i = etcd->first_replayed; i < etcd->wal.entries.size() && st.ok(); ++i) {
      // The password hashes made on the way are thrown away: the cheapest cost.
      st = internal::TranslateEtcdEntry(etcd->wal.entries[i], stats, common::kMinBcryptCost)
               .status();
      if (st.code() == Code::kFailedPrecondition) {
        refusal = st.message();
        st = Status::Ok();
      }
    }
  }
  if (!st.ok()) return Classify(st);
  DataDirCheck c;
  c.detail = refusal;
  c.state = DataDirState::kEtcdFormat;
  c.revision = rev;
  c.unapplied_entries = etcd->ReplayedEntries();
  return c;
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
    case DataDirState::kEtcdFormat:
      return "etcd-format";
  }
  return "?";
}

DataDirCheck CheckDataDir(const std::string& dir, bool full) {
  if (auto bad = CheckDirectory(dir, DataDirState::kNotExist)) return *bad;
  if (IsEtcdDataDir(dir)) return CheckEtcdDataDir(dir, full);
  if (auto bad = CheckDirectory(MemberDir(dir), DataDirState::kInvalidStruct)) return *bad;
  if (auto bad = CheckDirectory(StoreDir(dir), DataDirState::kInvalidStruct)) return *bad;
  auto engine = internal::OpenExistingStore(dir);
  if (!engine.ok()) {
    if (engine.status().code() == Code::kNotFound) {
      return Fail(DataDirState::kInvalidStruct, engine.status().message());
    }
    return Classify(engine.status());
  }
  storage::Engine& e = **engine;
  // A sanity check reads the metadata only; a full one opens the store as a member does (its
  // leases and the newest version of every key, rebuilding the key index even where a clean stop
  // saved it) and then checks everything.
  Result<mvcc::StoreMeta> meta = mvcc::ReadStoreMeta(e);
  if (!meta.ok()) return Classify(meta.status());
  std::unique_ptr<mvcc::KvStore> kv;
  if (full) {
    auto opened = mvcc::KvStore::Open(e, {.use_saved_index = false});
    if (!opened.ok()) return Classify(opened.status());
    kv = std::move(*opened);
  }
  cluster::Membership members;
  Status st = members.Load(e);
  if (st.ok()) st = cluster::LoadLocalMemberId(e).status();
  if (st.ok()) st = cluster::LoadRestoredIdentity(e).status();
  if (st.ok()) st = CheckNewestRevision(e, meta->rev);
  uint64_t unapplied = 0;
  if (st.ok()) st = CheckRaftState(dir, e, meta->consistent_index, full, &unapplied);
  if (st.ok() && full) st = e.VerifyChecksums();
  if (st.ok() && full) st = internal::CheckMvccConsistency(e, *kv);
  if (st.ok() && full) st = CheckSavedKeyIndex(e, meta->rev, kv->key_index());
  if (st.ok() && full) st = CheckMetaRecords(e);
  if (!st.ok()) return Classify(st);

  DataDirCheck c;
  c.state = DataDirState::kValid;
  c.revision = meta->rev;
  c.unapplied_entries = unapplied;
  return c;
}

}  // namespace etcdw::data_dir
