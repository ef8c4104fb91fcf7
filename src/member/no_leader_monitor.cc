#include "etcdw/member/no_leader_monitor.h"

#include <utility>
#include <vector>

namespace etcdw::member {

NoLeaderMonitor::Id NoLeaderMonitor::Register(std::function<void()> cancel) {
  std::lock_guard lock(mu_);
  const Id id = ++next_id_;
  streams_.emplace(id, std::move(cancel));
  return id;
}

void NoLeaderMonitor::Unregister(Id id) {
  std::lock_guard lock(mu_);
  streams_.erase(id);
}

size_t NoLeaderMonitor::Observe(common::Clock::TimePoint now, uint64_t leader) {
  std::map<Id, std::function<void()>> cancelled;
  {
    std::lock_guard lock(mu_);
    if (leader != 0) {
      no_leader_since_.reset();
      return 0;
    }
    if (!no_leader_since_) no_leader_since_ = now;
    if (now - *no_leader_since_ < cancel_after_) return 0;
    // As etcd, every stream registered is cancelled, and so are those that register later while
    // the member is still without a leader (the client API refuses new ones at their start).
    cancelled.swap(streams_);
  }
  // Outside the lock: a stream that ends concurrently may unregister meanwhile.
  for (auto& [id, cancel] : cancelled) cancel();
  return cancelled.size();
}

size_t NoLeaderMonitor::Registered() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

}  // namespace etcdw::member
