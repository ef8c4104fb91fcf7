// The fault campaign of the real binaries: a 3-member cluster of etcd-wrapper processes on
// loopback, faults injected on a schedule drawn from a seed while clients run a workload, and the
// outcome checked:
//   - register clients put unique values and get a few keys; their history (call and return times
//     on one clock, a put whose outcome is unknown recorded as never returned) must be
//     linearizable (sim/linearizability.h);
//   - insert clients create keys of their own; every acknowledged insert must be there at the end;
//   - a watcher from revision 1 must see every revision once and in order across reconnects, each
//     acknowledged write at the revision its answer named.
// Faults: SIGKILL of the leader or of a follower and a restart; SIGSTOP of the leader until the
// others have elected a new one, then SIGCONT. A seed replays the same schedule (the fault, the
// role of its member, the waits); which member leads at each fault, and the interleaving of the
// clients, vary from run to run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace etcdw::testing {

enum class FaultKind { kKillLeader, kKillFollower, kPauseLeader };
inline constexpr int kFaultKinds = 3;
const char* FaultName(FaultKind kind);

// One cycle of the schedule: the workload runs undisturbed for quiet_ms, then the fault; a killed
// member stays down hold_ms before its restart; a paused leader stays paused until another member
// leads, and hold_ms more. Then every member must be ready again before the next cycle.
struct PlannedFault {
  int cycle = 0;
  int quiet_ms = 0;
  FaultKind kind = FaultKind::kKillLeader;
  int follower_pick = 0;  // kKillFollower: which follower, in member order (0 or 1)
  int hold_ms = 0;
};

// The schedule of `cycles` cycles that `seed` stands for (the same on every run).
std::vector<PlannedFault> PlanFaults(uint64_t seed, int cycles);
std::string DescribePlan(const std::vector<PlannedFault>& plan);

struct CampaignOptions {
  uint64_t seed = 1;
  int cycles = 6;
  // The workload stops, the cluster heals and the histories are checked every this many cycles
  // (each round writes keys of its own), so that a long run checks bounded histories.
  int cycles_per_round = 10;
  int register_clients = 4;
  int register_keys = 3;
  int insert_clients = 2;
};

struct CampaignResult {
  bool passed = false;
  std::string summary;  // one line: seed, cycles, operations, faults of each kind, verdict
  std::string failure;  // what failed, the schedule (planned and executed) and the members' logs
};

CampaignResult RunCampaign(const CampaignOptions& options);

}  // namespace etcdw::testing
