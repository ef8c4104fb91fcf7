// ClockTimer (src/peer_transport/clock_timer.h), the transport's timers on the injected clock:
// one wake-up on the system clock, as a plain steady_timer; nothing fires on a ManualClock until
// it is advanced; cancellation and a new deadline abort the wait in progress. And LogLimiter,
// whose interval is measured on the same clock.
#include "peer_transport/clock_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "etcdw/common/clock.h"
#include "peer_transport/observed_clock.h"
#include "peer_transport/transport_common.h"

namespace etcdw::peer_transport {
namespace {

using namespace std::chrono_literals;

// What became of one AsyncWait.
struct Outcome {
  std::atomic<int> runs{0};
  std::atomic<bool> aborted{false};
};

// Runs an io_context on a thread of its own until it runs out of work; stops it if the test ends
// first (a failed assertion), so that the thread can always be joined.
class IoThread {
 public:
  explicit IoThread(asio::io_context& io)
      : io_(io), thread_([this] {
          io_.run();
          done_ = true;
        }) {}
  ~IoThread() {
    io_.stop();
    thread_.join();
  }
  // True once io.run() has returned (the io_context ran out of work) within 20 s.
  bool Finished() {
    for (int i = 0; i < 20000 && !done_; ++i) std::this_thread::sleep_for(1ms);
    return done_;
  }

 private:
  asio::io_context& io_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

auto RecordInto(Outcome& o) {
  return [&o](const error_code& ec) {
    o.aborted = ec == asio::error::operation_aborted;
    ++o.runs;
  };
}

TEST(ClockTimerTest, OnTheSystemClockOneSleepLastsUntilTheDeadline) {
  ObservedClock clock(common::SystemClock::Instance());
  asio::io_context io;
  ClockTimer timer(io.get_executor(), &clock);
  Outcome o;
  const auto t0 = clock.Now();
  timer.ExpiresAfter(30ms);
  timer.AsyncWait(RecordInto(o));
  io.run();  // returns once the handler has run and nothing is left to wait for
  EXPECT_EQ(o.runs.load(), 1);
  EXPECT_FALSE(o.aborted.load());
  EXPECT_GE(clock.Now() - t0, 30ms);
  EXPECT_EQ(clock.Sleeps(), 1u) << "a timer on the system clock must wake up once";
}

TEST(ClockTimerTest, OnAManualClockNothingFiresUntilTheClockReachesTheDeadline) {
  ObservedClock clock;
  asio::io_context io;
  ClockTimer timer(io.get_executor(), &clock);
  Outcome o;
  const auto t0 = clock.Now();
  timer.ExpiresAfter(10s);
  timer.AsyncWait(RecordInto(o));
  IoThread runner(io);

  // The timer looks at the clock again and again, and sleeps on while the deadline is ahead.
  ASSERT_TRUE(clock.WaitForSleep(t0 + 10s, t0));
  const size_t sleeps = clock.Sleeps();
  clock.Advance(10s - 1ms);
  ASSERT_TRUE(clock.WaitForSleep(t0 + 10s, t0 + 10s - 1ms));
  EXPECT_GT(clock.Sleeps(), sleeps);
  EXPECT_EQ(o.runs.load(), 0) << "fired before the clock reached the deadline";

  clock.Advance(1ms);
  ASSERT_TRUE(runner.Finished());  // io.run() returns once the handler has run
  EXPECT_EQ(o.runs.load(), 1);
  EXPECT_FALSE(o.aborted.load());
}

TEST(ClockTimerTest, CancelAbortsTheWaitInProgress) {
  ObservedClock clock;
  asio::io_context io;
  ClockTimer timer(io.get_executor(), &clock);
  Outcome o;
  const auto t0 = clock.Now();
  timer.ExpiresAfter(1s);
  timer.AsyncWait(RecordInto(o));
  IoThread runner(io);
  ASSERT_TRUE(clock.WaitForSleep(t0 + 1s, t0));  // the wait is in progress
  asio::post(io, [&] { timer.Cancel(); });
  // Nothing is left to wait for: the wait ended with the cancellation.
  ASSERT_TRUE(runner.Finished());
  EXPECT_EQ(o.runs.load(), 1);
  EXPECT_TRUE(o.aborted.load());
}

TEST(ClockTimerTest, ANewDeadlineAbortsTheWaitInProgressAndIsWaitedFor) {
  ObservedClock clock;
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  ClockTimer timer(io.get_executor(), &clock);
  Outcome first, second;
  const auto t0 = clock.Now();
  timer.ExpiresAfter(1s);
  timer.AsyncWait(RecordInto(first));
  IoThread runner(io);
  ASSERT_TRUE(clock.WaitForSleep(t0 + 1s, t0));
  asio::post(io, [&] {
    timer.ExpiresAt(t0 + 2s);
    timer.AsyncWait(RecordInto(second));
  });
  ASSERT_TRUE(clock.WaitForSleep(t0 + 2s, t0));

  // The old deadline passes without effect; the new one fires. (The old wait's abort was queued
  // before the new wait slept, so it has run by the time the new wait looks at the clock again.)
  clock.Advance(1s);
  ASSERT_TRUE(clock.WaitForSleep(t0 + 2s, t0 + 1s));
  EXPECT_EQ(first.runs.load(), 1);
  EXPECT_TRUE(first.aborted.load());
  EXPECT_EQ(second.runs.load(), 0);
  clock.Advance(1s);
  guard.reset();
  ASSERT_TRUE(runner.Finished());
  EXPECT_EQ(first.runs.load(), 1);
  EXPECT_EQ(second.runs.load(), 1);
  EXPECT_FALSE(second.aborted.load());
}

TEST(ClockTimerTest, APassedDeadlineFiresWithoutWaitingForTheClock) {
  common::ManualClock manual;
  asio::io_context io;
  ClockTimer timer(io.get_executor(), &manual);
  Outcome o;
  timer.ExpiresAfter(0ms);
  timer.AsyncWait(RecordInto(o));
  io.run();
  EXPECT_EQ(o.runs.load(), 1);
  EXPECT_FALSE(o.aborted.load());
}

TEST(LogLimiterTest, OneLinePerKeyPerIntervalOfTheClock) {
  common::ManualClock clock;
  LogLimiter limiter(&clock);
  uint64_t suppressed = 99;
  ASSERT_TRUE(limiter.Allow("a", suppressed));
  EXPECT_EQ(suppressed, 0u);
  EXPECT_FALSE(limiter.Allow("a", suppressed));
  EXPECT_FALSE(limiter.Allow("a", suppressed));
  EXPECT_TRUE(limiter.Allow("b", suppressed)) << "keys are limited separately";
  clock.Advance(kLogInterval - 1ms);
  EXPECT_FALSE(limiter.Allow("a", suppressed));
  clock.Advance(1ms);
  ASSERT_TRUE(limiter.Allow("a", suppressed));
  EXPECT_EQ(suppressed, 3u) << "the lines held back since the last one";
  EXPECT_FALSE(limiter.Allow("a", suppressed));
}

}  // namespace
}  // namespace etcdw::peer_transport
