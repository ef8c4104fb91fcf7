// Restore of a data directory from backups (gardener §6), done offline: the latest full
// snapshot becomes a fresh data directory (data_dir::RestoreDataDir), then every delta after it is
// replayed revision by revision into the stopped store (data_dir::OfflineStore). Unlike gardener's
// embedded etcd, no lease can expire during the replay, and deltas that overlap what is already
// restored (a leader hand-off writes the same revisions twice) are skipped, not failed.
//
// Every object is checked before use: the full snapshot's SHA-256 trailer (unless
// skip_hash_check), each delta's trailer, and after each delta the store's revision must equal
// the delta's last revision. Any failure aborts with an error naming the object; the restore is
// built in "<data-dir>.part" and renamed over the data directory only when complete.
#pragma once

#include <string>

#include "etcdw/data_dir/data_dir.h"
#include "etcdw/sidecar/snap_store.h"
#include "etcdw/sidecar/snapshot.h"

namespace etcdw::sidecar {

struct RestoreOptions {
  data_dir::RestoreTarget target;
  std::string temp_dir = "default.restoration.tmp";  // downloads; removed at the end
  bool skip_hash_check = false;
};

// Restores `set` (a full snapshot and its deltas) into `data_dir`, replacing what is there.
Status RestoreFromBackup(SnapStore& store, const LatestSet& set, const std::string& data_dir,
                         const RestoreOptions& options);

}  // namespace etcdw::sidecar
