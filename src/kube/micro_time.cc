#include <time.h>

#include <chrono>
#include <cstdio>

#include "etcdw/kube/client.h"

namespace etcdw::kube {

std::string MicroTime(std::chrono::system_clock::time_point t) {
  using std::chrono::microseconds;
  using std::chrono::seconds;
  // Floor, not truncation toward zero: a time before 1970 keeps a positive fraction.
  const auto us = std::chrono::floor<microseconds>(t.time_since_epoch());
  const auto whole = std::chrono::floor<seconds>(us);
  const time_t secs = static_cast<time_t>(whole.count());
  const long long fraction = (us - whole).count();  // NOLINT(google-runtime-int): printf's %lld
  tm utc{};
  gmtime_r(&secs, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, fraction);
  return text;
}

}  // namespace etcdw::kube
