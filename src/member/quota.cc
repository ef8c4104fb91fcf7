#include "etcdw/member/quota.h"

#include <algorithm>

#include "etcdw/common/config.h"

namespace etcdw::member {

Quota::Quota(const storage::Engine& engine, int64_t quota_bytes)
    : engine_(engine),
      limit_(quota_bytes == 0 ? common::EtcdConfig::kDefaultQuotaBytes : quota_bytes) {}

int64_t Quota::Cost(const etcdserverpb::PutRequest& r) {
  return 256 + static_cast<int64_t>(r.key().size() + r.value().size());
}

int64_t Quota::Cost(const etcdserverpb::TxnRequest& r) {
  auto branch = [](const auto& ops) {
    int64_t c = 0;
    for (const auto& op : ops) {
      if (op.has_request_put()) c += Cost(op.request_put());
    }
    return c;
  };
  return std::max(branch(r.success()), branch(r.failure()));
}

int64_t Quota::Size() {
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count();
  if (now - refreshed_ns_.load(std::memory_order_relaxed) > 100'000'000) {
    size_.store(static_cast<int64_t>(engine_.SizeOnDisk()), std::memory_order_relaxed);
    refreshed_ns_.store(now, std::memory_order_relaxed);
  }
  return size_.load(std::memory_order_relaxed);
}

bool Quota::Available(int64_t cost) {
  if (cost == 0 || limit_ < 0) return true;
  return Size() + cost < limit_;
}

}  // namespace etcdw::member
