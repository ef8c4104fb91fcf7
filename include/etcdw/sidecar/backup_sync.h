// The secondary store (gardener's `--secondary-backup-sync-enabled`, its PR 917 design): while
// this sidecar leads the backups, every backup of the primary store is copied to a second store
// (CopyBackups: all backups, no age limit, 10 at a time, verified) at once and then every
// sync period, and the second store's garbage is collected with the primary's policy, so that a
// lost bucket, account or region leaves a complete copy elsewhere.
//
// Failures are logged and retried at the next period; they never stop the snapshotter.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "etcdw/sidecar/gc.h"
#include "etcdw/sidecar/snap_store.h"

namespace etcdw::sidecar {

struct BackupSyncOptions {
  std::chrono::milliseconds sync_period{60 * 60000};  // --secondary-backup-sync-period
  // The primary's --garbage-collection-period and policy; a period of 1 s or less: no GC.
  std::chrono::milliseconds gc_period{60000};
  GcOptions gc;
  std::string temp_dir = "/tmp";  // --secondary-snapstore-temp-directory
};

class BackupSync {
 public:
  // Both stores must outlive this object.
  BackupSync(SnapStore& primary, SnapStore& secondary, BackupSyncOptions options);
  ~BackupSync();  // Stop()
  BackupSync(const BackupSync&) = delete;
  BackupSync& operator=(const BackupSync&) = delete;

  // Starts the thread: a copy at once, then copies every sync period and GC every GC period.
  // Start after Stop starts again; Start while running does nothing.
  void Start();
  // Ends a copy in progress between objects and joins the thread.
  void Stop();

  // Copy and GC runs ended since construction (successful or not; counted when all their work
  // is done), for tests and logs.
  int syncs() const { return syncs_.load(); }
  int gc_runs() const { return gc_runs_.load(); }

 private:
  void Loop();
  void SyncOnce();
  void CollectGarbageOnce();

  SnapStore& primary_;
  SnapStore& secondary_;
  const BackupSyncOptions options_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> syncs_{0};
  std::atomic<int> gc_runs_{0};
};

}  // namespace etcdw::sidecar
