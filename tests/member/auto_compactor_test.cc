#include "etcdw/member/auto_compactor.h"

#include <gtest/gtest.h>

namespace etcdw::member {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

TEST(AutoCompactorTest, DisabledWhenRetentionIsZero) {
  common::ManualClock clock;
  auto c = AutoCompactor::Create("periodic", "0", clock.Now());
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->enabled());
  auto r = AutoCompactor::Create("revision", "0", clock.Now());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->enabled());
}

TEST(AutoCompactorTest, PeriodicCompactsToTheRevisionFromOneRetentionAgo) {
  common::ManualClock clock;
  auto c = AutoCompactor::Create("periodic", "10m", clock.Now());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->enabled());
  EXPECT_EQ(c->interval(), minutes(1));  // a tenth of the retention
  int64_t rev = 100;
  std::optional<int64_t> got;
  // Nothing is compacted during the first retention period.
  for (int i = 0; i < 9; ++i) {
    clock.Advance(minutes(1));
    EXPECT_FALSE(c->Tick(clock.Now(), rev += 10).has_value()) << i;
  }
  clock.Advance(minutes(1));
  got = c->Tick(clock.Now(), rev += 10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 110);  // the oldest sample, taken ~10 minutes ago
  c->Done(true, clock.Now());
  // Then every min(retention, 1h) = 10 minutes, to the revision from 10 minutes before.
  for (int i = 0; i < 9; ++i) {
    clock.Advance(minutes(1));
    EXPECT_FALSE(c->Tick(clock.Now(), rev += 10).has_value()) << i;
  }
  clock.Advance(minutes(1));
  got = c->Tick(clock.Now(), rev += 10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 200);  // sampled when the previous compaction ran
}

TEST(AutoCompactorTest, PeriodicBareNumberMeansHours) {
  common::ManualClock clock;
  auto c = AutoCompactor::Create("periodic", "1", clock.Now());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->interval(), minutes(6));
}

TEST(AutoCompactorTest, FailedCompactionIsRetried) {
  common::ManualClock clock;
  auto c = AutoCompactor::Create("periodic", "10s", clock.Now());
  ASSERT_TRUE(c.ok());
  std::optional<int64_t> got;
  for (int i = 0; i < 11 && !got; ++i) {
    clock.Advance(seconds(1));
    got = c->Tick(clock.Now(), 50 + i);
  }
  ASSERT_TRUE(got.has_value());
  c->Done(false, clock.Now());
  clock.Advance(seconds(1));
  EXPECT_TRUE(c->Tick(clock.Now(), 70).has_value());
}

TEST(AutoCompactorTest, RevisionModeKeepsRetentionRevisions) {
  common::ManualClock clock;
  auto c = AutoCompactor::Create("revision", "1000", clock.Now());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->interval(), minutes(5));
  EXPECT_FALSE(c->Tick(clock.Now(), 900).has_value());
  auto got = c->Tick(clock.Now(), 1500);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 500);
  c->Done(true, clock.Now());
  EXPECT_FALSE(c->Tick(clock.Now(), 1500).has_value());  // unchanged since last time
  EXPECT_EQ(c->Tick(clock.Now(), 1600), 600);
}

}  // namespace
}  // namespace etcdw::member
