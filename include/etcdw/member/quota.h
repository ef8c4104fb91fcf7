// The backend space quota (etcd's quota-backend-bytes): requests that would grow the store are
// refused once its size plus the request's estimated cost reaches the quota, and the NOSPACE
// alarm is raised. Cost estimates are etcd's: key + value + 256 bytes per put, 64 per lease.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/storage/engine.h"

namespace etcdw::member {

class Quota {
 public:
  // quota_bytes: the configured value (0: etcd's 2 GiB default; negative: unlimited).
  Quota(const storage::Engine& engine, int64_t quota_bytes);

  static int64_t Cost(const etcdserverpb::PutRequest& r);
  static int64_t Cost(const etcdserverpb::TxnRequest& r);  // the costlier branch's top-level puts
  static int64_t Cost(const etcdserverpb::LeaseGrantRequest&) { return 64; }

  bool Available(int64_t cost);
  // The store size, refreshed from the engine at most every 100 ms.
  int64_t Size();
  // Makes the next Size() read the engine (after the store shrank: defragmentation, or before
  // writes resume when the NOSPACE alarm is disarmed).
  void Refresh() { refreshed_ns_.store(0, std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }

 private:
  const storage::Engine& engine_;
  int64_t limit_;  // < 0: unlimited
  std::atomic<int64_t> size_{0};
  std::atomic<int64_t> refreshed_ns_{0};
};

}  // namespace etcdw::member
