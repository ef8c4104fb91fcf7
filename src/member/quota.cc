#include "etcdw/member/quota.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <utility>

#include "etcdw/common/config.h"
#include "etcdw/common/logging.h"

namespace etcdw::member {

Quota::Quota(const storage::Engine& engine, int64_t quota_bytes, std::string dir,
             uint64_t disk_reserve)
    : engine_(engine),
      limit_(quota_bytes == 0 ? common::EtcdConfig::kDefaultQuotaBytes : quota_bytes),
      dir_(std::move(dir)),
      disk_reserve_(disk_reserve) {}

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
    struct statvfs fs {};
    if (!dir_.empty() && statvfs(dir_.c_str(), &fs) == 0) {
      disk_free_.store(static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize, std::memory_order_relaxed);
    }
    refreshed_ns_.store(now, std::memory_order_relaxed);
  }
  return size_.load(std::memory_order_relaxed);
}

bool Quota::Available(int64_t cost) {
  if (cost == 0) return true;
  const int64_t size = Size();
  const uint64_t free = DiskFree();
  const bool disk_low = free < disk_reserve_ + static_cast<uint64_t>(cost);
  if (disk_low != disk_low_.exchange(disk_low, std::memory_order_relaxed)) {
    if (disk_low) {
      log::Warn("the data directory's disk is nearly full: writes are refused as over the quota",
                {log::F("free-bytes", free), log::F("reserve-bytes", disk_reserve_)});
    } else {
      log::Info("the data directory's disk has room again", {log::F("free-bytes", free)});
    }
  }
  if (disk_low) return false;
  return limit_ < 0 || size + cost < limit_;
}

}  // namespace etcdw::member
