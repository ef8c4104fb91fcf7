#include "local_time.h"

#include <time.h>

namespace etcdw::sidecar {

using std::chrono::system_clock;

LocalFields ToLocalFields(int64_t unix_seconds) {
  time_t tt = static_cast<time_t>(unix_seconds);
  struct tm tm {};
  localtime_r(&tt, &tm);
  return {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
          tm.tm_min,         tm.tm_sec,     tm.tm_wday};
}

int64_t FromLocalFields(int year, int month, int day, int hour, int minute, int second) {
  struct tm tm {};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  tm.tm_isdst = -1;
  return static_cast<int64_t>(mktime(&tm));
}

system_clock::time_point LocalHoursBefore(system_clock::time_point t, int hours) {
  const time_t tt = system_clock::to_time_t(t);
  const auto frac = t - system_clock::from_time_t(tt);
  const LocalFields f = ToLocalFields(tt);
  const int64_t back = FromLocalFields(f.year, f.month, f.day, f.hour - hours, f.minute, f.second);
  return system_clock::from_time_t(static_cast<time_t>(back)) + frac;
}

std::string FormatLocalTime(system_clock::time_point t) {
  time_t tt = system_clock::to_time_t(t);
  struct tm lt {};
  localtime_r(&tt, &lt);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &lt);
  return buf;
}

}  // namespace etcdw::sidecar
