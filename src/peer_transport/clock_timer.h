// ClockTimer: a deadline on the transport's clock (PeerTransportOptions::clock), waited for with an
// Asio timer. The Asio timer sleeps for the real time the clock asks (Clock::RealWaitUntil), then
// the clock is read again: the handler runs once Now() has reached the deadline, otherwise the
// timer sleeps again for what the clock asks. With SystemClock the first sleep lasts the whole
// remaining time, so the handler runs after one wake-up, as with a plain steady_timer; with
// ManualClock the timer looks every millisecond until a test advances the clock past it.
//
// Used as a steady_timer is, on its executor (a strand) only, one wait at a time: ExpiresAt and
// ExpiresAfter set the deadline and cancel a wait in progress; Cancel completes a wait in
// progress with operation_aborted. As with steady_timer, a handler that was already due when
// Cancel or a new deadline came still runs with success. The handler must keep the ClockTimer's
// owner alive (the Asio handler refers to the ClockTimer).
#pragma once

#include <cstdint>
#include <utility>

#include "etcdw/common/clock.h"
#include "stream.h"

namespace etcdw::peer_transport {

class ClockTimer {
 public:
  ClockTimer(const Executor& ex, const common::Clock* clock) : clock_(clock), timer_(ex) {}
  ClockTimer(const ClockTimer&) = delete;
  ClockTimer& operator=(const ClockTimer&) = delete;

  void ExpiresAt(common::Clock::TimePoint deadline) {
    deadline_ = deadline;
    Cancel();
  }
  void ExpiresAfter(common::Clock::Duration d) { ExpiresAt(clock_->Now() + d); }
  void Cancel() {
    ++generation_;
    cancelled_at_ = clock_->Now();
    timer_.cancel();
  }
  // `handler(const error_code&)` runs once: with success when the clock reached the deadline,
  // with operation_aborted when the wait was cancelled.
  template <typename Handler>
  void AsyncWait(Handler&& handler) {
    Sleep(generation_, deadline_, std::forward<Handler>(handler));
  }

 private:
  template <typename Handler>
  void Sleep(uint64_t generation, common::Clock::TimePoint deadline, Handler&& handler) {
    timer_.expires_after(clock_->RealWaitUntil(deadline));
    timer_.async_wait([this, generation, deadline, handler = std::forward<Handler>(handler)](
                          const boost::system::error_code& ec) mutable {
      if (ec) return handler(ec);
      // Cancelled (or given a new deadline) since this wait began: it was due only if the
      // clock had reached the deadline by the cancellation. The clock may have moved on since
      // (the handler was queued before the cancellation and runs after it).
      if (generation != generation_) {
        if (deadline <= cancelled_at_) return handler(ec);
        return handler(boost::system::error_code(boost::asio::error::operation_aborted));
      }
      if (clock_->Now() >= deadline) return handler(ec);
      // Woken before the deadline: sleep again.
      Sleep(generation, deadline, std::move(handler));
    });
  }

  const common::Clock* const clock_;
  boost::asio::steady_timer timer_;
  common::Clock::TimePoint deadline_{};
  uint64_t generation_ = 0;                  // bumped by every cancellation and new deadline
  common::Clock::TimePoint cancelled_at_{};  // Now() at the latest cancellation
};

}  // namespace etcdw::peer_transport
