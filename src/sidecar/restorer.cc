#include "etcdw/sidecar/restorer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "etcdw/common/dir_sync.h"
#include "etcdw/common/logging.h"
#include "etcdw/sidecar/compression.h"
#include "etcdw/sidecar/delta.h"

namespace etcdw::sidecar {
namespace fs = std::filesystem;
namespace {

// Downloads `s` and decompresses it into `out`.
Status FetchPlain(SnapStore& store, const SnapshotInfo& s, const std::string& temp_dir,
                  const std::string& out) {
  ETCDW_ASSIGN_OR_RETURN(Compression c, CompressionFromSuffix(s.compression_suffix));
  std::string raw = temp_dir + "/" + s.snap_name + ".download";
  Status st = store.Fetch(s, raw);
  if (st.ok()) st = DecompressFile(raw, out, c);
  std::error_code ec;
  fs::remove(raw, ec);
  return st.ok() ? st : st.WithContext("snapshot " + s.snap_name);
}

Result<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Internal("cannot read \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Applies one delta; events of one revision form one transaction. Revisions the store already
// has are skipped (the full snapshot or an earlier delta covered them).
Status ApplyDelta(data_dir::OfflineStore& db, const SnapshotInfo& s,
                  const std::vector<DeltaEvent>& events) {
  size_t i = 0;
  while (i < events.size()) {
    int64_t rev = events[i].event.kv().mod_revision();
    std::vector<mvccpb::Event> group;
    while (i < events.size() && events[i].event.kv().mod_revision() == rev) {
      group.push_back(events[i].event);
      ++i;
    }
    if (rev <= db.Rev()) continue;
    Status st = db.ApplyRevision(group);
    if (!st.ok()) return st.WithContext("delta snapshot " + s.snap_name);
  }
  if (db.Rev() != s.last_revision) {
    return DataLoss("mismatched event revision while applying delta snapshot " + s.snap_name +
                    ", expected " + std::to_string(s.last_revision) + " but applied " +
                    std::to_string(db.Rev()));
  }
  return Status::Ok();
}

Status Restore(SnapStore& store, const LatestSet& set, const std::string& part,
               const RestoreOptions& o) {
  std::string db_file = o.temp_dir + "/snapshot.db";
  ETCDW_RETURN_IF_ERROR(FetchPlain(store, *set.full, o.temp_dir, db_file));
  Status st = data_dir::RestoreDataDir(db_file, part, o.target, o.skip_hash_check);
  std::error_code ec;
  fs::remove(db_file, ec);
  if (!st.ok()) return st.WithContext("full snapshot " + set.full->snap_name);
  log::Info("restored the full snapshot",
            {log::F("snapshot", set.full->snap_name), log::F("revision", set.full->last_revision)});
  if (set.deltas.empty()) return Status::Ok();

  ETCDW_ASSIGN_OR_RETURN(auto db, data_dir::OfflineStore::Open(part));
  for (const SnapshotInfo& d : set.deltas) {
    if (d.last_revision <= db->Rev()) {
      log::Info("skipping a delta snapshot the store already covers",
                {log::F("snapshot", d.snap_name), log::F("revision", db->Rev())});
      continue;
    }
    if (d.start_revision > db->Rev() + 1) {
      return DataLoss("delta snapshot " + d.snap_name + " starts at revision " +
                      std::to_string(d.start_revision) + " but the store is at " +
                      std::to_string(db->Rev()) + ": a delta snapshot is missing");
    }
    std::string plain = o.temp_dir + "/" + d.snap_name + ".json";
    ETCDW_RETURN_IF_ERROR(FetchPlain(store, d, o.temp_dir, plain));
    auto payload = ReadAll(plain);
    fs::remove(plain, ec);
    if (!payload.ok()) return payload.status();
    auto events = ParseDelta(*payload);
    if (!events.ok()) return events.status().WithContext("delta snapshot " + d.snap_name);
    ETCDW_RETURN_IF_ERROR(ApplyDelta(*db, d, *events));
  }
  for (const std::string& key : db->orphaned_lease_keys()) {
    log::Warn(
        "restored a key whose lease was granted after the full snapshot; the key is kept "
        "without a lease",
        {log::F("key", key)});
  }
  ETCDW_RETURN_IF_ERROR(db->Close());
  log::Info("applied delta snapshots", {log::F("count", set.deltas.size()),
                                        log::F("revision", set.deltas.back().last_revision)});
  return Status::Ok();
}

}  // namespace

Status RestoreFromBackup(SnapStore& store, const LatestSet& set, const std::string& data_dir,
                         const RestoreOptions& o) {
  if (!set.full) {
    return FailedPrecondition("no full snapshot in " + store.Describe() +
                              ": delta snapshots alone cannot be restored");
  }
  std::error_code ec;
  fs::remove_all(o.temp_dir, ec);
  fs::create_directories(o.temp_dir, ec);
  if (ec) return Internal("cannot create \"" + o.temp_dir + "\": " + ec.message());
  chmod(o.temp_dir.c_str(), 0700);
  std::string part = data_dir + ".part";
  fs::remove_all(part, ec);

  Status st = Restore(store, set, part, o);
  fs::remove_all(o.temp_dir, ec);
  if (!st.ok()) {
    fs::remove_all(part, ec);
    return st;
  }
  fs::remove_all(data_dir, ec);
  if (ec) return Internal("cannot remove \"" + data_dir + "\": " + ec.message());
  fs::rename(part, data_dir, ec);
  if (ec)
    return Internal("cannot rename \"" + part + "\" to \"" + data_dir + "\": " + ec.message());
  // The rename is durable once the parent directory is synced.
  return common::SyncParentDirectory(data_dir).WithContext("restore into \"" + data_dir + "\"");
}

}  // namespace etcdw::sidecar
