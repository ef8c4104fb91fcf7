// Member initialisation (gardener §3.2): what /initialization/start runs before etcd starts.
//
// Single-member cluster: validate the data directory; when it is missing, damaged or behind the
// backup, restore it from the latest full snapshot and its deltas (or, with no backups, remove
// it so that etcd starts empty).
// Multi-member cluster: a member whose name the running cluster does not know is added as a
// learner (scale-up) and starts empty; a member whose data directory is invalid is removed from
// the cluster, wiped and re-added as a learner, and resynchronises from its peers (a restore
// from the bucket would fork it from the cluster). So is a member the cluster still lists (or
// whose member lease holds a heartbeat) whose directory is missing, with or without backups:
// it is never started as a new cluster (seed 000).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>

#include "etcdw/common/status.h"
#include "etcdw/sidecar/metrics.h"
#include "etcdw/sidecar/options.h"
#include "etcdw/sidecar/snap_store.h"
#include "etcdw/sidecar/validator.h"

namespace etcdw::sidecar {

struct InitializerContext {
  const ServerOptions* options = nullptr;
  SnapStore* store = nullptr;  // null: no backups configured
  std::string member_name;
  size_t cluster_size = 1;                 // entries of the configured initial cluster
  std::vector<std::string> peer_urls;      // this member's, from the etcd config template
  data_dir::RestoreTarget restore_target;  // the cluster a restored data directory belongs to
  const std::atomic<bool>* cancel = nullptr;
  // When no member of the cluster answers: whether this member's Kubernetes lease holds a
  // heartbeat (it was a member before). Empty: not known.
  std::function<bool()> heartbeat_present;
  // Where the cluster size, validation, restoration and membership changes are counted (as
  // gardener's initializer counts them); null: nowhere.
  SidecarMetrics* metrics = nullptr;
};

Status Initialize(const InitializerContext& ctx, ValidationMode mode);

}  // namespace etcdw::sidecar
