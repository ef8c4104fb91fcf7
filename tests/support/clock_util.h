// Time helpers for unit tests.
#pragma once

#include <stdlib.h>
#include <time.h>

#include <chrono>
#include <cstdint>

namespace etcdw::testsupport {

// The instant `seconds` after the Unix epoch.
inline std::chrono::system_clock::time_point Unix(int64_t seconds) {
  return std::chrono::system_clock::time_point{std::chrono::seconds{seconds}};
}

// Sets the process's local time zone (TZ), e.g. "UTC" or "America/New_York".
inline void SetTimeZone(const char* tz) {
  ::setenv("TZ", tz, 1);
  ::tzset();
}

}  // namespace etcdw::testsupport
