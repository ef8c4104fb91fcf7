// ObservedClock: a clock for peer transport tests that reads time from another clock (its own
// common::ManualClock, which the test advances, or one it is given) and records every sleep a
// timer asks it for (RealWaitUntil). A timer that asks to sleep again on the way to its deadline
// has looked at the clock and decided not to fire yet, so a test can prove that a timeout had its
// chance and did not happen, instead of sleeping and hoping.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "etcdw/common/clock.h"

namespace etcdw::peer_transport {

class ObservedClock final : public common::Clock {
 public:
  // Time stands still until Advance() moves it.
  ObservedClock() : manual_(std::make_unique<common::ManualClock>()), base_(*manual_) {}
  // Reads `base`, which must outlive this clock (Advance() is not available).
  explicit ObservedClock(const common::Clock& base) : base_(base) {}

  void Advance(std::chrono::nanoseconds d) { manual_->Advance(d); }

  TimePoint Now() const override { return base_.Now(); }
  WallTime WallNow() const override { return base_.WallNow(); }
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 TimePoint deadline, const std::function<bool()>& pred) const override {
    return base_.WaitUntil(lock, cv, deadline, pred);
  }
  bool WaitUntilWall(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                     WallTime deadline, const std::function<bool()>& pred) const override {
    return base_.WaitUntilWall(lock, cv, deadline, pred);
  }
  // Records, for a deadline still ahead, that a timer looked at the clock and goes back to sleep.
  Duration RealWaitUntil(TimePoint deadline) const override {
    const TimePoint now = base_.Now();
    if (now < deadline) {
      std::lock_guard<std::mutex> lock(mu_);
      ++sleeps_;
      TimePoint& seen = last_seen_[deadline];
      seen = std::max(seen, now);
      cv_.notify_all();
    }
    return base_.RealWaitUntil(deadline);
  }

  // How many sleeps timers have asked for, before their deadlines.
  size_t Sleeps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sleeps_;
  }

  // Waits (up to `timeout` of real time) until a timer due at a time in [first, last] has read
  // the clock at `seen` or later and gone back to sleep: such a timer exists, and it had not fired
  // when the clock said `seen`. False when that does not happen in time.
  bool WaitForSleep(TimePoint first, TimePoint last, TimePoint seen,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      for (auto it = last_seen_.lower_bound(first); it != last_seen_.end() && it->first <= last;
           ++it) {
        if (it->second >= seen) return true;
      }
      return false;
    });
  }
  // The same for a timer due exactly at `due`.
  bool WaitForSleep(TimePoint due, TimePoint seen,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
    return WaitForSleep(due, due, seen, timeout);
  }

  // Whether a timer due exactly at `due` ever slept (was armed before its deadline).
  bool SleptFor(TimePoint due) const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_seen_.count(due) > 0;
  }

 private:
  const std::unique_ptr<common::ManualClock> manual_;  // null when reading another clock
  const common::Clock& base_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable size_t sleeps_ = 0;                         // guarded by mu_
  mutable std::map<TimePoint, TimePoint> last_seen_;  // deadline -> latest Now(); guarded by mu_
};

}  // namespace etcdw::peer_transport
