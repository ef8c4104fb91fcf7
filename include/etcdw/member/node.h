// The consensus layer as the server sees it: proposals go in, committed entries come out in
// order to the Applier, and reads can be made linearizable. RaftNode implements it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"

namespace etcdw::member {

class Node {
 public:
  virtual ~Node() = default;

  // Recovers the log, applies committed entries not yet applied, and starts processing.
  virtual Status Start() = 0;
  // Stops processing; entries already durable are kept for the next start.
  virtual void Stop() = 0;

  // Queues `data` for the log. OK means accepted: it will be applied, and the result reaches
  // the proposer through the wait registry. An error means it was not accepted. A proposal
  // that cannot be handed to consensus yet (no leader) waits for one until `deadline` (on the
  // member's clock; TimePoint::max() for none) at the latest, and is dropped after it: its
  // client gave up (etcd's proposal waits on the request's context).
  virtual Status Propose(std::string data, common::Clock::TimePoint deadline) = 0;
  // Queues `data` for the log only as the leader of `term`: when the proposal reaches consensus
  // and this member does not lead that term, it is dropped, neither forwarded to another leader
  // nor kept for a later one (its waiter times out). For what only that leader may decide, such
  // as revoking a lease its lessor found expired: a leader elected meanwhile may have renewed
  // it, and a forwarded revocation would end a lease before the TTL its client was told.
  virtual Status ProposeAsLeader(std::string data, uint64_t term) = 0;
  // Calls `ready` (from any thread) once a read on this member sees every write committed
  // before the call: etcd's ReadIndex. Non-OK when no such guarantee can be given.
  virtual void ReadIndex(std::function<void(Status)> ready) = 0;

  virtual uint64_t Term() const = 0;
  virtual uint64_t Leader() const = 0;  // 0 when unknown
  virtual bool IsLeader() const = 0;
  virtual uint64_t CommitIndex() const = 0;
  virtual uint64_t AppliedIndex() const = 0;
};

}  // namespace etcdw::member
