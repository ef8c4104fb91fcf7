// Automatic compaction as etcd configures it with auto-compaction-mode/-retention:
//  periodic: keep `retention` of history. Every interval/10 (interval = min(retention, 1h)) the
//            current revision is sampled; once `retention` (later: interval) has passed since the
//            last compaction, compact to the oldest sample, taken about `retention` ago.
//  revision: every 5 minutes compact to current - retention, when that moved.
// Pure logic: the caller ticks it with the time and revision and performs the compaction.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"

namespace etcdw::member {

class AutoCompactor {
 public:
  using TimePoint = common::Clock::TimePoint;

  // Returns nullptr-like disabled compactor when retention is "0".
  static Result<AutoCompactor> Create(const std::string& mode, const std::string& retention,
                                      TimePoint now);

  bool enabled() const { return enabled_; }
  // How often Tick must be called.
  std::chrono::milliseconds interval() const { return tick_; }
  // Records the current revision; returns the revision to compact to, if it is time.
  std::optional<int64_t> Tick(TimePoint now, int64_t current_rev);
  // Reports the compaction's outcome (success includes "already compacted").
  void Done(bool success, TimePoint now);

 private:
  bool enabled_ = false;
  bool periodic_ = true;
  std::chrono::milliseconds period_{0};  // periodic: retention
  std::chrono::milliseconds base_{0};    // wait before the next compaction
  std::chrono::milliseconds tick_{0};
  size_t max_samples_ = 0;
  int64_t retention_revs_ = 0;  // revision mode
  int64_t last_compacted_ = 0;
  int64_t pending_ = 0;
  TimePoint last_success_;
  std::deque<int64_t> samples_;
};

}  // namespace etcdw::member
