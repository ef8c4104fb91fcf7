// The snapshotter of the backup leader (gardener's pkg/snapshot/snapshotter): full snapshots on a
// cron schedule and on request, delta snapshots from a watch of every key, garbage collection.
//
// Full snapshot: the current revision is read (linearizable Get), Maintenance.Snapshot is
// streamed to "<temp_dir>/db", its trailer checked (size % 512 == 32 and the SHA-256 of the
// rest) — a snapshot that fails the check is refused, never uploaded — then compressed and saved
// as Full-00000000-<revision>-<unix>. A new watch then starts at revision + 1.
// Delta snapshot: watched events accumulate in a DeltaWriter; every delta_period, when the
// buffer reaches delta_memory_limit, or on request, they are saved as
// Incr-<previous last + 1>-<last event's revision>-<unix> (nothing is saved without events).
// Start-up (gardener §5.7): a full snapshot when none exists, the latest is final, it failed
// last time, or it is older than the schedule's window; otherwise the events since the latest
// backup are collected up to the current revision and saved as a delta.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"
#include "etcdw/sidecar/compression.h"
#include "etcdw/sidecar/cron.h"
#include "etcdw/sidecar/etcd_client.h"
#include "etcdw/sidecar/gc.h"
#include "etcdw/sidecar/metrics.h"
#include "etcdw/sidecar/snap_store.h"
#include "etcdw/sidecar/snapshot.h"
#include "etcdw/sidecar/snapshot_triggers.h"

namespace etcdw::sidecar {

struct SnapshotterOptions {
  CronSchedule schedule;                          // --schedule
  std::chrono::milliseconds delta_period{20000};  // --delta-snapshot-period (< 1 s: off)
  int64_t delta_memory_limit = 10 << 20;          // --delta-snapshot-memory-limit
  std::chrono::milliseconds gc_period{60000};     // --garbage-collection-period (<= 1 s: off)
  GcOptions gc;                                   // policy, max backups, retention
  Compression compression = Compression::kGzip;   // kNone when not compressing
  std::string temp_dir = "/tmp";                  // --snapstore-temp-directory
  std::chrono::milliseconds connection_timeout{30000};
  std::chrono::milliseconds snapshot_timeout{15 * 60000};
  // Test seam, empty in production: called with the local file of every snapshot (the streamed
  // "<temp_dir>/db" of a full one, the raw payload of a delta) right before it is verified, so
  // that a test can damage it and watch the upload being refused. Runs on the loop thread (see
  // Snapshotter): while it blocks, so does every snapshot, trigger and Stop(); it must not call
  // the Snapshotter.
  std::function<void(const std::string& path)> before_verify;
  // Reports for the snapshot leases (snapshot_leases.h), called on the loop thread; they must
  // not block. on_full_snapshot: after every full snapshot saved (start-up, scheduled,
  // triggered; also a final one found unneeded, with the previous final snapshot).
  // on_delta_period: after every delta attempt (the start-up delta, each period, each trigger,
  // each memory-limit cut), whether or not events were saved.
  std::function<void(const SnapshotInfo& full)> on_full_snapshot;
  std::function<void()> on_delta_period;
  // Where the snapshots, GC and failures are counted (outlives the snapshotter); null: nowhere.
  SidecarMetrics* metrics = nullptr;
};

// Threads:
//   the loop      the thread that calls Run(): the start-up snapshot, the schedule and timers,
//                 the watch's events, every snapshot (taken, verified, compressed, uploaded)
//                 and the triggers' work, one at a time. It blocks on the member and the store
//                 for as long as a snapshot takes (bounded by snapshot_timeout and the store's
//                 own timeouts).
//   the pump      one per open watch, started and joined by the loop: reads the watch stream
//                 and queues each response for the loop. It blocks only in Watch::Next.
//   GC            started by the loop after the start-up snapshot, joined when Run() ends: every
//                 gc_period
//                 lists the store and deletes garbage. It shares only the store with the loop.
//   callers       any other thread: TriggerFull/TriggerDelta queue a request and block until
//                 the loop has served it; Stop() blocks until Run() has returned; active() and
//                 queued_triggers() never block. None of them may be called from the loop (the
//                 before_verify seam) or from a thread the loop waits for.
class Snapshotter final : public SnapshotTriggers {
 public:
  // `store`, `client` (the local member's endpoint) and `clock` must outlive the snapshotter.
  // Every reading of time and every timed wait goes through `clock`: the schedule, the delta
  // and GC periods, the drain deadline, snapshot names and GC's "now".
  Snapshotter(SnapStore& store, EtcdClient& client, SnapshotterOptions options,
              const common::Clock& clock = common::SystemClock::Instance());
  ~Snapshotter() override;  // Stop()

  // Takes the start-up snapshot, then runs the schedule, the delta timer, the watch and GC until
  // Stop() (returns OK) or a failure (returns it: a failed upload, a broken watch). After a
  // failure Run() may be called again (the caller's back-off loop); it re-reads the store and
  // remembers that a full snapshot failed (the next start-up then takes a full one). One Run()
  // at a time: a concurrent call is refused with FailedPrecondition.
  Status Run();
  // Ends Run() from any thread but Run()'s own, and waits until it has returned; waits for a
  // snapshot in progress to finish. Final: after Stop(), Run() returns OK at once (a new term of
  // leadership gets a new Snapshotter, as gardener's sidecar does).
  void Stop();

  // True between a successful start-up snapshot and the end of Run(): requests are served.
  bool active() const { return active_.load(); }

  // Out-of-schedule snapshots for the HTTP API (block until done). FailedPrecondition when Run()
  // is not running or is stopping; a trigger during the start-up snapshot is served after it.
  Result<SnapshotInfo> TriggerFull(bool final) override;
  // No value when there were no events to save. Every write acknowledged by the member before
  // the call is included: the current revision is read first and the watch is drained up to it
  // (for at most connection_timeout). FailedPrecondition when deltas are off (delta_period < 1 s).
  Result<std::optional<SnapshotInfo>> TriggerDelta() override;
  // Triggers waiting for Run()'s loop to take them (one made during the start-up snapshot waits
  // here until that ends). For tests and diagnostics.
  size_t queued_triggers() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> active_{false};  // written by the loop, read by any thread
};

}  // namespace etcdw::sidecar
