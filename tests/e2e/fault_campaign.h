// The fault campaign of the real binaries: a cluster of 3 or 5 etcd-wrapper processes on
// loopback, their peer links through a fault-injecting proxy (peer_proxy.h), faults injected on a
// schedule drawn from a seed while clients run a workload, and the outcome checked:
//   - register clients put unique values and get a few keys, and on a few others set values by
//     compare-and-set Txns; their history (call and return times on one clock, a write whose
//     outcome is unknown recorded as never returned) must be linearizable
//     (sim/linearizability.h);
//   - insert clients create keys of their own; every acknowledged insert must be there at the end;
//   - bank clients move money between accounts by Txns; every read of the bank, linearizable,
//     serializable or at a past revision, and the one at the end, must hold the opening total;
//   - lease clients grant leases, attach keys, keep them alive a while and let them expire; a
//     key must not go before the TTL of the last answered keep-alive has passed since it was sent;
//   - a watcher from revision 1 must see every revision once and in order across reconnects (a
//     Txn's keys together), each acknowledged write at the revision its answer named.
// Faults: SIGKILL of the leader or of a follower and a restart; SIGSTOP of the leader until the
// others have elected a new one, then SIGCONT; the leader cut off in a minority (with a follower
// when there are 5) until the majority elects another; a minority of followers cut off; the
// leader's outgoing or incoming messages lost (one-way); two halves linked only through one
// bridge member; a flapping link between the leader and a follower; leadership moved to a
// follower (MoveLeader); the leader's or a follower's fsyncs slowed (a preloaded library); a
// follower removed from the cluster, wiped, and added back as a new member; the leader's or a
// follower's disk full (its syncs fail with ENOSPC: it must stop with exit status 1, and serve
// again once restarted on a disk with room); a follower removed, wiped, added back as a learner
// and promoted to a voter once it has caught up. A seed replays the same
// schedule (the fault, which members by their role, the waits); which member leads at each fault,
// and the interleaving of the clients, vary from run to run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace etcdw::testing {

enum class FaultKind {
  kKillLeader,
  kKillFollower,
  kPauseLeader,
  kIsolateLeader,
  kIsolateFollowers,
  kLoseLeaderOutgoing,
  kLoseLeaderIncoming,
  kBridge,
  kFlappingLink,
  kMoveLeader,
  kSlowDisk,
  kReplaceFollower,
  kFullDisk,
  kPromoteLearner,
};
inline constexpr int kFaultKinds = 14;
const char* FaultName(FaultKind kind);

// One cycle of the schedule: the workload runs undisturbed for quiet_ms, then the fault; a killed
// member stays down hold_ms before its restart; a paused or cut-off leader stays so until another
// member leads, and hold_ms more; other partitions last hold_ms. Then the links heal, and every
// member must be ready again before the next cycle.
struct PlannedFault {
  int cycle = 0;
  int quiet_ms = 0;
  FaultKind kind = FaultKind::kKillLeader;
  // Chooses the members besides the leader: the follower to kill, to join the leader's minority,
  // to bridge, to flap or to lead next (the pick-th follower in member order, modulo their
  // number); the first follower of a cut-off minority; and seeds a flapping link's timings.
  uint32_t pick = 0;
  int hold_ms = 0;
};

// The schedule of `cycles` cycles that `seed` stands for (the same on every run), drawing its
// faults from `kinds` (every kind when empty).
std::vector<PlannedFault> PlanFaults(uint64_t seed, int cycles,
                                     const std::vector<FaultKind>& kinds = {});
std::string DescribePlan(const std::vector<PlannedFault>& plan);

struct CampaignOptions {
  uint64_t seed = 1;
  int cycles = 6;
  int members = 3;               // 3 or 5
  std::vector<FaultKind> kinds;  // the faults to draw from; empty: all of them
  // The workload stops, the cluster heals and the histories are checked every this many cycles
  // (each round writes keys of its own), so that a long run checks bounded histories.
  int cycles_per_round = 10;
  int register_clients = 4;
  int register_keys = 3;
  int cas_keys = 3;  // registers written only by CAS Txns
  int insert_clients = 2;
  int bank_clients = 2;
  int lease_clients = 2;
};

struct CampaignResult {
  bool passed = false;
  std::string summary;   // one line: seed, cycles, operations, faults of each kind, verdict
  std::string executed;  // the faults as carried out, one line each
  std::string failure;   // what failed, the schedule (planned and executed) and the members' logs
};

CampaignResult RunCampaign(const CampaignOptions& options);

}  // namespace etcdw::testing
