// Cancels the streams that asked for a leader ("hasleader: true", etcd's WithRequireLeader)
// once their member has been without one for too long, as etcd's stream interceptor does
// (monitorLeader): a stream refused at its start when no leader is known (client API) is also
// ended later, when the member loses its leader while the stream is open.
#pragma once

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include "etcdw/common/clock.h"

namespace etcdw::member {

class NoLeaderMonitor {
 public:
  using Id = uint64_t;

  // Streams are cancelled once the member has had no leader for `cancel_after` without a break.
  explicit NoLeaderMonitor(common::Clock::Duration cancel_after) : cancel_after_(cancel_after) {}

  // Registers a stream: `cancel` is called once, on the thread that calls Observe, when the
  // member has been without a leader for the period; it must not block (it only hands the end
  // to the stream's own thread) and must not call Register or Unregister. Returns the id for
  // Unregister.
  Id Register(std::function<void()> cancel);
  // The stream ended: it is not cancelled any more. Unknown (already cancelled) ids are ignored.
  void Unregister(Id id);

  // The member's leader (0: none) at `now`. Cancels every registered stream when no leader has
  // been seen since `now - cancel_after` (by this call or earlier ones); returns how many.
  size_t Observe(common::Clock::TimePoint now, uint64_t leader);

  size_t Registered() const;
  common::Clock::Duration cancel_after() const { return cancel_after_; }

 private:
  const common::Clock::Duration cancel_after_;
  mutable std::mutex mu_;
  Id next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<Id, std::function<void()>> streams_ ABSL_GUARDED_BY(mu_);
  // When the member was first seen without a leader in the current leaderless spell.
  std::optional<common::Clock::TimePoint> no_leader_since_ ABSL_GUARDED_BY(mu_);
};

}  // namespace etcdw::member
