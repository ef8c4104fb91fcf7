#include "sim/sim_network.h"

#include <algorithm>

namespace etcdw::sim {

uint64_t SimNetwork::Delay() {
  int lo = std::max(1, faults_.min_delay);
  int hi = std::max(lo, faults_.max_delay);
  uint64_t d = static_cast<uint64_t>(std::uniform_int_distribution<int>(lo, hi)(rng_));
  if (faults_.slow_max > 0 && Chance(faults_.slow)) {
    d += static_cast<uint64_t>(std::uniform_int_distribution<int>(1, faults_.slow_max)(rng_));
  }
  return d;
}

bool SimNetwork::Send(uint64_t now, const raftpb::Message& m, const std::string& attachment) {
  ++stats_.sent;
  if (Chance(faults_.drop)) {
    ++stats_.dropped;
    return false;
  }
  int copies = Chance(faults_.duplicate) ? 2 : 1;
  if (copies == 2) ++stats_.duplicated;
  for (int i = 0; i < copies; ++i) {
    uint64_t at = now + Delay();
    queue_.emplace(std::make_pair(at, seq_++), Envelope{at, m, attachment});
  }
  return true;
}

std::vector<Envelope> SimNetwork::TakeDue(uint64_t now) {
  std::vector<Envelope> due;
  while (!queue_.empty() && queue_.begin()->first.first <= now) {
    due.push_back(std::move(queue_.begin()->second));
    queue_.erase(queue_.begin());
  }
  return due;
}

}  // namespace etcdw::sim
