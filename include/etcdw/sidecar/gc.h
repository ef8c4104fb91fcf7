// Garbage collection of backups, gardener's two policies, as a pure function of the listing and
// the time, so that it can be tested against the reference's vectors.
//
// A "stream" is a full snapshot and the deltas after it. The latest stream is never touched.
// Deltas of older streams are deleted once older than delta_retention (default 0: all of them).
// Full snapshots of older streams:
//   LimitBased:  the newest max_backups full snapshots survive.
//   Exponential: (UTC, "EOD" = today 23:59:59) every full of the current hour; the latest full of
//                each earlier hour of today; of each of the 7 previous days; of each of the 4
//                previous weeks; nothing older than that.
// Chunk objects whose start revision is at most `last_snapshot_revision` (leftovers of finished
// or aborted uploads) are garbage too; none while that revision is 0.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/sidecar/snapshot.h"

namespace etcdw::sidecar {

enum class GcPolicy { kExponential, kLimitBased };
// "Exponential" | "LimitBased"; anything else is an error naming the allowed values.
Result<GcPolicy> ParseGcPolicy(std::string_view name);

struct GcOptions {
  GcPolicy policy = GcPolicy::kExponential;
  int max_backups = 7;  // LimitBased only; > 0
  std::chrono::seconds delta_retention{0};
};

// The snapshots of `sorted` (a SortSnapshots listing, chunks included) to delete at `now`.
std::vector<SnapshotInfo> SelectGarbage(const std::vector<SnapshotInfo>& sorted,
                                        const GcOptions& options,
                                        std::chrono::system_clock::time_point now,
                                        int64_t last_snapshot_revision);

}  // namespace etcdw::sidecar
