// RestoreDataDir (data_dir.h): `etcdutl snapshot restore` for our snapshot format and for
// etcd's (a bbolt database, told apart by its first bytes; etcd_backend.h reads it into the
// same records our format holds, so everything below applies to both).
//
// The snapshot is loaded into a fresh store in `<dir>.restoring`, which is then renamed to
// `dir`; on any error the temporary directory is removed, so `dir` appears complete or not at
// all. What the restored store holds, record by record, and why (the Meta column's records are
// kept or dropped by their declarations, storage/meta_records.h: Record::kept_by_restore):
//
//   kept     The Keys, Revisions and Leases columns, and the MVCC records of the Meta column
//            (mvcc/current_rev, mvcc/scheduled_compact_rev, mvcc/finished_compact_rev): the
//            state clients see, byte for byte, so revisions, versions, history since the last
//            compaction and leases with their attached keys are the snapshot's. A compaction
//            the snapshot caught unfinished resumes at the first start, as after a crash. Lease
//            records keep their granted TTL; the lessor refreshes every lease at start.
//   dropped  cluster/id, cluster/member/*, cluster/removed/*: the old cluster's membership.
//            The new one comes from the first start: RaftNode bootstraps a log whose entries
//            1..n add the members of initial-cluster, and the applier adds each, refusing an
//            ID that is already a member or was removed, so none of the old ones may remain.
//   dropped  mvcc/consistent_index (the store's applied index, 0 when absent): it counts
//            entries of the old cluster's log. The new log starts again at 1 and the applier
//            skips every entry at or below the applied index, so keeping it would skip the
//            bootstrap entries (a member without members) and as many entries after them.
//            With 0, the first start applies entries 1..n, which change no revision, and the
//            first write after them gets the snapshot's revision + 1.
//   dropped  alarm/*: alarms are raised by members about themselves (NOSPACE for their own
//            database size, CORRUPT from their hash checks) under IDs no member of the new
//            cluster has, and no member could disarm them by itself; an active NOSPACE alarm
//            would refuse every write. A member whose store is over its quota raises it anew.
//   (absent) raft/* and local/*: a snapshot never holds the log, hard state or the identity of
//            the member that made it (snapshot.h: RestoreSnapshot refuses such records); any
//            record not declared kept would be removed here too.
//   added    local/restored_identity: the member and cluster IDs `target` describes. The first
//            start checks them (EtcdServer::Open) and refuses any other initial cluster, and
//            initial-cluster-state "existing", under which the member would join a cluster and
//            have that cluster's log applied over the restored state.
//
// Nothing of Raft is written: with no local member ID, no hard state and an empty log, the
// first start is the bootstrap of a new cluster, as on an empty directory, with the state
// already in place.
#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <streambuf>
#include <vector>

#include "etcd_backend.h"
#include "etcdw/cluster/membership.h"
#include "etcdw/common/config.h"
#include "etcdw/common/dir_sync.h"
#include "etcdw/common/hash.h"
#include "etcdw/common/logging.h"
#include "etcdw/data_dir/data_dir.h"
#include "etcdw/mvcc/snapshot.h"
#include "etcdw/storage/meta_records.h"
#include "internal.h"

