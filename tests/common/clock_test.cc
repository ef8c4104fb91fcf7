#include "etcdw/common/clock.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace etcdw::common {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ManualClockTest, MovesOnlyWhenAdvancedAndBothReadingsTogether) {
  ManualClock clock(Clock::WallTime(seconds(1000)));
  const Clock::TimePoint t0 = clock.Now();
  EXPECT_EQ(clock.WallNow(), Clock::WallTime(seconds(1000)));
  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(milliseconds(1500));
  EXPECT_EQ(clock.Now() - t0, milliseconds(1500));
  EXPECT_EQ(clock.WallNow(), Clock::WallTime(milliseconds(1001500)));
}

TEST(ManualClockTest, AWaitEndsWhenAnAdvanceReachesItsDeadlineAndNotBefore) {
  ManualClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> returned{false};
  const Clock::TimePoint deadline = clock.Now() + seconds(10);
  auto waiter = std::async(std::launch::async, [&] {
    std::unique_lock lock(mu);
    bool r = clock.WaitUntil(lock, cv, deadline, [] { return false; });
    returned = true;
    return r;
  });
  clock.Advance(seconds(9));
  // The waiter looks at the clock every poll period: many periods pass and it still waits.
  EXPECT_EQ(waiter.wait_for(milliseconds(50)), std::future_status::timeout);
  EXPECT_FALSE(returned);
  clock.Advance(seconds(1));
  ASSERT_EQ(waiter.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_FALSE(waiter.get());
}

TEST(ManualClockTest, AWaitEndsAtItsPredicateWithoutTimeMoving) {
  ManualClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  const Clock::WallTime deadline = clock.WallNow() + seconds(60);
  auto waiter = std::async(std::launch::async, [&] {
    std::unique_lock lock(mu);
    return clock.WaitUntilWall(lock, cv, deadline, [&] { return done; });
  });
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  ASSERT_EQ(waiter.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_TRUE(waiter.get());
}

TEST(ManualClockTest, WallWaitsFollowTheWallReading) {
  ManualClock clock(Clock::WallTime(seconds(100)));
  std::mutex mu;
  std::condition_variable cv;
  auto waiter = std::async(std::launch::async, [&] {
    std::unique_lock lock(mu);
    return clock.WaitUntilWall(lock, cv, Clock::WallTime(seconds(160)), [] { return false; });
  });
  clock.Advance(seconds(59));
  EXPECT_EQ(waiter.wait_for(milliseconds(50)), std::future_status::timeout);
  clock.Advance(seconds(1));
  ASSERT_EQ(waiter.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_FALSE(waiter.get());
}

TEST(ClockTest, RealWaitsAreBoundedByThePollPeriodOnlyForTheManualClock) {
  ManualClock manual;
  EXPECT_EQ(manual.RealWaitUntil(manual.Now() + seconds(30)), ManualClock::kPollPeriod);
  EXPECT_EQ(manual.RealWaitUntil(manual.Now()), Clock::Duration::zero());
  const SystemClock& real = SystemClock::Instance();
  const Clock::Duration d = real.RealWaitUntil(real.Now() + seconds(30));
  EXPECT_GT(d, seconds(29));
  EXPECT_LE(d, seconds(30));
  EXPECT_EQ(real.RealWaitUntil(real.Now() - seconds(1)), Clock::Duration::zero());
}

TEST(ClockTest, SystemClockWaitsEndAtTheirDeadline) {
  const SystemClock& clock = SystemClock::Instance();
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  const Clock::TimePoint start = clock.Now();
  EXPECT_FALSE(clock.WaitUntil(lock, cv, start + milliseconds(20), [] { return false; }));
  EXPECT_GE(clock.Now() - start, milliseconds(20));
  const Clock::WallTime wall = clock.WallNow();
  EXPECT_FALSE(clock.WaitUntilWall(lock, cv, wall + milliseconds(20), [] { return false; }));
  EXPECT_GE(clock.WallNow() - wall, milliseconds(20));
}

}  // namespace
}  // namespace etcdw::common
