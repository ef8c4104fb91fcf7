// A deterministic simulation of a Raft cluster: RawNode members on in-memory storage, the
// simulated network of sim_network.h, a simulated clock (one Raft tick every few steps, per
// member, with its own phase), crashes and restarts, log compaction, leadership transfers, and
// clients issuing puts (proposals) and gets (ReadIndex) against a replicated key value store.
//
// One schedule = one SimOptions (all derived from a seed) = one deterministic run:
//   1. the faulty phase: `steps` steps with the faults switched on;
//   2. the healing phase: links healed, crashed members restarted, faults off; the cluster must
//      commit a barrier entry on every member within `heal_steps` (a liveness check);
//   3. the final checks, among them linearizability of the client history.
// It stops at the first violated invariant, reported with the step it was found at.
//
// What a crash keeps: the member's storage (hard state, entries, snapshot, exactly as persisted
// from the Readies before the crash) and the state machine snapshot stored beside it. With
// `durable_apply`, the state machine and its applied index are durable too (written atomically
// per applied entry, the design of our server); otherwise they are rebuilt from the snapshot and
// Raft re-delivers the committed entries after it. Everything else is lost: the RawNode, messages
// not yet handed to the network, snapshots received but not yet installed, client requests in
// progress (puts become indeterminate, gets are forgotten). A crash hits between steps or,
// at random, in the middle of handling a Ready (after persisting, after sending, after applying);
// a targeted variant crashes a member right after it granted a vote and restarts it at once.
//
// Snapshots: raftpb::Snapshot carries metadata only. Each member keeps the serialized state
// machine at its storage's snapshot index beside the storage; a MsgSnap carries a copy of the
// sender's as its Envelope attachment (the transport streams it out of band); the receiver keeps
// it until the Ready asks to install that snapshot, then replaces its state machine with it.
//
// Invariants: one leader per term (after every input to a member); a new leader's log holds
// every entry ever applied anywhere (leader completeness); log matching over the durable logs of
// every pair of members; committed entries handed out for applying are durable locally; each
// member applies consecutive indexes, and every index maps to one entry and one state machine
// hash across members, restarts and snapshots; durable entries below a member's commit index are
// the committed ones; liveness after healing; linearizability of the client history.
#pragma once

#include <cstdint>
#include <string>

#include "sim/sim_network.h"

namespace etcdw::sim {

struct SimOptions {
  uint64_t seed = 1;
  std::string profile;  // the name of the profile that derived these options (for reports)
  int members = 3;
  int steps = 3000;
  int heal_steps = 4000;
  int tick_every = 4;  // steps per Raft tick
  int election_tick = 10;
  size_t max_inflight = 256;
  uint64_t max_size_per_msg = 1 << 20;
  NetworkFaults faults;
  double tick_skip = 0;      // probability that a member misses a tick (a stalled process)
  double client_rate = 0.3;  // probability of a new client operation per step
  double put_ratio = 0.5;
  int keys = 3;
  int op_timeout = 300;   // steps before a client gives up (the operation becomes indeterminate)
  double crash_rate = 0;  // per step
  int max_down = 1;       // members down at once
  int down_min = 20;
  int down_max = 400;
  double crash_after_vote = 0;  // probability of a crash (and quick restart) after a vote
  bool durable_apply = true;
  double partition_rate = 0;  // per step, when no partition is active
  int partition_min = 50;
  int partition_max = 600;
  double transfer_rate = 0;  // per step: the leader is asked to transfer leadership
  int snapshot_every = 0;    // entries applied between snapshots (0: never compact)
  int compact_keep = 0;      // entries kept in the log behind a snapshot
  bool trace = false;        // print the run's events on stderr
  // A deliberate bug for testing the checks: gets read the member's state at once, without
  // ReadIndex, so a deposed leader answers stale values.
  bool local_reads = false;

  std::string ToString() const;
};

struct SimStats {
  uint64_t ops = 0;            // client operations issued and accepted
  uint64_t completed = 0;      // ... that got an answer
  uint64_t indeterminate = 0;  // puts that did not
  uint64_t crashes = 0;
  uint64_t partitions = 0;
  uint64_t transfers = 0;
  uint64_t leaders = 0;  // distinct (term, leader) pairs
  uint64_t snapshots_sent = 0;
  uint64_t snapshots_installed = 0;
  uint64_t compactions = 0;
  uint64_t committed = 0;  // highest index applied by anyone
  uint64_t messages = 0;
  uint64_t check_steps = 0;  // linearizability search steps
  bool check_unknown = false;

  void Add(const SimStats& o);
  std::string ToString() const;
};

struct SimResult {
  bool ok = true;
  std::string failure;  // which invariant, and how it was violated
  uint64_t step = 0;    // the step it was found at
  SimStats stats;
};

// Runs one schedule.
SimResult RunSchedule(const SimOptions& options);

}  // namespace etcdw::sim
