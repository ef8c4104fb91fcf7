// What the HTTP API asks of the backup leader's snapshotter: out-of-schedule snapshots taken on
// request (/snapshot/full, /snapshot/delta). Snapshotter implements it; the API holds only this
// interface, so that it builds and is tested without the snapshotter's etcd client.
#pragma once

#include <optional>

#include "etcdw/common/status.h"
#include "etcdw/sidecar/snapshot.h"

namespace etcdw::sidecar {

class SnapshotTriggers {
 public:
  virtual ~SnapshotTriggers() = default;
  // A full snapshot taken now (`final`: named with the ".final" suffix); blocks until it is
  // saved. An error when none can be taken (the snapshotter is not running, the snapshot failed).
  virtual Result<SnapshotInfo> TriggerFull(bool final) = 0;
  // A delta snapshot of the events since the last one, saved now; no value when there were no
  // events. Blocks until done; an error when deltas are off or the snapshot failed.
  virtual Result<std::optional<SnapshotInfo>> TriggerDelta() = 0;
};

}  // namespace etcdw::sidecar
