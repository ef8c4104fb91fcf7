#include "etcdw/member/lessor.h"

#include "etcdw/common/etcd_errors.h"

namespace etcdw::member {

namespace {
// Non-primary members never expire leases themselves.
const common::Clock::TimePoint kForever = common::Clock::TimePoint::max();
}  // namespace

void Lessor::SetExpiry(int64_t id, Entry& e, TimePoint t) {
  by_expiry_.erase({e.expiry, id});
  e.expiry = t;
  by_expiry_.insert({t, id});
}

void Lessor::Promote(const std::vector<mvcc::LeaseInfo>& leases, std::chrono::milliseconds extend) {
  std::lock_guard lock(mu_);
  primary_ = true;
  TimePoint now = clock_.Now();
  for (const auto& l : leases) {
    Entry& e = leases_[l.id];
    e.ttl = l.ttl;
    e.revoking = false;
    // A checkpointed remaining TTL resumes where it was; otherwise the full TTL.
    int64_t secs = l.remaining_ttl > 0 ? l.remaining_ttl : l.ttl;
    SetExpiry(l.id, e, now + std::chrono::seconds(secs) + extend);
  }
}

void Lessor::Demote() {
  std::lock_guard lock(mu_);
  primary_ = false;
  for (auto& [id, e] : leases_) {
    SetExpiry(id, e, kForever);
    e.revoking = false;
  }
}

void Lessor::Reset(const std::vector<mvcc::LeaseInfo>& leases) {
  std::lock_guard lock(mu_);
  leases_.clear();
  by_expiry_.clear();
  TimePoint now = clock_.Now();
  for (const auto& l : leases) {
    Entry& e = leases_[l.id];
    e.ttl = l.ttl;
    SetExpiry(l.id, e, primary_ ? now + std::chrono::seconds(l.ttl) : kForever);
  }
}

bool Lessor::primary() const {
  std::lock_guard lock(mu_);
  return primary_;
}

void Lessor::OnGranted(int64_t id, int64_t ttl) {
  std::lock_guard lock(mu_);
  Entry& e = leases_[id];
  e.ttl = ttl;
  e.revoking = false;
  SetExpiry(id, e, primary_ ? clock_.Now() + std::chrono::seconds(ttl) : kForever);
}

void Lessor::OnRevoked(int64_t id) {
  std::lock_guard lock(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  by_expiry_.erase({it->second.expiry, id});
  leases_.erase(it);
}

Result<int64_t> Lessor::Renew(int64_t id) {
  std::lock_guard lock(mu_);
  if (!primary_) return errors::NotLeader();
  auto it = leases_.find(id);
  if (it == leases_.end()) return errors::LeaseNotFound();
  Entry& e = it->second;
  TimePoint now = clock_.Now();
  // An expired lease is being (or about to be) revoked: renewing it must not revive it.
  if (e.revoking || e.expiry <= now) return errors::LeaseNotFound();
  SetExpiry(id, e, now + std::chrono::seconds(e.ttl));
  return e.ttl;
}

std::optional<int64_t> Lessor::RemainingSeconds(int64_t id) const {
  std::lock_guard lock(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  if (it->second.expiry == kForever) return it->second.ttl;
  auto left = it->second.expiry - clock_.Now();
  if (left.count() < 0) return 0;
  return std::chrono::duration_cast<std::chrono::seconds>(left).count();
}

std::vector<int64_t> Lessor::IdsByExpiry() const {
  std::lock_guard lock(mu_);
  std::vector<int64_t> out;
  out.reserve(by_expiry_.size());
  for (const auto& [t, id] : by_expiry_) out.push_back(id);
  return out;
}

std::vector<int64_t> Lessor::TakeExpired(size_t max) {
  std::lock_guard lock(mu_);
  std::vector<int64_t> out;
  if (!primary_) return out;
  TimePoint now = clock_.Now();
  for (const auto& [t, id] : by_expiry_) {
    if (t > now || out.size() >= max) break;
    Entry& e = leases_[id];
    if (e.revoking) continue;
    e.revoking = true;
    out.push_back(id);
  }
  return out;
}

void Lessor::Requeue(int64_t id) {
  std::lock_guard lock(mu_);
  auto it = leases_.find(id);
  if (it != leases_.end()) it->second.revoking = false;
}

}  // namespace etcdw::member
