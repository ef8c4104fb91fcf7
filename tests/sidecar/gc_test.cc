#include "etcdw/sidecar/gc.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace etcdw::sidecar {
namespace {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::system_clock;
using TimePoint = system_clock::time_point;

// 2024-03-10T00:00:00Z.
const TimePoint kDay = TimePoint{std::chrono::seconds{1710028800}};

SnapshotInfo Full(int64_t last, TimePoint t) {
  SnapshotInfo s = NewSnapshot(SnapshotKind::kFull, 0, last, t, ".gz", false);
  s.prefix = "v2/";
  return s;
}
SnapshotInfo Incr(int64_t start, int64_t last, TimePoint t) {
  SnapshotInfo s = NewSnapshot(SnapshotKind::kIncr, start, last, t, ".gz", false);
  s.prefix = "v2/";
  return s;
}
SnapshotInfo Chunk(SnapshotInfo s, int part) {
  s.is_chunk = true;
  s.snap_name += "/" + std::string(9, '0') + std::to_string(part);
  return s;
}

std::set<std::string> KeySet(const std::vector<SnapshotInfo>& list) {
  std::set<std::string> out;
  for (const SnapshotInfo& s : list) out.insert(SnapshotKey(s));
  return out;
}

// The listing after deleting `garbage` (which must hold each object at most once).
std::vector<SnapshotInfo> Remaining(const std::vector<SnapshotInfo>& list,
                                    const std::vector<SnapshotInfo>& garbage) {
  std::set<std::string> gone = KeySet(garbage);
  EXPECT_EQ(gone.size(), garbage.size()) << "an object was selected twice";
  std::vector<SnapshotInfo> out;
  for (const SnapshotInfo& s : list) {
    if (!gone.count(SnapshotKey(s))) out.push_back(s);
  }
  return out;
}

// Full, Incr, Incr every 10 minutes from midnight 36 days before `now` up to `now` (gardener's
// GC test store); revisions increase by 10 per object.
std::vector<SnapshotInfo> ThirtySixDays(TimePoint now) {
  std::vector<SnapshotInfo> list;
  TimePoint t = std::chrono::floor<days>(now) - days(36);
  for (int64_t i = 0; t <= now; ++i, t += minutes(10)) {
    if (i % 3 == 0) {
      list.push_back(Full(10 * (i + 1), t));
    } else {
      list.push_back(Incr(10 * i + 1, 10 * (i + 1), t));
    }
  }
  SortSnapshots(list);
  return list;
}

int64_t DaysBefore(TimePoint now, TimePoint t) {
  return (std::chrono::floor<days>(now) - std::chrono::floor<days>(t)).count();
}
int64_t HourOfDay(TimePoint t) { return (t - std::chrono::floor<days>(t)) / hours(1); }

// The Exponential retention as documented, computed by grouping the fulls into windows and
// keeping the newest of each: every full of the current hour, the newest of each earlier hour of
// today, of each of the 7 previous days, and of each of the 4 weeks before those (the weeks end
// with the 8th day back), plus the latest stream.
std::set<std::string> ExpectedExponential(const std::vector<SnapshotInfo>& list, TimePoint now) {
  std::set<std::string> keep;
  std::map<std::string, const SnapshotInfo*> newest;  // window -> newest full in it
  for (const SnapshotInfo& s : list) {
    if (s.kind != SnapshotKind::kFull) continue;
    int64_t k = DaysBefore(now, s.created_on);
    std::string window;
    if (k == 0 && HourOfDay(s.created_on) == HourOfDay(now)) {
      keep.insert(SnapshotKey(s));
      continue;
    } else if (k == 0) {
      window = "hour " + std::to_string(HourOfDay(s.created_on));
    } else if (k <= 7) {
      window = "day " + std::to_string(k);
    } else if (k <= 35) {
      window = "week " + std::to_string((k - 1) / 7);
    } else {
      continue;
    }
    const SnapshotInfo*& n = newest[window];
    if (n == nullptr || n->created_on < s.created_on) n = &s;
  }
  for (const auto& [window, s] : newest) keep.insert(SnapshotKey(*s));
  // The latest stream: the last full and every delta after it.
  for (auto it = list.rbegin(); it != list.rend(); ++it) {
    keep.insert(SnapshotKey(*it));
    if (it->kind == SnapshotKind::kFull) break;
  }
  return keep;
}

class ExponentialVectorTest : public ::testing::TestWithParam<int> {};

TEST_P(ExponentialVectorTest, KeepsHourlyDailyWeeklyFullsAndTheLatestStream) {
  const TimePoint now = kDay + minutes(GetParam());
  const std::vector<SnapshotInfo> list = ThirtySixDays(now);
  const std::vector<SnapshotInfo> garbage =
      SelectGarbage(list, GcOptions{}, now, list.back().last_revision);
  const std::vector<SnapshotInfo> left = Remaining(list, garbage);

  // Counted by kind and age.
  int weekly = 0, daily = 0, past_hours = 0, current_hour = 0, deltas = 0;
  for (const SnapshotInfo& s : left) {
    if (s.kind == SnapshotKind::kIncr) {
      ++deltas;
      continue;
    }
    int64_t k = DaysBefore(now, s.created_on);
    if (k >= 8) {
      ++weekly;
      // 23:30 of days 8, 15, 22 and 29 back.
      EXPECT_EQ((k - 8) % 7, 0) << s.snap_name;
      EXPECT_EQ(s.created_on - std::chrono::floor<days>(s.created_on), hours(23) + minutes(30));
    } else if (k >= 1) {
      ++daily;
      EXPECT_EQ(s.created_on - std::chrono::floor<days>(s.created_on), hours(23) + minutes(30));
    } else if (HourOfDay(s.created_on) != HourOfDay(now)) {
      ++past_hours;
    } else {
      ++current_hour;
    }
  }
  const int64_t minute = (now - std::chrono::floor<hours>(now)) / minutes(1);
  EXPECT_EQ(weekly, 4);
  EXPECT_EQ(daily, 7);
  EXPECT_EQ(past_hours, HourOfDay(now));
  EXPECT_EQ(current_hour, minute < 30 ? 1 : 2);
  // The deltas of the latest stream only: those taken after the newest full (:00 or :30).
  EXPECT_EQ(deltas, (minute % 30) / 10);
  EXPECT_EQ(static_cast<int>(left.size()), weekly + daily + past_hours + current_hour + deltas);

  // And exactly the documented set.
  EXPECT_EQ(KeySet(left), ExpectedExponential(list, now));
  // Every object is either kept or selected, none twice.
  EXPECT_EQ(KeySet(garbage).size() + left.size(), list.size());
}

// Minutes after midnight: mid-afternoon, the first and last minutes of the day, on a full, on
// the hour, and just after a half hour.
INSTANTIATE_TEST_SUITE_P(TimesOfDay, ExponentialVectorTest,
                         ::testing::Values(14 * 60 + 37, 0, 5, 12 * 60, 9 * 60 + 30, 23 * 60 + 59,
                                           30 + 10));

// Five streams of a full and two deltas, one hour apart, the newest starting an hour before now.
std::vector<SnapshotInfo> FiveStreams(TimePoint now) {
  std::vector<SnapshotInfo> list;
  for (int i = 0; i < 5; ++i) {
    TimePoint t = now - hours(5 - i);
    int64_t base = 100 * i;
    list.push_back(Full(base + 10, t));
    list.push_back(Incr(base + 11, base + 20, t + minutes(10)));
    list.push_back(Incr(base + 21, base + 30, t + minutes(20)));
  }
  return list;
}

TEST(LimitBasedTest, KeepsNewestMaxBackupsFullsAndTheLatestStreamsDeltas) {
  const TimePoint now = kDay + hours(12);
  const auto list = FiveStreams(now);
  GcOptions options{GcPolicy::kLimitBased, 2, std::chrono::seconds(0)};
  const auto left = Remaining(list, SelectGarbage(list, options, now, 430));
  // Fulls of streams 3 and 4; deltas of stream 4 only.
  EXPECT_EQ(KeySet(left), KeySet({list[9], list[12], list[13], list[14]}));
}

TEST(LimitBasedTest, MoreBackupsAllowedThanTakenDeletesOnlyOldDeltas) {
  const TimePoint now = kDay + hours(12);
  const auto list = FiveStreams(now);
  GcOptions options{GcPolicy::kLimitBased, 7, std::chrono::seconds(0)};
  const auto garbage = SelectGarbage(list, options, now, 430);
  EXPECT_EQ(garbage.size(), 8u);
  for (const SnapshotInfo& s : garbage) EXPECT_EQ(s.kind, SnapshotKind::kIncr) << s.snap_name;
  EXPECT_EQ(KeySet(Remaining(list, garbage)),
            KeySet({list[0], list[3], list[6], list[9], list[12], list[13], list[14]}));
}

TEST(LimitBasedTest, OneBackupKeepsOnlyTheLatestStream) {
  const TimePoint now = kDay + hours(12);
  const auto list = FiveStreams(now);
  GcOptions options{GcPolicy::kLimitBased, 1, std::chrono::seconds(0)};
  const auto left = Remaining(list, SelectGarbage(list, options, now, 430));
  EXPECT_EQ(KeySet(left), KeySet({list[12], list[13], list[14]}));
}

TEST(GcTest, LatestStreamIsNeverDeletedHoweverOld) {
  const TimePoint now = kDay;
  const TimePoint old = now - days(400);
  std::vector<SnapshotInfo> list = {Full(10, old), Incr(11, 20, old + minutes(1)),
                                    Full(30, old + days(1)), Incr(31, 40, old + days(2)),
                                    Incr(41, 50, old + days(3))};
  for (GcPolicy policy : {GcPolicy::kExponential, GcPolicy::kLimitBased}) {
    GcOptions options{policy, 1, std::chrono::seconds(0)};
    const auto left = Remaining(list, SelectGarbage(list, options, now, 50));
    EXPECT_EQ(KeySet(left), KeySet({list[2], list[3], list[4]}));
  }
}

TEST(GcTest, OnlyOneStreamMeansNothingToCollect) {
  const TimePoint now = kDay;
  std::vector<SnapshotInfo> list = {Full(10, now - days(90)), Incr(11, 20, now - days(80))};
  for (GcPolicy policy : {GcPolicy::kExponential, GcPolicy::kLimitBased}) {
    EXPECT_TRUE(SelectGarbage(list, GcOptions{policy, 1, {}}, now, 20).empty());
  }
  EXPECT_TRUE(SelectGarbage({}, GcOptions{}, now, 0).empty());
}

TEST(GcTest, DeltaRetentionKeepsRecentDeltasOfOlderStreams) {
  const TimePoint now = kDay + hours(12);
  std::vector<SnapshotInfo> list = {
      Full(10, now - minutes(120)),    Incr(11, 20, now - minutes(110)),
      Incr(21, 30, now - minutes(90)), Incr(31, 40, now - minutes(35)),  // at the cutoff
      Incr(41, 50, now - minutes(30)), Full(60, now - minutes(20)),
      Incr(61, 70, now - minutes(10)), Incr(71, 80, now - minutes(5)),
  };
  GcOptions options{GcPolicy::kExponential, 7, std::chrono::minutes(35)};
  auto garbage = SelectGarbage(list, options, now, 80);
  // Created strictly before now - 35 min.
  EXPECT_EQ(KeySet(garbage), KeySet({list[1], list[2]}));

  options.delta_retention = std::chrono::hours(10);
  EXPECT_TRUE(SelectGarbage(list, options, now, 80).empty());

  options.delta_retention = std::chrono::seconds(0);  // the default: all superseded deltas
  EXPECT_EQ(KeySet(SelectGarbage(list, options, now, 80)),
            KeySet({list[1], list[2], list[3], list[4]}));

  options.policy = GcPolicy::kLimitBased;
  options.delta_retention = std::chrono::minutes(35);
  EXPECT_EQ(KeySet(SelectGarbage(list, options, now, 80)), KeySet({list[1], list[2]}));
}

TEST(GcTest, ListingThatStartsWithDeltasTreatsThemAsTheFirstStream) {
  const TimePoint now = kDay + hours(12);
  std::vector<SnapshotInfo> list = {Incr(1, 10, now - hours(3)), Incr(11, 20, now - hours(2)),
                                    Full(30, now - hours(1)), Incr(31, 40, now - minutes(30))};
  GcOptions options{GcPolicy::kLimitBased, 1, std::chrono::seconds(0)};
  auto garbage = SelectGarbage(list, options, now, 40);
  // Each old delta selected once, although the first one also stands in the stream's full slot.
  EXPECT_EQ(garbage.size(), 2u);
  EXPECT_EQ(KeySet(garbage), KeySet({list[0], list[1]}));
}

TEST(GcTest, ImmutableObjectsAreSkippedUntilTheyExpire) {
  const TimePoint now = kDay + hours(12);
  auto list = FiveStreams(now);
  list[0].immutability_expiry_time = now + hours(1);  // a full still locked
  list[1].immutability_expiry_time = now;             // a delta whose lock ends exactly now
  list[4].immutability_expiry_time = now - hours(1);  // expired
  GcOptions options{GcPolicy::kLimitBased, 1, std::chrono::seconds(0)};
  const auto garbage = KeySet(SelectGarbage(list, options, now, 430));
  EXPECT_FALSE(garbage.count(SnapshotKey(list[0])));
  EXPECT_FALSE(garbage.count(SnapshotKey(list[1])));
  EXPECT_TRUE(garbage.count(SnapshotKey(list[4])));
  EXPECT_TRUE(garbage.count(SnapshotKey(list[3])));
  EXPECT_EQ(garbage.size(), 12u - 2u);
}

TEST(ChunkGcTest, NothingWhileNoSnapshotWasTaken) {
  const TimePoint now = kDay;
  std::vector<SnapshotInfo> list = {Chunk(Full(1, now), 1), Chunk(Full(1, now), 2)};
  EXPECT_TRUE(SelectGarbage(list, GcOptions{}, now, 0).empty());
}

TEST(ChunkGcTest, ChunksOfFinishedUploadsGoChunksOfTheUploadUnderWayStay) {
  const TimePoint now = kDay;
  std::vector<SnapshotInfo> list;
  SnapshotInfo full = Full(3, now - minutes(10));
  SnapshotInfo done = Incr(4, 6, now - minutes(5));
  SnapshotInfo uploading = Incr(7, 9, now);
  for (int p = 1; p <= 3; ++p) list.push_back(Chunk(full, p));
  list.push_back(full);
  for (int p = 1; p <= 2; ++p) list.push_back(Chunk(done, p));
  list.push_back(done);
  for (int p = 1; p <= 4; ++p) list.push_back(Chunk(uploading, p));
  SortSnapshots(list);
  auto garbage = SelectGarbage(list, GcOptions{}, now, 6);
  ASSERT_EQ(garbage.size(), 5u);
  for (const SnapshotInfo& s : garbage) {
    EXPECT_TRUE(s.is_chunk);
    EXPECT_LE(s.start_revision, 6);
  }
}

TEST(ChunkGcTest, ChunksDoNotStartStreams) {
  const TimePoint now = kDay;
  std::vector<SnapshotInfo> list = {Full(10, now - hours(2)), Incr(11, 20, now - hours(1)),
                                    Chunk(Full(25, now - minutes(30)), 1),
                                    Incr(21, 30, now - minutes(20))};
  SortSnapshots(list);
  // The full chunk is not a stream start, so everything is in the latest stream.
  GcOptions options{GcPolicy::kLimitBased, 1, std::chrono::seconds(0)};
  EXPECT_TRUE(SelectGarbage(list, options, now, 0).empty());
  // Once past its revision the chunk itself is garbage, and only it.
  auto garbage = SelectGarbage(list, options, now, 30);
  ASSERT_EQ(garbage.size(), 1u);
  EXPECT_TRUE(garbage[0].is_chunk);
}

TEST(GcPolicyTest, Parse) {
  EXPECT_EQ(ParseGcPolicy("Exponential").value(), GcPolicy::kExponential);
  EXPECT_EQ(ParseGcPolicy("LimitBased").value(), GcPolicy::kLimitBased);
  for (const char* bad : {"", "exponential", "Limit", "LimitBased "}) {
    Result<GcPolicy> r = ParseGcPolicy(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("Exponential, LimitBased"), std::string::npos);
  }
}

}  // namespace
}  // namespace etcdw::sidecar
