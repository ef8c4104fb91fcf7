// Calendar arithmetic in the process' local time zone (TZ, else /etc/localtime), as Go's time
// package does it: an instant broken down into local fields, Go's time.Date normalisation back
// to an instant, an hour offset on the local wall clock, and a local timestamp for logs. Used by
// the cron schedules and the snapshotter's start-up rule (gardener computes both in local time).
// Thread-safe (localtime_r/mktime); a TZ change takes effect with tzset().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace etcdw::sidecar {

// An instant's fields on the local wall clock.
struct LocalFields {
  int year = 0;
  int month = 0;    // 1-12
  int day = 0;      // 1-31
  int hour = 0;     // 0-23
  int minute = 0;   // 0-59
  int second = 0;   // 0-60
  int weekday = 0;  // 0 = Sunday
};

// The local fields of the Unix second `unix_seconds`.
LocalFields ToLocalFields(int64_t unix_seconds);

// Go's time.Date in the local zone, in Unix seconds: out-of-range fields are normalised (month
// 13 is January of the next year, day 0 the last day of the previous month, hour -1 the last hour
// of the previous day); a local time that a DST change skips or repeats resolves as mktime does.
int64_t FromLocalFields(int year, int month, int day, int hour, int minute, int second);

// `t` with its local wall-clock hour moved back by `hours` (Go's time.Date(y, m, d, h - hours,
// ...) as gardener's GetPrevScheduledSnapTime computes it); sub-second precision is kept. Across
// a DST change this differs from `t - hours`.
std::chrono::system_clock::time_point LocalHoursBefore(std::chrono::system_clock::time_point t,
                                                       int hours);

// "2026-01-01T10:00:00+0100": `t` on the local wall clock, whole seconds, with its UTC offset.
std::string FormatLocalTime(std::chrono::system_clock::time_point t);

}  // namespace etcdw::sidecar
