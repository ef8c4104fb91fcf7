#include "etcdw/sidecar/backup_sync.h"

#include <utility>
#include <vector>

#include "etcdw/common/logging.h"
#include "etcdw/sidecar/copier.h"

namespace etcdw::sidecar {

using Steady = std::chrono::steady_clock;

BackupSync::BackupSync(SnapStore& primary, SnapStore& secondary, BackupSyncOptions options)
    : primary_(primary), secondary_(secondary), options_(std::move(options)) {}

BackupSync::~BackupSync() { Stop(); }

void BackupSync::Start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  log::Info("starting the backup sync to the secondary store",
            {log::F("secondary", secondary_.Describe())});
  thread_ = std::thread([this] { Loop(); });
}

void BackupSync::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  log::Info("stopped the backup sync to the secondary store");
}

void BackupSync::Loop() {
  const bool gc_enabled = options_.gc_period > std::chrono::seconds(1);
  Steady::time_point next_sync = Steady::now();
  Steady::time_point next_gc = Steady::now() + options_.gc_period;
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    const Steady::time_point due = gc_enabled ? std::min(next_sync, next_gc) : next_sync;
    if (cv_.wait_until(l, due, [this] { return stopping_.load(); })) return;
    if (Steady::now() < due) continue;
    l.unlock();
    if (Steady::now() >= next_sync) {
      SyncOnce();
      next_sync = Steady::now() + options_.sync_period;  // from the end of the last copy
    }
    if (gc_enabled && Steady::now() >= next_gc) {
      CollectGarbageOnce();
      next_gc = Steady::now() + options_.gc_period;
    }
    l.lock();
  }
}

void BackupSync::SyncOnce() {
  CopyOptions o;  // gardener's: every backup, any age, 10 at a time, no wait
  o.temp_dir = options_.temp_dir;
  o.cancel = &stopping_;
  auto report = CopyBackups(primary_, secondary_, o, std::chrono::system_clock::now());
  ++syncs_;
  if (!report.ok()) {
    if (report.status().code() == Code::kCanceled) return;
    log::Error("copying the backups to the secondary store failed; retrying next period",
               {log::F("error", report.status())});
    return;
  }
  log::Info("backups synced to the secondary store",
            {log::F("copied", report->copied.size()), log::F("present", report->skipped.size())});
}

void BackupSync::CollectGarbageOnce() {
  auto list = secondary_.List();
  if (!list.ok()) {
    log::Warn("secondary store GC: cannot list snapshots", {log::F("error", list.status())});
    ++gc_runs_;
    return;
  }
  // No chunk objects are collected (revision 0): copies are written whole, never in chunks.
  const std::vector<SnapshotInfo> garbage =
      SelectGarbage(*list, options_.gc, std::chrono::system_clock::now(), 0);
  int deleted = 0;
  for (const auto& s : garbage) {
    if (stopping_) break;
    Status st = secondary_.Delete(s);
    if (!st.ok()) {
      log::Warn("secondary store GC: cannot delete snapshot",
                {log::F("snapshot", SnapshotKey(s)), log::F("error", st)});
      continue;
    }
    ++deleted;
  }
  log::Info("secondary store GC: done",
            {log::F("deleted", deleted), log::F("candidates", garbage.size())});
  ++gc_runs_;
}

}  // namespace etcdw::sidecar
