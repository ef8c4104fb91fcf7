// The backend space quota (etcd's quota-backend-bytes): requests that would grow the store are
// refused once its size plus the request's estimated cost reaches the quota, and the NOSPACE
// alarm is raised. Cost estimates are etcd's: key + value + 256 bytes per put, 64 per lease.
// The disk counts too (etcd has no such check and fails when a write finds the disk full): a
// request is refused the same way once the data directory's filesystem would keep less than
// `disk_reserve` bytes free, room for what the member writes besides requests (Raft log
// segments, memtable flushes, compactions, the alarm itself).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/storage/engine.h"

namespace etcdw::member {

class Quota {
 public:
  static constexpr uint64_t kDiskReserveBytes = uint64_t{128} << 20;

  // quota_bytes: the configured value (0: etcd's 2 GiB default; negative: unlimited). `dir`: a
  // directory on the data directory's filesystem (empty: the disk is not checked).
  Quota(const storage::Engine& engine, int64_t quota_bytes, std::string dir = "",
        uint64_t disk_reserve = kDiskReserveBytes);

  static int64_t Cost(const etcdserverpb::PutRequest& r);
  static int64_t Cost(const etcdserverpb::TxnRequest& r);  // the costlier branch's top-level puts
  static int64_t Cost(const etcdserverpb::LeaseGrantRequest&) { return 64; }

  bool Available(int64_t cost);
  // The store size, refreshed from the engine at most every 100 ms (with the disk's free space).
  int64_t Size();
  // Bytes free on the data directory's filesystem for this process, as last refreshed.
  uint64_t DiskFree() const { return disk_free_.load(std::memory_order_relaxed); }
  // Makes the next Size() read the engine (after the store shrank: defragmentation, or before
  // writes resume when the NOSPACE alarm is disarmed).
  void Refresh() { refreshed_ns_.store(0, std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }

 private:
  const storage::Engine& engine_;
  int64_t limit_;  // < 0: unlimited
  const std::string dir_;
  const uint64_t disk_reserve_;
  std::atomic<uint64_t> disk_free_{UINT64_MAX};  // unknown until the first refresh
  std::atomic<bool> disk_low_{false};            // logged once per episode
  std::atomic<int64_t> size_{0};
  std::atomic<int64_t> refreshed_ns_{0};
};

}  // namespace etcdw::member
