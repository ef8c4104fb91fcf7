// Lease expiry. The replicated lease records live in the MVCC store; this class keeps, on the
// member that runs expiry (the leader), the time at which each lease expires, renews leases on
// keepalive, and hands out expired leases for revocation. Time comes from an injected Clock.
//
// On promotion (start-up of a single member, or becoming leader) every lease is refreshed to
// its full TTL plus `extend`, as etcd does, so leases survive restarts and leader changes.
//
// Thread-safe: the apply thread (grants, revocations), the client API's threads (renewals,
// TTLs), the ticker (expiry) and the node's callbacks (promotion) call it concurrently.
#pragma once

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"
#include "etcdw/mvcc/lease_table.h"

namespace etcdw::member {

class Lessor {
 public:
  explicit Lessor(const common::Clock& clock) : clock_(clock) {}

  // Becomes the member running expiry: every known lease expires after ttl + extend from now.
  void Promote(const std::vector<mvcc::LeaseInfo>& leases, std::chrono::milliseconds extend);
  // Stops running expiry (a follower keeps leases forever until the leader revokes them).
  void Demote();
  // Replaces the known leases (after the state was replaced by a snapshot).
  void Reset(const std::vector<mvcc::LeaseInfo>& leases);
  bool primary() const;

  // Applied grant / revoke (called by the applier after the batch is committed).
  void OnGranted(int64_t id, int64_t ttl_seconds);
  void OnRevoked(int64_t id);

  // Keepalive: resets the expiry to now + TTL. NotFound for an unknown or already expired lease.
  Result<int64_t> Renew(int64_t id);
  // Remaining time in whole seconds (truncated); nullopt when unknown.
  std::optional<int64_t> RemainingSeconds(int64_t id) const;
  // IDs ordered by expiry (soonest first), as etcd lists leases.
  std::vector<int64_t> IdsByExpiry() const;

  // Expired leases not yet handed out, soonest first (at most `max`). Each is returned once
  // until Requeue() or OnRevoked().
  std::vector<int64_t> TakeExpired(size_t max);
  // A revocation attempt failed: the lease may be handed out again.
  void Requeue(int64_t id);

 private:
  using TimePoint = common::Clock::TimePoint;
  struct Entry {
    int64_t ttl = 0;
    TimePoint expiry;
    bool revoking = false;
  };
  void SetExpiry(int64_t id, Entry& e, TimePoint t);

  const common::Clock& clock_;
  mutable std::mutex mu_;
  bool primary_ ABSL_GUARDED_BY(mu_) = false;
  std::unordered_map<int64_t, Entry> leases_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<TimePoint, int64_t>> by_expiry_ ABSL_GUARDED_BY(mu_);
};

}  // namespace etcdw::member
