// Injected time. Every component that measures time or waits for it (lease expiry, Raft ticks,
// progress notifications, periodic compaction, the peer transport's deadlines and backoff, the
// sidecar's snapshot and defragmentation schedules, the wrapper's readiness checks) reads a
// Clock and waits through it, so that tests drive time with ManualClock instead of sleeping.
//
// Two readings: Now() (monotonic, for durations and deadlines) and WallNow() (calendar time, for
// schedules and names that carry a date). Waiting: WaitUntil/WaitUntilWall on a condition
// variable, or, for waiters that are not condition variables (Asio timers), RealWaitUntil: the
// real time to sleep before looking at the clock again.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace etcdw::common {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;
  using WallTime = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  virtual WallTime WallNow() const = 0;

  // Waits on `cv` (`lock` holding its mutex) until pred() holds or Now() reaches `deadline`, and
  // returns pred(). pred() is evaluated with the lock held; spurious wake-ups are absorbed.
  virtual bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         TimePoint deadline, const std::function<bool()>& pred) const = 0;
  // The same, until WallNow() reaches `deadline` (a calendar time: a jump of the system clock
  // moves it, as it moves a cron schedule).
  virtual bool WaitUntilWall(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                             WallTime deadline, const std::function<bool()>& pred) const = 0;
  // For timers that sleep in real time: how long to sleep before looking at Now() again on the
  // way to `deadline` (zero once it has passed). A waiter woken early re-arms for the rest.
  virtual Duration RealWaitUntil(TimePoint deadline) const = 0;
};

// Real time: std::chrono's steady and system clocks.
class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 TimePoint deadline, const std::function<bool()>& pred) const override {
    return cv.wait_until(lock, deadline, pred);
  }
  bool WaitUntilWall(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                     WallTime deadline, const std::function<bool()>& pred) const override {
    return cv.wait_until(lock, deadline, pred);
  }
  Duration RealWaitUntil(TimePoint deadline) const override {
    return std::max(deadline - Now(), Duration::zero());
  }
  static SystemClock& Instance() {
    static SystemClock c;
    return c;
  }
};

// A clock that only moves when told to (Advance moves both readings by the same amount). Its
// waiters look at it every kPollPeriod of real time, so a wait ends at most that long after the
// Advance that reaches its deadline. Looks() counts those looks: a test that must show that a
// waiter saw the time it advanced to (and did not act) waits until Looks() has grown.
class ManualClock final : public Clock {
 public:
  static constexpr std::chrono::milliseconds kPollPeriod{1};

  // Starts at an arbitrary steady time and at wall time `wall` (default 2026-01-01T00:00:00Z).
  explicit ManualClock(WallTime wall = WallTime(std::chrono::seconds(1767225600)))
      : now_ns_(1'000'000'000),
        wall_ns_(
            std::chrono::duration_cast<std::chrono::nanoseconds>(wall.time_since_epoch()).count()) {
  }

  TimePoint Now() const override {
    return TimePoint(std::chrono::nanoseconds(now_ns_.load(std::memory_order_acquire)));
  }
  WallTime WallNow() const override {
    return WallTime(std::chrono::duration_cast<WallTime::duration>(
        std::chrono::nanoseconds(wall_ns_.load(std::memory_order_acquire))));
  }
  void Advance(std::chrono::nanoseconds d) {
    wall_ns_.fetch_add(d.count(), std::memory_order_acq_rel);
    now_ns_.fetch_add(d.count(), std::memory_order_acq_rel);
  }
  // How many times a waiter has compared this clock with its deadline.
  uint64_t Looks() const { return looks_.load(std::memory_order_acquire); }

  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 TimePoint deadline, const std::function<bool()>& pred) const override {
    while (!pred()) {
      if (Looked(Now() >= deadline)) return false;
      cv.wait_for(lock, kPollPeriod);
    }
    return true;
  }
  bool WaitUntilWall(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                     WallTime deadline, const std::function<bool()>& pred) const override {
    while (!pred()) {
      if (Looked(WallNow() >= deadline)) return false;
      cv.wait_for(lock, kPollPeriod);
    }
    return true;
  }
  Duration RealWaitUntil(TimePoint deadline) const override {
    return Looked(deadline <= Now()) ? Duration::zero() : Duration(kPollPeriod);
  }

 private:
  bool Looked(bool reached) const {
    looks_.fetch_add(1, std::memory_order_acq_rel);
    return reached;
  }

  std::atomic<int64_t> now_ns_;
  std::atomic<int64_t> wall_ns_;
  mutable std::atomic<uint64_t> looks_{0};
};

}  // namespace etcdw::common
