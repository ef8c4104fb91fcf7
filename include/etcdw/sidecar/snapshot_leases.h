// The snapshot leases (gardener §9.3, --enable-snapshot-lease-renewal), written by the backup
// leader only, read by etcd-druid to judge whether the backup is current and when to compact:
//   full lease   (--full-snapshot-lease-name)   after each full snapshot: holderIdentity = its
//                last revision (decimal; never lowered: a lease already holding a higher one is
//                left alone), renewTime = the snapshot's creation time. Written with a merge
//                patch carrying the resourceVersion read (optimistic lock); a conflict is read
//                again and retried. A failed update is retried every retry_period until it
//                succeeds or a newer full snapshot replaces it.
//   delta lease  (--delta-snapshot-lease-name)  after each delta period, taken or not (the
//                lease is also a heartbeat of the snapshotter): holderIdentity = the last
//                revision of the latest delta after the latest full snapshot in the store when
//                it is higher, "0" when the lease holds none and there is no delta;
//                renewTime = now. Errors are logged; the next period writes again.
// At the start of leadership both are set from the latest snapshots in the store (Sync()).
//
// Threads: the snapshotter's loop reports through FullSnapshotTaken/DeltaPeriodPassed, which
// only queue the work and never block on the API server; the updater's own thread (Start/Stop)
// writes the leases.
#pragma once

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"
#include "etcdw/kube/client.h"
#include "etcdw/sidecar/snap_store.h"
#include "etcdw/sidecar/snapshot.h"

namespace etcdw::sidecar {

struct SnapshotLeaseOptions {
  std::string lease_namespace;  // POD_NAMESPACE
  std::string full_lease_name = "full-snapshot-revisions";
  std::string delta_lease_name = "delta-snapshot-revisions";
  std::chrono::milliseconds retry_period{60000};  // a failed full lease update is retried
};

class SnapshotLeaseUpdater {
 public:
  // `client`, `store` and `clock` must outlive the updater.
  SnapshotLeaseUpdater(kube::KubeClient& client, SnapStore& store, SnapshotLeaseOptions options,
                       const common::Clock& clock = common::SystemClock::Instance());
  ~SnapshotLeaseUpdater();  // Stop()

  void Start();
  void Stop();

  // Queue work for the updater's thread; never block.
  void FullSnapshotTaken(const SnapshotInfo& full);
  void DeltaPeriodPassed();
  // Both leases from the store's latest full snapshot and deltas.
  void Sync();

  // The writes themselves, for the thread and for tests.
  Status UpdateFullLease(int64_t last_revision, std::chrono::system_clock::time_point created);
  Status UpdateDeltaLease();

 private:
  void Loop();
  void RunPending(std::unique_lock<std::mutex>& l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  kube::KubeClient& client_;
  SnapStore& store_;
  const SnapshotLeaseOptions options_;
  const common::Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool sync_ ABSL_GUARDED_BY(mu_) = false;
  bool delta_due_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<SnapshotInfo> full_due_ ABSL_GUARDED_BY(mu_);
  // When the pending full lease update may be tried again after a failure.
  common::Clock::TimePoint full_retry_at_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Writes `full` to the full snapshot lease once, as UpdateFullLease does, through a client of
// the Kubernetes API the pod's environment names (kube::DefaultConfig): for `etcdbrctl compact`,
// whose snapshot is the newest full one. InvalidArgument without a lease namespace.
Status WriteFullSnapshotLease(SnapStore& store, const SnapshotLeaseOptions& options,
                              const SnapshotInfo& full);

}  // namespace etcdw::sidecar
