// The deadline of the client call a thread is serving (etcd's request context): the client API
// sets it around the call of a unary method whose client sent grpc-timeout, and the member
// reads it where work waits (a proposal waiting for a leader is dropped after it).
#pragma once

#include <chrono>
#include <optional>

namespace etcdw::member {

class CallDeadline {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // For the lifetime of the scope, Current() on this thread is `deadline`; scopes nest.
  explicit CallDeadline(std::optional<TimePoint> deadline) : outer_(current_) {
    current_ = deadline;
  }
  ~CallDeadline() { current_ = outer_; }
  CallDeadline(const CallDeadline&) = delete;
  CallDeadline& operator=(const CallDeadline&) = delete;

  // The deadline of the call this thread serves now; nullopt outside a call or without one.
  static std::optional<TimePoint> Current() { return current_; }

 private:
  std::optional<TimePoint> outer_;
  static inline thread_local std::optional<TimePoint> current_;
};

}  // namespace etcdw::member
