// Injected time. Everything that expires or ticks (leases, progress notifications, periodic
// compaction) reads a Clock so tests drive it with ManualClock instead of sleeping.
#pragma once

#include <atomic>
#include <chrono>

namespace etcdw::common {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  static SystemClock& Instance() {
    static SystemClock c;
    return c;
  }
};

// A clock that only moves when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  ManualClock() : now_ns_(1'000'000'000) {}
  TimePoint Now() const override {
    return TimePoint(std::chrono::nanoseconds(now_ns_.load(std::memory_order_acquire)));
  }
  void Advance(std::chrono::nanoseconds d) {
    now_ns_.fetch_add(d.count(), std::memory_order_acq_rel);
  }

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace etcdw::common
