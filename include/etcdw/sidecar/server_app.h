// `etcdbrctl server`: the sidecar process (gardener §3.5). Serves the HTTP API at once, waits
// for etcd, then elects the backup leader every --reelection-period: the sidecar whose etcd
// member is the Raft leader runs the snapshotter (with GC) and reports healthy; a learner's
// sidecar promotes its member once it has caught up.
#pragma once

#include <atomic>

#include "etcdw/common/status.h"
#include "etcdw/sidecar/options.h"
#include "etcdw/sidecar/snapshotter.h"

namespace etcdw::sidecar {

// The snapshotter's settings from the server flags (schedule, periods, GC, compression, temp
// directory, timeouts). Errors name an invalid schedule or GC policy.
Result<SnapshotterOptions> SnapshotterOptionsOf(const ServerOptions& options);

// Runs until `stop` is set (returns OK) or a setup error (unreadable etcd config template,
// store, HTTP port in use).
Status RunServer(const ServerOptions& options, const std::atomic<bool>& stop);

}  // namespace etcdw::sidecar
