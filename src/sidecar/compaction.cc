#include "etcdw/sidecar/compaction.h"

#include <filesystem>
#include <memory>
#include <utility>

#include "etcdw/common/logging.h"
#include "etcdw/data_dir/data_dir.h"
#include "etcdw/sidecar/compression.h"
#include "etcdw/sidecar/snapshot_verify.h"
#include "file_util.h"

namespace etcdw::sidecar {

namespace fs = std::filesystem;

namespace {

// Removes the data directory (and a restore's leftover "<dir>.part") when it goes out of scope.
class RemovedAtEnd {
 public:
  explicit RemovedAtEnd(std::string dir) : dir_(std::move(dir)) {}
  ~RemovedAtEnd() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::remove_all(dir_ + ".part", ec);
  }
  RemovedAtEnd(const RemovedAtEnd&) = delete;
  RemovedAtEnd& operator=(const RemovedAtEnd&) = delete;

 private:
  std::string dir_;
};

// The restored store compacted (and defragmented) and written to `path` as a full snapshot's
// file; its revision.
Result<int64_t> CompactAndExport(const std::string& data_dir, bool defragment,
                                 const std::string& path) {
  ETCDW_ASSIGN_OR_RETURN(auto db, data_dir::OfflineStore::Open(data_dir));
  ETCDW_RETURN_IF_ERROR(db->CompactToCurrentRevision().WithContext("compacting the store"));
  if (defragment) ETCDW_RETURN_IF_ERROR(db->Defragment().WithContext("defragmenting the store"));
  ETCDW_ASSIGN_OR_RETURN(mvcc::EtcdExportSummary summary, db->ExportEtcdSnapshot(path));
  ETCDW_RETURN_IF_ERROR(db->Close());
  log::Info("compacted the restored store",
            {log::F("revision", summary.revision), log::F("keys", summary.changes),
             log::F("leases", summary.leases), log::F("db-bytes", summary.db_bytes)});
  return summary.revision;
}

}  // namespace

Result<std::optional<SnapshotInfo>> CompactBackups(SnapStore& store,
                                                   const CompactionOptions& options,
                                                   std::chrono::system_clock::time_point now) {
  ETCDW_ASSIGN_OR_RETURN(std::vector<SnapshotInfo> list, store.List());  // sorted
  const LatestSet set = FindLatestSet(list);
  if (!set.full) {
    log::Info("no full snapshot in the store: nothing to compact",
              {log::F("store", store.Describe())});
    return std::optional<SnapshotInfo>();
  }
  const SnapshotInfo& newest = set.deltas.empty() ? *set.full : set.deltas.back();
  ETCDW_ASSIGN_OR_RETURN(Compression compression, CompressionFromSuffix(newest.compression_suffix));
  log::Info("compacting the latest backup",
            {log::F("full-snapshot", set.full->snap_name),
             log::F("delta-snapshots", set.deltas.size()), log::F("revision", set.LastRevision())});

  RemovedAtEnd data_dir(options.data_dir);
  ETCDW_RETURN_IF_ERROR(RestoreFromBackup(store, set, options.data_dir, options.restore));
  std::error_code ec;
  fs::create_directories(options.temp_dir, ec);
  if (ec) return Internal("cannot create \"" + options.temp_dir + "\": " + ec.message());
  TempFiles temps;
  const std::string& db = temps.Add(JoinPath(options.temp_dir, "compacted.db"));
  fs::remove(db, ec);  // a crashed run's
  ETCDW_ASSIGN_OR_RETURN(int64_t revision,
                         CompactAndExport(options.data_dir, options.defragment, db));
  if (revision != set.LastRevision()) {
    return DataLoss("the restored backup is at revision " + std::to_string(revision) +
                    " where its last snapshot ends at " + std::to_string(set.LastRevision()));
  }
  ETCDW_RETURN_IF_ERROR(VerifyFullSnapshotFile(db).WithContext("the compacted snapshot"));

  SnapshotInfo s = NewSnapshot(SnapshotKind::kFull, 0, revision, now,
                               CompressionSuffix(compression), set.full->is_final);
  std::string upload = db;
  if (compression != Compression::kNone) {
    upload = temps.Add(JoinPath(options.temp_dir, s.snap_name));
    ETCDW_RETURN_IF_ERROR(CompressFile(db, upload, compression));
  }
  ETCDW_RETURN_IF_ERROR(store.Save(s, upload).WithContext("saving " + s.snap_name));
  log::Info("saved the compacted full snapshot", {log::F("snapshot", s.snap_name)});
  return std::optional<SnapshotInfo>(std::move(s));
}

}  // namespace etcdw::sidecar
