// The outcome of one proposed request, delivered to whoever waits for it.
#pragma once

#include <absl/base/thread_annotations.h>
#include <google/protobuf/message.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"

namespace etcdw::member {

struct ApplyResult {
  Status status;
  std::shared_ptr<google::protobuf::Message> response;  // set when status is OK
  // A compaction that must physically finish before a physical Compact returns.
  int64_t compaction = 0;
};

using ApplyCallback = std::function<void(ApplyResult)>;

// Proposals waiting for their entry to be applied, by request ID. Thread-safe. Each callback
// runs on the thread whose Trigger, FailAll or ExpireBefore delivers its result, without the
// registry's lock held.
class WaitRegistry {
 public:
  // `deadline`: when the request is given up (its entry may have been lost with a leader).
  void Register(uint64_t id, ApplyCallback cb,
                common::Clock::TimePoint deadline = common::Clock::TimePoint::max());
  // Delivers the result to the waiter (if this member proposed it). Returns whether one waited.
  bool Trigger(uint64_t id, ApplyResult result);
  // Fails every waiter (shutdown).
  void FailAll(const Status& status);
  // Fails the waiters whose deadline is before `now`; returns how many.
  size_t ExpireBefore(common::Clock::TimePoint now, const Status& status);
  size_t Size() const;

 private:
  mutable std::mutex mu_;
  struct Waiter {
    ApplyCallback cb;
    common::Clock::TimePoint deadline;
  };
  std::unordered_map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace etcdw::member
