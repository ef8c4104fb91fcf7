#include "etcdw/member/auto_compactor.h"

#include "etcdw/common/config.h"

namespace etcdw::member {

Result<AutoCompactor> AutoCompactor::Create(const std::string& mode, const std::string& retention,
                                            TimePoint now) {
  AutoCompactor c;
  c.last_success_ = now;
  if (mode == "revision") {
    int64_t n = std::stoll(retention);
    if (n <= 0) return c;
    c.enabled_ = true;
    c.periodic_ = false;
    c.retention_revs_ = n;
    c.tick_ = std::chrono::minutes(5);
    return c;
  }
  ETCDW_ASSIGN_OR_RETURN(auto period, common::ParseDuration(retention, std::chrono::hours(1)));
  if (period.count() <= 0) return c;
  c.enabled_ = true;
  c.period_ = period;
  c.base_ = period;
  auto interval = std::min<std::chrono::milliseconds>(period, std::chrono::hours(1));
  c.tick_ = std::max<std::chrono::milliseconds>(interval / 10, std::chrono::milliseconds(1));
  c.max_samples_ = static_cast<size_t>(period / c.tick_) + 1;
  return c;
}

std::optional<int64_t> AutoCompactor::Tick(TimePoint now, int64_t current_rev) {
  if (!enabled_) return std::nullopt;
  if (!periodic_) {
    int64_t rev = current_rev - retention_revs_;
    if (rev <= 0 || rev == last_compacted_) return std::nullopt;
    pending_ = rev;
    return rev;
  }
  samples_.push_back(current_rev);
  while (samples_.size() > max_samples_) samples_.pop_front();
  if (now - last_success_ < base_) return std::nullopt;
  base_ = std::min<std::chrono::milliseconds>(period_, std::chrono::hours(1));
  pending_ = samples_.front();
  return pending_;
}

void AutoCompactor::Done(bool success, TimePoint now) {
  if (!success) return;
  last_compacted_ = pending_;
  last_success_ = now;
  if (periodic_ && !samples_.empty()) samples_.pop_front();
}

}  // namespace etcdw::member
