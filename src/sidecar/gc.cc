#include "etcdw/sidecar/gc.h"

#include <cstddef>
#include <limits>
#include <string>

namespace etcdw::sidecar {
namespace {

using std::chrono::system_clock;
using Hours = std::chrono::hours;

// gardener's IsDeletable: an object is protected until its immutability expiry has passed; the
// zero time means "not immutable".
bool IsDeletable(const SnapshotInfo& s, system_clock::time_point now) {
  return s.immutability_expiry_time == system_clock::time_point{} ||
         now > s.immutability_expiry_time;
}

// Whole hours, days or weeks in `d`, truncated towards zero (Go's int(d.Hours()/n)).
int64_t Whole(system_clock::duration d, Hours unit) { return d / unit; }

// Collects garbage into `out`, each snapshot at most once (a stream that starts with deltas has
// a delta at its "full" position, which both rules may select).
class Collector {
 public:
  Collector(const std::vector<SnapshotInfo>& list, system_clock::time_point now,
            std::vector<SnapshotInfo>& out)
      : list_(list), now_(now), out_(out), taken_(list.size(), false) {}

  void Take(size_t i) {
    if (taken_[i] || !IsDeletable(list_[i], now_)) return;
    taken_[i] = true;
    out_.push_back(list_[i]);
  }

  // The deltas of list[begin, end) created before now - retention, newest first.
  void TakeOldDeltas(size_t begin, size_t end, std::chrono::seconds retention) {
    system_clock::time_point cutoff = now_ - retention;
    for (size_t i = end; i > begin; --i) {
      const SnapshotInfo& s = list_[i - 1];
      if (s.kind == SnapshotKind::kIncr && s.created_on < cutoff) Take(i - 1);
    }
  }

 private:
  const std::vector<SnapshotInfo>& list_;
  system_clock::time_point now_;
  std::vector<SnapshotInfo>& out_;
  std::vector<bool> taken_;
};

// Exponential policy over the stream starts `starts` of `list` (gardener's bucket arithmetic,
// kept exactly, quirks included: buckets are counted back from the end of the day, and the end of
// the day moves back one day when the first snapshot of the weekly band is met).
void SelectExponential(const std::vector<SnapshotInfo>& list, const std::vector<size_t>& starts,
                       const GcOptions& options, system_clock::time_point now, Collector& c) {
  auto today = std::chrono::floor<std::chrono::days>(now);
  system_clock::time_point eod =
      today + Hours(23) + std::chrono::minutes(59) + std::chrono::seconds(59);
  const int64_t now_hour = Whole(now - today, Hours(1));
  bool tracking_week = false;
  constexpr int64_t kNever = std::numeric_limits<int32_t>::max();
  // Newest older stream first; `newer` is the full of the next stream, `older` the candidate.
  for (size_t k = starts.size() - 1; k > 0; --k) {
    const SnapshotInfo& newer = list[starts[k]];
    const SnapshotInfo& older = list[starts[k - 1]];
    c.TakeOldDeltas(starts[k - 1], starts[k], options.delta_retention);

    system_clock::duration age = eod - older.created_on;
    int64_t threshold;
    if (age < Hours(24)) {
      // Created today: every full of the current hour survives.
      auto older_day = std::chrono::floor<std::chrono::days>(older.created_on);
      int64_t older_hour = Whole(older.created_on - older_day, Hours(1));
      threshold = older_hour == now_hour ? 0 : 1;
    } else if (age < Hours(8 * 24)) {
      threshold = 24;
    } else if (age < Hours(35 * 24)) {
      if (!tracking_week) {
        // The weekly band starts where the daily one ends: at the end of the previous day.
        eod -= Hours(24);
        tracking_week = true;
      }
      threshold = int64_t{24} * 7;
    } else {
      threshold = kNever;
    }
    const system_clock::duration older_age = eod - older.created_on;
    const system_clock::duration newer_age = eod - newer.created_on;
    int64_t hour_change = Whole(older_age, Hours(1)) - Whole(newer_age, Hours(1));
    int64_t day_change = Whole(older_age, Hours(24)) - Whole(newer_age, Hours(24));
    int64_t week_change = Whole(older_age, Hours(24 * 7)) - Whole(newer_age, Hours(24 * 7));
    bool keep = threshold == 0 || hour_change / threshold != 0 ||
                day_change * 24 / threshold != 0 || week_change * 24 * 7 / threshold != 0;
    if (!keep) c.Take(starts[k - 1]);
  }
}

void SelectLimitBased(const std::vector<size_t>& starts, const GcOptions& options, Collector& c) {
  const int64_t streams = static_cast<int64_t>(starts.size());
  for (int64_t i = 0; i + 1 < streams; ++i) {
    c.TakeOldDeltas(starts[i], starts[i + 1], options.delta_retention);
    if (i < streams - options.max_backups) c.Take(starts[i]);
  }
}

}  // namespace

Result<GcPolicy> ParseGcPolicy(std::string_view name) {
  if (name == "Exponential") return GcPolicy::kExponential;
  if (name == "LimitBased") return GcPolicy::kLimitBased;
  return InvalidArgument("invalid garbage collection policy: \"" + std::string(name) +
                         "\" (allowed: Exponential, LimitBased)");
}

std::vector<SnapshotInfo> SelectGarbage(const std::vector<SnapshotInfo>& sorted,
                                        const GcOptions& options, system_clock::time_point now,
                                        int64_t last_snapshot_revision) {
  std::vector<SnapshotInfo> garbage;
  // Chunks: leftovers of uploads that have finished (or were abandoned) by the time the
  // snapshotter got past their start revision; the rest of the work ignores chunks.
  std::vector<SnapshotInfo> list;
  for (const SnapshotInfo& s : sorted) {
    if (!s.is_chunk) {
      list.push_back(s);
    } else if (last_snapshot_revision != 0 && s.start_revision <= last_snapshot_revision &&
               IsDeletable(s, now)) {
      garbage.push_back(s);
    }
  }
  if (list.empty()) return garbage;

  // Stream starts: index 0 (even when the listing starts with deltas) and every full after it.
  std::vector<size_t> starts{0};
  for (size_t i = 1; i < list.size(); ++i) {
    if (list[i].kind == SnapshotKind::kFull) starts.push_back(i);
  }
  Collector c(list, now, garbage);
  if (options.policy == GcPolicy::kExponential) {
    SelectExponential(list, starts, options, now, c);
  } else {
    SelectLimitBased(starts, options, c);
  }
  return garbage;
}

}  // namespace etcdw::sidecar
