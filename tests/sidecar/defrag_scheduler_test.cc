// The defragmentation schedule on a ManualClock, with rounds that fail at once (no endpoint is
// configured): when rounds are due, how failures are retried, and that Stop ends a wait. Rounds
// against real clusters, and a retried round that succeeds, are in tests/e2e/defrag_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "etcdw/common/clock.h"
#include "etcdw/sidecar/defragmenter.h"

namespace etcdw::sidecar {
namespace {

using namespace std::chrono_literals;

// Polls `pred` every millisecond of real time until it holds or `timeout` passes.
template <typename Pred>
bool PollFor(Pred pred, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

class DefragSchedulerTest : public ::testing::Test {
 protected:
  static EtcdConnectionOptions Unreachable() {
    EtcdConnectionOptions o;
    o.endpoints.clear();  // every round fails at once: "no etcd endpoint configured"
    return o;
  }
  static CronSchedule Schedule(const char* spec) {
    auto s = CronSchedule::Parse(spec);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return *s;
  }
  // Moves the clock to `t` (never back).
  void AdvanceTo(std::chrono::system_clock::time_point t) {
    ASSERT_GE(t, clock_.WallNow());
    clock_.Advance(t - clock_.WallNow());
  }
  // Waits until `failed` rounds have failed and the scheduler waits again; returns the time it
  // waits for.
  std::chrono::system_clock::time_point WaitForFailures(const DefragScheduler& s, int failed) {
    EXPECT_TRUE(PollFor([&] { return s.rounds_failed() >= failed && s.next_round().has_value(); }))
        << s.rounds_failed() << " rounds failed";
    EXPECT_EQ(s.rounds_failed(), failed);
    return s.next_round().value_or(std::chrono::system_clock::time_point());
  }

  common::ManualClock clock_;
};

TEST_F(DefragSchedulerTest, TheFirstRoundIsDueTheFirstDelayAfterTheCronTime) {
  const CronSchedule schedule = Schedule("*/10 * * * *");
  const auto cron_time = *schedule.Next(clock_.WallNow());
  DefragScheduler s(Unreachable(), schedule, 3min, 1min, clock_);
  EXPECT_FALSE(s.next_round().has_value());  // not started
  s.Start();
  ASSERT_TRUE(PollFor([&] { return s.next_round().has_value(); }));
  EXPECT_EQ(*s.next_round(), cron_time + 3min);
  EXPECT_EQ(s.rounds_failed(), 0);  // the thread is waiting: a round at start would be counted
  AdvanceTo(cron_time + 3min);
  WaitForFailures(s, 1);
  EXPECT_EQ(s.rounds_succeeded(), 0);
  s.Stop();
  EXPECT_FALSE(s.next_round().has_value());
}

TEST_F(DefragSchedulerTest, AFailedRoundIsRetriedEveryRetryPeriodAcrossCronTimes) {
  const CronSchedule schedule = Schedule("*/10 * * * *");
  DefragScheduler s(Unreachable(), schedule, 1min, 4min, clock_);
  s.Start();
  ASSERT_TRUE(PollFor([&] { return s.next_round().has_value(); }));
  auto due = *s.next_round();
  // Retries every four minutes: past the next cron time too, which does not start a round of
  // its own while one is being retried.
  for (int failed = 1; failed <= 4; ++failed) {
    SCOPED_TRACE(failed);
    AdvanceTo(due);
    const auto retry_at = WaitForFailures(s, failed);
    EXPECT_EQ(retry_at, due + 4min);
    due = retry_at;
  }
  EXPECT_EQ(s.rounds_succeeded(), 0);
}

TEST_F(DefragSchedulerTest, StopEndsAWaitTheClockWouldNeverEnd) {
  DefragScheduler s(Unreachable(), Schedule("@daily"), 1min, 1min, clock_);
  s.Start();
  ASSERT_TRUE(PollFor([&] { return s.next_round().has_value(); }));
  auto stopped = std::async(std::launch::async, [&] { s.Stop(); });
  ASSERT_EQ(stopped.wait_for(10s), std::future_status::ready) << "Stop() hangs in the wait";
  EXPECT_FALSE(s.next_round().has_value());
  // Started again, it schedules from the clock's time as before.
  s.Start();
  ASSERT_TRUE(PollFor([&] { return s.next_round().has_value(); }));
  EXPECT_EQ(*s.next_round(), *Schedule("@daily").Next(clock_.WallNow()) + 1min);
}

}  // namespace
}  // namespace etcdw::sidecar
