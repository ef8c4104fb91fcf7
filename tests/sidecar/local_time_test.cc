// Local-time arithmetic (src/sidecar/local_time.h) in fixed time zones: POSIX TZ strings, so
// that the results do not depend on the machine's zone database.
#include "local_time.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>

#include "support/clock_util.h"

namespace etcdw::sidecar {
namespace {

using std::chrono::system_clock;
using testsupport::SetTimeZone;
using testsupport::Unix;

// Central European time with its DST rule: CET (UTC+1), CEST (UTC+2) from the last Sunday of
// March 02:00 to the last Sunday of October 03:00.
constexpr char kBerlin[] = "CET-1CEST,M3.5.0,M10.5.0/3";

constexpr int64_t k20260101 = 1767225600;  // 2026-01-01T00:00:00Z, a Thursday

class LocalTimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* tz = ::getenv("TZ")) saved_tz_ = tz;
    SetTimeZone("UTC");
  }
  void TearDown() override {
    if (saved_tz_) {
      SetTimeZone(saved_tz_->c_str());
    } else {
      ::unsetenv("TZ");
      ::tzset();
    }
  }
  std::optional<std::string> saved_tz_;
};

TEST_F(LocalTimeTest, FieldsOfAnInstantFollowTheZone) {
  LocalFields utc = ToLocalFields(k20260101 + 10 * 3600 + 5 * 60 + 7);
  EXPECT_EQ(utc.year, 2026);
  EXPECT_EQ(utc.month, 1);
  EXPECT_EQ(utc.day, 1);
  EXPECT_EQ(utc.hour, 10);
  EXPECT_EQ(utc.minute, 5);
  EXPECT_EQ(utc.second, 7);
  EXPECT_EQ(utc.weekday, 4);

  SetTimeZone("XYZ+5:30");  // UTC-5:30: still the last day of 2025
  LocalFields west = ToLocalFields(k20260101);
  EXPECT_EQ(west.year, 2025);
  EXPECT_EQ(west.month, 12);
  EXPECT_EQ(west.day, 31);
  EXPECT_EQ(west.hour, 18);
  EXPECT_EQ(west.minute, 30);
  EXPECT_EQ(west.weekday, 3);
}

TEST_F(LocalTimeTest, FromFieldsNormalisesAsGoTimeDate) {
  EXPECT_EQ(FromLocalFields(2026, 1, 1, 0, 0, 0), k20260101);
  EXPECT_EQ(FromLocalFields(2025, 13, 1, 0, 0, 0), k20260101);         // month 13
  EXPECT_EQ(FromLocalFields(2026, 1, 0, 0, 0, 0), k20260101 - 86400);  // day 0: 31 December
  EXPECT_EQ(FromLocalFields(2026, 1, 1, -1, 0, 0), k20260101 - 3600);  // hour -1
  EXPECT_EQ(FromLocalFields(2026, 1, 1, 0, 0, 90), k20260101 + 90);
  EXPECT_EQ(FromLocalFields(2026, 3, 0, 0, 0, 0), FromLocalFields(2026, 2, 28, 0, 0, 0));
  SetTimeZone("XYZ-2");  // UTC+2: local midnight is 22:00 UTC
  EXPECT_EQ(FromLocalFields(2026, 1, 1, 0, 0, 0), k20260101 - 2 * 3600);
}

TEST_F(LocalTimeTest, HoursBeforeMovesTheWallClockKeepingTheFraction) {
  const auto t = Unix(k20260101 + 12 * 3600) + std::chrono::milliseconds(250);
  EXPECT_EQ(LocalHoursBefore(t, 24), t - std::chrono::hours(24));
  EXPECT_EQ(LocalHoursBefore(t, 0), t);
  EXPECT_EQ(LocalHoursBefore(t, -3), t + std::chrono::hours(3));

  // Across the spring DST change (2026-03-29 02:00 CET -> 03:00 CEST) the local day before
  // 12:00 CEST is 12:00 CET: 23 real hours; across the autumn change (2026-10-25) 25.
  SetTimeZone(kBerlin);
  const auto spring = Unix(FromLocalFields(2026, 3, 29, 12, 0, 0));
  EXPECT_EQ(spring, Unix(1774778400));  // 10:00 UTC
  EXPECT_EQ(LocalHoursBefore(spring, 24), spring - std::chrono::hours(23));
  const auto autumn = Unix(FromLocalFields(2026, 10, 25, 12, 0, 0));
  EXPECT_EQ(LocalHoursBefore(autumn, 24), autumn - std::chrono::hours(25));
  // Within one offset it is plain subtraction.
  EXPECT_EQ(LocalHoursBefore(spring, 6), spring - std::chrono::hours(6));
}

TEST_F(LocalTimeTest, FormatShowsTheLocalClockAndItsOffset) {
  const auto t = Unix(k20260101 + 10 * 3600) + std::chrono::milliseconds(999);
  EXPECT_EQ(FormatLocalTime(t), "2026-01-01T10:00:00+0000");
  SetTimeZone("XYZ-2");
  EXPECT_EQ(FormatLocalTime(t), "2026-01-01T12:00:00+0200");
  SetTimeZone("XYZ+5:30");
  EXPECT_EQ(FormatLocalTime(t), "2026-01-01T04:30:00-0530");
  SetTimeZone(kBerlin);
  EXPECT_EQ(FormatLocalTime(Unix(1774778400)), "2026-03-29T12:00:00+0200");
}

}  // namespace
}  // namespace etcdw::sidecar
