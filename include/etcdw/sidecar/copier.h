// Copying backups from one snapshot store to another: `etcdbrctl copy` (gardener §11.2, the job
// etcd-druid runs when a control plane moves to another seed) and the periodic sync to a
// secondary store.
//
// What is copied: the source's backups, each a full snapshot and the deltas after it (deltas
// older than the oldest full belong to no backup and are left), newest backup first; backups
// whose full snapshot is older than `max_backup_age_days` are dropped, then the newest
// `max_backups` are kept. A snapshot whose name, without ".final", the destination already lists
// is skipped; the others are written under that name (a final snapshot stops being final in
// its new store, as gardener's copier leaves it).
//
// How: each snapshot is downloaded to a local file, uploaded byte for byte, then downloaded
// again from the destination and compared (size and SHA-256) with what the source gave; a
// copy that differs is deleted from the destination and reported. Every store's Save makes an
// object appear whole or not at all, so a copy killed at any point leaves complete objects
// only, and running it again copies what is missing (resumable). Copies run on
// `max_parallel` threads; every failure is collected and reported, the others still copied.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/sidecar/snap_store.h"
#include "etcdw/sidecar/snapshot.h"

namespace etcdw::sidecar {

struct CopyOptions {
  int64_t max_backups = -1;          // --max-backups-to-copy: newest N backups; -1 all
  int64_t max_backup_age_days = -1;  // --max-backup-age: fulls not older; -1 no limit
  int64_t max_parallel = 10;         // --max-parallel-copy-operations (> 0)
  // --wait-for-final-snapshot: first wait until one of the source's four newest full
  // snapshots is final, polling every `poll_interval`; after `wait_timeout` (zero: none)
  // copy anyway.
  bool wait_for_final = false;
  std::chrono::milliseconds wait_timeout{0};
  std::chrono::milliseconds poll_interval{15000};
  // Where the downloads are kept while they are copied (a private directory is made in it).
  std::string temp_dir = "/tmp";
  // Set to stop waiting and copying early; what was copied stays, the result is Cancelled.
  const std::atomic<bool>* cancel = nullptr;
};

struct CopyReport {
  std::vector<std::string> copied;   // names written to the destination
  std::vector<std::string> skipped;  // names the destination already had
  bool found_final = false;          // wait_for_final: a final snapshot was seen in time
};

// The snapshots of the backups to copy from a source listing sorted by SortSnapshots, newest
// backup first (its full snapshot, then its deltas newest first). Chunks are never selected.
// `not_before`: backups whose full snapshot was created before it are dropped (they do not
// count towards `max_backups`).
std::vector<SnapshotInfo> SelectBackupsToCopy(
    const std::vector<SnapshotInfo>& sorted, int64_t max_backups,
    std::optional<std::chrono::system_clock::time_point> not_before);

// The name a snapshot gets in the destination: its name without ".final".
std::string CopyName(const SnapshotInfo& s);

// Copies as the file comment says. Errors: listing either store fails (nothing copied), a
// cancellation (Cancelled), or the copies that failed (each named, one per line; the rest were
// copied).
Result<CopyReport> CopyBackups(SnapStore& source, SnapStore& destination,
                               const CopyOptions& options,
                               std::chrono::system_clock::time_point now);

}  // namespace etcdw::sidecar
