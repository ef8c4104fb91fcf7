// The simulated network between Raft members: every message gets a random delay (so messages
// overtake each other), may be lost or delivered twice, and links can be cut in either direction
// (partitions). All randomness comes from the generator the simulation passes in, so one seed
// gives one run. Time is the simulation's step counter.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "etcdw/raft.pb.h"

namespace etcdw::sim {

struct NetworkFaults {
  double drop = 0;       // probability that a message is lost
  double duplicate = 0;  // probability that a message is delivered a second time
  int min_delay = 1;     // delivery takes [min_delay, max_delay] steps, uniformly (min >= 1)
  int max_delay = 3;
  double slow = 0;   // probability of an extra delay of up to slow_max steps
  int slow_max = 0;  // (a congested or retransmitting link)
};

// A message in flight. `attachment` is data sent out of band with it: the state machine
// snapshot of a MsgSnap, since raftpb::Snapshot carries metadata only.
struct Envelope {
  uint64_t deliver_at = 0;
  raftpb::Message msg;
  std::string attachment;
};

struct NetworkStats {
  uint64_t sent = 0;
  uint64_t dropped = 0;
  uint64_t duplicated = 0;
};

class SimNetwork {
 public:
  explicit SimNetwork(std::mt19937_64& rng) : rng_(rng) {}

  void set_faults(const NetworkFaults& f) { faults_ = f; }
  const NetworkFaults& faults() const { return faults_; }

  // Accepts a message sent at step `now`. Returns false when it was lost at once (random drop);
  // a sender learns that only for snapshots (the transport streams them and sees the failure).
  bool Send(uint64_t now, const raftpb::Message& m, const std::string& attachment);
  // Removes the messages due at step `now` or before, in delivery order (ties: sending order).
  // Whether a cut link or a dead receiver loses them is the caller's business.
  std::vector<Envelope> TakeDue(uint64_t now);

  // Links are directed: Cut(a, b) loses what a sends to b, not the answers b sends to a.
  void Cut(uint64_t from, uint64_t to) { cuts_.insert({from, to}); }
  bool Connected(uint64_t from, uint64_t to) const { return !cuts_.count({from, to}); }
  bool HasCuts() const { return !cuts_.empty(); }
  void HealAll() { cuts_.clear(); }

  size_t in_flight() const { return queue_.size(); }
  const NetworkStats& stats() const { return stats_; }

 private:
  uint64_t Delay();
  bool Chance(double p) { return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  std::mt19937_64& rng_;
  NetworkFaults faults_;
  // Keyed by (delivery step, sequence number): iteration order is delivery order.
  std::map<std::pair<uint64_t, uint64_t>, Envelope> queue_;
  uint64_t seq_ = 0;
  std::set<std::pair<uint64_t, uint64_t>> cuts_;
  NetworkStats stats_;
};

}  // namespace etcdw::sim