namespace etcdw::data_dir {

namespace {

namespace fs = std::filesystem;
using internal::MemberDir;
using internal::RenameNoReplace;
using internal::StoreDir;

// The identity `target` gives the restored member, computed as EtcdServer::Open computes it
// from the same settings, after the checks etcd's restore makes (VerifyBootstrap).
Result<cluster::RestoredIdentity> IdentityOf(const RestoreTarget& t) {
  common::EtcdConfig cfg;
  cfg.name = t.name;
  cfg.initial_cluster_token = t.initial_cluster_token;
  for (const std::string& u : t.initial_advertise_peer_urls) {
    auto url = common::ParseUrl(u);
    if (!url.ok()) return url.status().WithContext("initial-advertise-peer-urls");
    cfg.initial_advertise_peer_urls.push_back(*url);
  }
  if (cfg.initial_advertise_peer_urls.empty()) {
    cfg.initial_advertise_peer_urls.push_back(common::ParseUrl("http://localhost:2380").value());
  }
  if (common::Trim(t.initial_cluster).empty()) {
    cfg.initial_cluster[cfg.name] = cfg.initial_advertise_peer_urls;
  } else {
    std::set<std::string> seen;
    for (const std::string& part : common::Split(t.initial_cluster, ',')) {
      size_t eq = part.find('=');
      if (eq == std::string::npos || eq == 0) {
        return InvalidArgument("initial-cluster: \"" + part + "\" is not of the form name=URL");
      }
      auto url = common::ParseUrl(part.substr(eq + 1));
      if (!url.ok()) return url.status().WithContext("initial-cluster");
      if (!seen.insert(url->ToString()).second) {
        return InvalidArgument("initial-cluster: has duplicate URL " + url->ToString());
      }
      cfg.initial_cluster[part.substr(0, eq)].push_back(*url);
    }
  }
  ETCDW_RETURN_IF_ERROR(common::ValidateConfig(cfg));

  std::vector<std::string> mine;
  for (const auto& u : cfg.initial_advertise_peer_urls) mine.push_back(u.ToString());
  const uint64_t local = cluster::ComputeMemberId(mine, cfg.initial_cluster_token);
  std::vector<uint64_t> ids;
  for (const cluster::Member& m : cluster::InitialMembers(cfg)) ids.push_back(m.id);
  return cluster::RestoredIdentity{local, cluster::ComputeClusterId(ids)};
}

// A snapshot file whose last 32 bytes (the SHA-256 trailer) read as the digest of everything
// before them, so that RestoreSnapshot's own check passes whatever the trailer holds.
class TrailerIgnoringBuf final : public std::streambuf {
 public:
  static Result<std::unique_ptr<TrailerIgnoringBuf>> Open(const std::string& path) {
    std::unique_ptr<TrailerIgnoringBuf> b(new TrailerIgnoringBuf());
    b->file_.open(path, std::ios::binary);
    if (!b->file_) return NotFound("snapshot file \"" + path + "\" cannot be read");
    b->file_.seekg(0, std::ios::end);
    const std::streamoff size = b->file_.tellg();
    if (size < 32) return DataLoss("snapshot file \"" + path + "\" is too short");
    b->file_.seekg(0);
    common::Sha256 sha;
    for (std::streamoff left = size - 32; left > 0;) {
      const auto n = static_cast<std::streamsize>(
          std::min<std::streamoff>(left, static_cast<std::streamoff>(b->buf_.size())));
      if (!b->file_.read(b->buf_.data(), n)) {
        return Unavailable("snapshot file \"" + path + "\": read failed");
      }
      sha.Update(std::string_view(b->buf_.data(), static_cast<size_t>(n)));
      left -= n;
    }
    b->digest_ = sha.Final();
    b->file_.seekg(0);
    b->body_left_ = size - 32;
    return b;
  }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    size_t n = 0;
    if (body_left_ > 0) {
      n = static_cast<size_t>(
          std::min<std::streamoff>(body_left_, static_cast<std::streamoff>(buf_.size())));
      if (!file_.read(buf_.data(), static_cast<std::streamsize>(n))) return traits_type::eof();
      body_left_ -= static_cast<std::streamoff>(n);
    } else if (!trailer_done_) {
      n = digest_.size();
      std::memcpy(buf_.data(), digest_.data(), n);
      trailer_done_ = true;
    } else {
      return traits_type::eof();
    }
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  TrailerIgnoringBuf() = default;
  std::ifstream file_;
  std::streamoff body_left_ = 0;
  std::array<uint8_t, 32> digest_{};
  bool trailer_done_ = false;
  std::vector<char> buf_ = std::vector<char>(size_t{1} << 16);
};

// A file that is not etcd's (bbolt) must start with our format's magic; anything else is named
// as neither, rather than reported as a damaged snapshot of ours.
Status CheckOurSnapshotHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("snapshot file \"" + path + "\" cannot be read");
  std::string head(sizeof(mvcc::kSnapshotMagic) - 1, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (in.gcount() != static_cast<std::streamsize>(head.size()) || head != mvcc::kSnapshotMagic) {
    return DataLoss("snapshot file \"" + path +
                    "\" is neither an etcd snapshot (a bbolt database) nor an etcd-wrapper "
                    "snapshot: it starts with neither format's header");
  }
  return Status::Ok();
}

Status RewriteMeta(storage::Engine& engine, const cluster::RestoredIdentity& id) {
  storage::Batch batch(engine);
  auto it = engine.NewIterator(storage::Column::kMeta);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (!storage::meta::KeptByRestore(it->key())) batch.Delete(storage::Column::kMeta, it->key());
  }
  ETCDW_RETURN_IF_ERROR(it->status());
  cluster::StageRestoredIdentity(batch, id);
  return engine.Write(batch, /*sync=*/true);
}

// Imports etcd's snapshot, whose database is the file's first `db_length` bytes.
Status ImportEtcdSnapshot(const std::string& snapshot_path, int64_t db_length,
                          storage::Engine& engine) {
  ETCDW_ASSIGN_OR_RETURN(auto db, bbolt::BoltDb::Open(snapshot_path, db_length));
  ETCDW_ASSIGN_OR_RETURN(internal::EtcdBackendSummary s, internal::ImportEtcdBackend(*db, engine));
  log::Info("imported an etcd snapshot",
            {log::F("snapshot", snapshot_path), log::F("revision", s.revision),
             log::F("compact-revision", s.scheduled_compact_rev), log::F("puts", s.puts),
             log::F("deletions", s.deletions), log::F("leases", s.leases),
             log::F("consistent-index", s.consistent_index), log::F("term", s.term),
             log::F("dropped-members", s.members), log::F("cluster-version", s.cluster_version)});
  return Status::Ok();
}

// Loads the snapshot into a new store at `dir`/member/store and makes it the new member's.
// `etcd_db_length`: the length of the database in etcd's format; none for our format.
// Returns the store's revision.
Result<int64_t> BuildStore(const std::string& snapshot_path, std::optional<int64_t> etcd_db_length,
                           const std::string& dir, const cluster::RestoredIdentity& id,
                           bool skip_hash_check) {
  ETCDW_ASSIGN_OR_RETURN(auto engine, storage::Engine::Open(StoreDir(dir), {}));
  if (etcd_db_length) {
    ETCDW_RETURN_IF_ERROR(ImportEtcdSnapshot(snapshot_path, *etcd_db_length, *engine));
  } else if (skip_hash_check) {
    ETCDW_ASSIGN_OR_RETURN(auto buf, TrailerIgnoringBuf::Open(snapshot_path));
    std::istream in(buf.get());
    ETCDW_RETURN_IF_ERROR(mvcc::RestoreSnapshot(in, *engine));
  } else {
    std::ifstream in(snapshot_path, std::ios::binary);
    if (!in) return NotFound("snapshot file \"" + snapshot_path + "\" cannot be read");
    ETCDW_RETURN_IF_ERROR(mvcc::RestoreSnapshot(in, *engine));
  }
  ETCDW_RETURN_IF_ERROR(RewriteMeta(*engine, id));
  // The state must load as a member loads it, and hang together: a snapshot with a valid
  // checksum can still come from a damaged store.
  ETCDW_ASSIGN_OR_RETURN(auto kv, mvcc::KvStore::Open(*engine));
  Status consistent = internal::CheckMvccConsistency(*engine, *kv);
  if (!consistent.ok()) return consistent.WithContext("snapshot state is inconsistent");
  const int64_t rev = kv->Rev();
  kv.reset();
  // Into synced table files (the loading writes were not all synced).
  ETCDW_RETURN_IF_ERROR(engine->Flush());
  return rev;
}

}  // namespace

