// Cron schedules for --schedule and --defragmentation-schedule, as robfig/cron v3's standard
// parser reads them: five fields (minute hour day-of-month month day-of-week) with "*", "?",
// lists "a,b", ranges "a-b", steps "*/n" and "a-b/n", month and weekday names (JAN, MON), and the
// descriptors @yearly @annually @monthly @weekly @daily @midnight @hourly and "@every <duration>"
// (Go duration syntax). Times are computed in the process' local time zone, as robfig does.
// When both day fields are restricted, a day matches if either matches (cron's rule).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace etcdw::sidecar {

class CronSchedule {
 public:
  // Errors name the field and the problem ("hour: 25 out of range 0-23").
  static Result<CronSchedule> Parse(std::string_view spec);

  // The first activation strictly after `t`; none when the schedule never fires again (within
  // five years, robfig's search bound).
  std::optional<std::chrono::system_clock::time_point> Next(
      std::chrono::system_clock::time_point t) const;

  // gardener's full-snapshot time window in hours, from the spec's text: fewer than 5 fields:
  // 24; day-of-week not "*": 168; both day fields "*" and the hour field contains "/N": N;
  // else 24.
  int WindowHours() const;

  const std::string& spec() const { return spec_; }

 private:
  std::string spec_;
  // Bit sets of allowed values (robfig's representation); every_ > 0 for "@every".
  uint64_t minute_ = 0, hour_ = 0, dom_ = 0, month_ = 0, dow_ = 0;
  bool dom_star_ = false, dow_star_ = false;
  std::chrono::seconds every_{0};
};

}  // namespace etcdw::sidecar
