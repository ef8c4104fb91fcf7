#include "etcdw/sidecar/cron.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <cstdio>
#include <string>

#include "support/clock_util.h"

namespace etcdw::sidecar {
namespace {

using std::chrono::system_clock;

using testsupport::SetTimeZone;

// "YYYY-MM-DD HH:MM:SS" in UTC, plus `ns` nanoseconds.
system_clock::time_point Utc(const std::string& s, int64_t ns = 0) {
  struct tm tm {};
  EXPECT_EQ(std::sscanf(s.c_str(), "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                        &tm.tm_hour, &tm.tm_min, &tm.tm_sec),
            6)
      << s;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return system_clock::time_point(std::chrono::duration_cast<system_clock::duration>(
      std::chrono::seconds(timegm(&tm)) + std::chrono::nanoseconds(ns)));
}

std::string Format(system_clock::time_point t) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(ns / 1000000000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02d %02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  std::string out = buf;
  if (ns % 1000000000 != 0) out += " +" + std::to_string(ns % 1000000000) + "ns";
  return out;
}

class CronTest : public ::testing::Test {
 protected:
  void SetUp() override { SetTimeZone("UTC"); }
  void TearDown() override { SetTimeZone("UTC"); }

  // The next activation of `spec` after `from` (UTC), formatted; "never" when there is none.
  static std::string Next(const std::string& spec, const std::string& from, int64_t ns = 0) {
    Result<CronSchedule> s = CronSchedule::Parse(spec);
    EXPECT_TRUE(s.ok()) << spec << ": " << s.status().ToString();
    if (!s.ok()) return "unparsable";
    std::optional<system_clock::time_point> n = s->Next(Utc(from, ns));
    return n ? Format(*n) : "never";
  }

  // Parse must fail with a message containing every one of `needles`.
  static void ExpectError(const std::string& spec, std::initializer_list<const char*> needles) {
    Result<CronSchedule> s = CronSchedule::Parse(spec);
    ASSERT_FALSE(s.ok()) << spec;
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument) << spec;
    for (const char* n : needles) {
      EXPECT_NE(s.status().message().find(n), std::string::npos)
          << spec << " -> " << s.status().message() << " (wanted " << n << ")";
    }
  }
};

// 2026-01-01 is a Thursday.

TEST_F(CronTest, GardenerDefaultHourly) {
  EXPECT_EQ(Next("0 */1 * * *", "2026-01-01 10:00:00"), "2026-01-01 11:00:00");
  EXPECT_EQ(Next("0 */1 * * *", "2026-01-01 10:59:59", 500000000), "2026-01-01 11:00:00");
  EXPECT_EQ(Next("0 */1 * * *", "2026-01-01 09:59:59"), "2026-01-01 10:00:00");
  EXPECT_EQ(Next("0 */1 * * *", "2026-12-31 23:30:00"), "2027-01-01 00:00:00");
}

TEST_F(CronTest, EveryFiveMinutes) {
  EXPECT_EQ(Next("*/5 * * * *", "2026-01-01 10:03:10"), "2026-01-01 10:05:00");
  EXPECT_EQ(Next("*/5 * * * *", "2026-01-01 10:05:00"), "2026-01-01 10:10:00");
  EXPECT_EQ(Next("*/5 * * * *", "2026-01-01 10:55:00"), "2026-01-01 11:00:00");
  EXPECT_EQ(Next("*/5 * * * *", "2026-02-28 23:58:00"), "2026-03-01 00:00:00");
}

TEST_F(CronTest, EveryThirdDayOfMonth) {
  // Days 1, 4, ..., 28, 31.
  EXPECT_EQ(Next("0 0 */3 * *", "2026-01-01 10:00:00"), "2026-01-04 00:00:00");
  EXPECT_EQ(Next("0 0 */3 * *", "2026-01-30 12:00:00"), "2026-01-31 00:00:00");
  EXPECT_EQ(Next("0 0 */3 * *", "2026-01-31 00:00:00"), "2026-02-01 00:00:00");
  EXPECT_EQ(Next("0 0 */3 * *", "2026-02-28 01:00:00"), "2026-03-01 00:00:00");
}

TEST_F(CronTest, WeeklyOnSunday) {
  EXPECT_EQ(Next("0 0 * * 0", "2026-01-01 10:00:00"), "2026-01-04 00:00:00");
  EXPECT_EQ(Next("0 0 * * 0", "2026-01-04 00:00:00"), "2026-01-11 00:00:00");
  EXPECT_EQ(Next("0 0 * * SUN", "2026-01-04 00:00:00"), "2026-01-11 00:00:00");
}

TEST_F(CronTest, EveryDuration) {
  EXPECT_EQ(Next("@every 30s", "2026-01-01 10:00:00"), "2026-01-01 10:00:30");
  // Sub-second parts of the start are dropped, as robfig does.
  EXPECT_EQ(Next("@every 30s", "2026-01-01 10:00:00", 700000000), "2026-01-01 10:00:30");
  EXPECT_EQ(Next("@every 1m30s", "2026-01-01 10:00:00"), "2026-01-01 10:01:30");
  EXPECT_EQ(Next("@every 1.5h", "2026-01-01 10:00:00"), "2026-01-01 11:30:00");
  // Below a second is a second; fractions of a second are cut.
  EXPECT_EQ(Next("@every 500ms", "2026-01-01 10:00:00"), "2026-01-01 10:00:01");
  EXPECT_EQ(Next("@every 2500ms", "2026-01-01 10:00:00"), "2026-01-01 10:00:02");
  // Past the range of a time_point (year 2262): never.
  EXPECT_EQ(Next("@every 2562047h", "2026-01-01 10:00:00"), "never");
}

TEST_F(CronTest, Descriptors) {
  const char* from = "2026-01-01 10:20:00";
  EXPECT_EQ(Next("@hourly", from), "2026-01-01 11:00:00");
  EXPECT_EQ(Next("@daily", from), "2026-01-02 00:00:00");
  EXPECT_EQ(Next("@midnight", from), "2026-01-02 00:00:00");
  EXPECT_EQ(Next("@weekly", from), "2026-01-04 00:00:00");
  EXPECT_EQ(Next("@monthly", from), "2026-02-01 00:00:00");
  EXPECT_EQ(Next("@yearly", from), "2027-01-01 00:00:00");
  EXPECT_EQ(Next("@annually", from), "2027-01-01 00:00:00");
}

TEST_F(CronTest, NamesListsAndRanges) {
  EXPECT_EQ(Next("30 9 * JAN,jul MON-FRI", "2026-01-01 10:00:00"), "2026-01-02 09:30:00");
  EXPECT_EQ(Next("30 9 * JAN,jul MON-FRI", "2026-01-30 10:00:00"), "2026-07-01 09:30:00");
  EXPECT_EQ(Next("0 12 * * sat", "2026-01-01 10:00:00"), "2026-01-03 12:00:00");
  const char* minutes = "5,10-20/5,45 * * * *";  // 5, 10, 15, 20, 45
  EXPECT_EQ(Next(minutes, "2026-01-01 10:12:00"), "2026-01-01 10:15:00");
  EXPECT_EQ(Next(minutes, "2026-01-01 10:20:00"), "2026-01-01 10:45:00");
  EXPECT_EQ(Next(minutes, "2026-01-01 10:45:00"), "2026-01-01 11:05:00");
  EXPECT_EQ(Next("0 8-18/4 * * *", "2026-01-01 16:00:00"), "2026-01-02 08:00:00");  // 8, 12, 16
  EXPECT_EQ(Next("5/20 * * * *", "2026-01-01 10:30:00"), "2026-01-01 10:45:00");    // 5, 25, 45
  EXPECT_EQ(Next("? ? ? ? ?", "2026-01-01 10:30:00"), "2026-01-01 10:31:00");
}

TEST_F(CronTest, BothDayFieldsRestrictedMeansEither) {
  // The 13th or a Friday.
  EXPECT_EQ(Next("0 0 13 * 5", "2026-01-01 10:00:00"), "2026-01-02 00:00:00");
  EXPECT_EQ(Next("0 0 13 * 5", "2026-01-09 00:00:00"), "2026-01-13 00:00:00");
  EXPECT_EQ(Next("0 0 13 * 5", "2026-01-13 00:00:00"), "2026-01-16 00:00:00");
  // Only one restricted: it alone decides; "*/1" still counts as "*".
  EXPECT_EQ(Next("0 0 13 * *", "2026-01-01 10:00:00"), "2026-01-13 00:00:00");
  EXPECT_EQ(Next("0 0 */1 * 5", "2026-01-01 10:00:00"), "2026-01-02 00:00:00");
  EXPECT_EQ(Next("0 0 */1 * 5", "2026-01-02 00:00:00"), "2026-01-09 00:00:00");
  // "1-31" is not a wildcard: either day field may match.
  EXPECT_EQ(Next("0 0 1-31 * 5", "2026-01-02 10:00:00"), "2026-01-03 00:00:00");
}

TEST_F(CronTest, RareAndImpossibleDates) {
  EXPECT_EQ(Next("0 0 29 2 *", "2026-01-01 00:00:00"), "2028-02-29 00:00:00");
  EXPECT_EQ(Next("0 0 30 2 *", "2026-01-01 00:00:00"), "never");
  EXPECT_EQ(Next("0 0 31 4,6,9,11 *", "2026-01-01 00:00:00"), "never");
}

TEST_F(CronTest, UsesLocalTime) {
  SetTimeZone("XYZ-2");  // UTC+2: local midnight is 22:00 UTC
  EXPECT_EQ(Next("0 0 * * *", "2026-01-01 10:00:00"), "2026-01-01 22:00:00");
  EXPECT_EQ(Next("0 */1 * * *", "2026-01-01 10:00:00"), "2026-01-01 11:00:00");
  SetTimeZone("XYZ+5:30");  // UTC-5:30
  EXPECT_EQ(Next("0 0 * * *", "2026-01-01 10:00:00"), "2026-01-02 05:30:00");
}

TEST_F(CronTest, ErrorsNameTheField) {
  ExpectError("", {"empty"});
  ExpectError("* * * *", {"expected exactly 5 fields, found 4"});
  ExpectError("0 * * * * *", {"found 6"});
  ExpectError("60 * * * *", {"minute: 60 out of range 0-59"});
  ExpectError("0 25 * * *", {"hour: 25 out of range 0-23"});
  ExpectError("0 0 0 * *", {"day-of-month: 0 out of range 1-31"});
  ExpectError("0 0 * 13 *", {"month: 13 out of range 1-12"});
  ExpectError("0 0 * * 7", {"day-of-week: 7 out of range 0-6"});
  ExpectError("0 0 * FOO *", {"month:", "FOO"});
  ExpectError("x * * * *", {"minute:", "\"x\" is not a number"});
  ExpectError("*/0 * * * *", {"minute:", "step must be positive"});
  ExpectError("0 20-10 * * *", {"hour:", "20-10"});
  ExpectError("1-2-3 * * * *", {"minute:", "too many hyphens"});
  ExpectError("*/2/3 * * * *", {"minute:", "too many slashes"});
  ExpectError("1,,2 * * * *", {"minute:", "empty element"});
  ExpectError("0 0 * * -1", {"day-of-week:"});
  ExpectError("@fortnightly", {"unrecognized", "@fortnightly"});
  ExpectError("@every", {"unrecognized"});
  ExpectError("@every xyz", {"@every", "xyz"});
  ExpectError("@every 10", {"@every", "missing unit"});
  ExpectError("@every 10d", {"@every", "unknown unit"});
  ExpectError("TZ=UTC 0 * * * *", {"time zone"});
}

TEST_F(CronTest, WindowHours) {
  struct Case {
    const char* spec;
    int hours;
  };
  const Case cases[] = {
      {"0 */1 * * *", 1},  {"0 */6 * * *", 6},  {"0 1-23/4 * * *", 4}, {"0 0 * * *", 24},
      {"0 0 */3 * *", 24}, {"0 */3 1 * *", 24}, {"0 0 * * 0", 168},    {"0 */2 * * 1-5", 168},
      {"0 0 * * ?", 168},  {"@every 30s", 24},  {"@hourly", 24},       {"*/5 * * * *", 24},
  };
  for (const Case& c : cases) {
    Result<CronSchedule> s = CronSchedule::Parse(c.spec);
    ASSERT_TRUE(s.ok()) << c.spec << ": " << s.status().ToString();
    EXPECT_EQ(s->WindowHours(), c.hours) << c.spec;
    EXPECT_EQ(s->spec(), c.spec);
  }
}

}  // namespace
}  // namespace etcdw::sidecar