Status RestoreDataDir(const std::string& snapshot_path, const std::string& dir_in,
                      const RestoreTarget& target, bool skip_hash_check) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) return InvalidArgument("restore: no data directory given");
  auto id = IdentityOf(target);
  if (!id.ok()) return id.status().WithContext("restore target");

  struct stat st;
  if (::lstat(dir.c_str(), &st) == 0) {
    return Status(Code::kAlreadyExists, "data-dir \"" + dir + "\" exists");  // etcdutl's words
  }
  if (errno != ENOENT) return Unavailable("\"" + dir + "\": " + std::strerror(errno));
  // Fails early, before anything is written, on a damaged file.
  ETCDW_ASSIGN_OR_RETURN(const bool etcd_format, internal::IsBoltFile(snapshot_path));
  std::optional<int64_t> etcd_db_length;
  if (etcd_format) {
    ETCDW_ASSIGN_OR_RETURN(etcd_db_length,
                           internal::EtcdSnapshotDbLength(snapshot_path, skip_hash_check));
  } else {
    ETCDW_RETURN_IF_ERROR(CheckOurSnapshotHeader(snapshot_path));
    if (!skip_hash_check) ETCDW_RETURN_IF_ERROR(mvcc::VerifySnapshotFile(snapshot_path));
  }

  const std::string tmp = dir + ".restoring";
  std::error_code ec;
  fs::remove_all(tmp, ec);  // left by an interrupted restore
  if (ec) return Unavailable("cannot remove \"" + tmp + "\": " + ec.message());
  const fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) return Unavailable("cannot create \"" + parent.string() + "\": " + ec.message());
  if (::mkdir(tmp.c_str(), 0700) != 0 || ::mkdir(MemberDir(tmp).c_str(), 0700) != 0) {
    Status failed = Unavailable("cannot create \"" + tmp + "\": " + std::strerror(errno));
    fs::remove_all(tmp, ec);
    return failed;
  }

  auto build = [&]() -> Result<int64_t> {
    ETCDW_ASSIGN_OR_RETURN(int64_t rev,
                           BuildStore(snapshot_path, etcd_db_length, tmp, *id, skip_hash_check));
    ETCDW_RETURN_IF_ERROR(common::SyncDirectory(MemberDir(tmp)));
    ETCDW_RETURN_IF_ERROR(common::SyncDirectory(tmp));
    ETCDW_RETURN_IF_ERROR(RenameNoReplace(tmp, dir));
    Status synced = common::SyncParentDirectory(dir);
    if (!synced.ok()) {
      // The rename may not survive a crash: report the failure with nothing left at `dir`.
      fs::remove_all(dir, ec);
      return synced;
    }
    return rev;
  };
  auto rev = build();
  if (!rev.ok()) {
    fs::remove_all(tmp, ec);
    return rev.status().WithContext("restore \"" + snapshot_path + "\" into \"" + dir + "\"");
  }
  log::Info("restored a data directory from a snapshot",
            {log::F("data-dir", dir), log::F("snapshot", snapshot_path), log::F("revision", *rev),
             log::Hex("member-id", id->member_id), log::Hex("cluster-id", id->cluster_id)});
  return Status::Ok();
}

}  // namespace etcdw::data_dir
