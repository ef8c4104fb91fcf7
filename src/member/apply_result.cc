#include "etcdw/member/apply_result.h"

#include <vector>

namespace etcdw::member {

void WaitRegistry::Register(uint64_t id, ApplyCallback cb, common::Clock::TimePoint deadline) {
  std::lock_guard lock(mu_);
  waiters_[id] = Waiter{std::move(cb), deadline};
}

bool WaitRegistry::Trigger(uint64_t id, ApplyResult result) {
  ApplyCallback cb;
  {
    std::lock_guard lock(mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return false;
    cb = std::move(it->second.cb);
    waiters_.erase(it);
  }
  cb(std::move(result));
  return true;
}

void WaitRegistry::FailAll(const Status& status) {
  std::unordered_map<uint64_t, Waiter> all;
  {
    std::lock_guard lock(mu_);
    all.swap(waiters_);
  }
  for (auto& [id, w] : all) w.cb(ApplyResult{status, nullptr, 0});
}

size_t WaitRegistry::ExpireBefore(common::Clock::TimePoint now, const Status& status) {
  std::vector<ApplyCallback> expired;
  {
    std::lock_guard lock(mu_);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline < now) {
        expired.push_back(std::move(it->second.cb));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& cb : expired) cb(ApplyResult{status, nullptr, 0});
  return expired.size();
}

size_t WaitRegistry::Size() const {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

}  // namespace etcdw::member
