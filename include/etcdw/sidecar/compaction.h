// `etcdbrctl compact` (gardener §11.1), the job etcd-druid runs when the deltas since the last
// full snapshot grow long: the latest full snapshot and its deltas become one full snapshot at
// the last delta's revision, so a later restore replays nothing.
//
// Done offline, as our restore is: the backup is restored into `data_dir`
// (RestoreFromBackup, which replays the deltas one revision at a time), the store is compacted
// to its revision (only each key's newest version stays, as gardener's compaction of its
// embedded etcd leaves it) and, with `defragment`, its files rewritten; then it is written as
// etcd's backend with the SHA-256 trailer (what etcd's Maintenance.Snapshot streams), checked
// like every full snapshot the snapshotter takes, compressed as the newest object of the set
// (the last delta, else the base) and uploaded as Full-00000000-<revision>-<now>, final when
// the base was. Memory stays bounded whatever the number of deltas: nothing is held beyond one
// delta and the export's sort buffer.
//
// On failure nothing is uploaded and the store is left as it was. The data directory and the
// files written beside it are removed in every case.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "etcdw/common/status.h"
#include "etcdw/sidecar/restorer.h"
#include "etcdw/sidecar/snap_store.h"
#include "etcdw/sidecar/snapshot.h"

namespace etcdw::sidecar {

struct CompactionOptions {
  RestoreOptions restore;  // the restored member, the downloads' directory, hash checks
  std::string data_dir;    // --data-dir: where the backup is restored and compacted
  std::string temp_dir;    // --snapstore-temp-directory: the new snapshot before its upload
  bool defragment = true;  // --defragment
};

// Compacts the latest backup set of `store` into one full snapshot, created at `now`. Returns
// the snapshot uploaded, or nullopt when the store holds no full snapshot (nothing to do).
Result<std::optional<SnapshotInfo>> CompactBackups(SnapStore& store,
                                                   const CompactionOptions& options,
                                                   std::chrono::system_clock::time_point now);

}  // namespace etcdw::sidecar
