#include "etcdw/server/apply_result.h"

#include <vector>

namespace etcdw::server {

void WaitRegistry::Register(uint64_t id, ApplyCallback cb) {
  std::lock_guard lock(mu_);
  waiters_[id] = std::move(cb);
}

bool WaitRegistry::Trigger(uint64_t id, ApplyResult result) {
  ApplyCallback cb;
  {
    std::lock_guard lock(mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return false;
    cb = std::move(it->second);
    waiters_.erase(it);
  }
  cb(std::move(result));
  return true;
}

void WaitRegistry::FailAll(const Status& status) {
  std::unordered_map<uint64_t, ApplyCallback> all;
  {
    std::lock_guard lock(mu_);
    all.swap(waiters_);
  }
  for (auto& [id, cb] : all) cb(ApplyResult{status, nullptr, 0});
}

size_t WaitRegistry::Size() const {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

}  // namespace etcdw::server
