// The application's interface to the Raft state machine. The loop the application runs:
//
//   while (true) {
//     tick on a timer: node.Tick();  deliver peer messages: node.Step(m);
//     if (!node.HasReady()) continue;
//     Ready rd = node.GetReady();
//     1. persist rd.entries, then rd.hard_state and rd.snapshot (synced if rd.must_sync);
//     2. send rd.messages (only now: they may promise what was just persisted);
//     3. install rd.snapshot, apply rd.committed_entries (ApplyConfChange for conf changes),
//        serve rd.read_states once applied;
//     4. node.Advance(rd);
//   }
//
// Broken invariants. Where continuing could lose or corrupt committed data, the library throws
// std::logic_error (its message starts with "raft: ") from the call that found it, and leaves the
// node in no defined state: a committed entry that the leader contradicts, an index out of the
// log's range in Advance or ApplyConfChange, a Storage that fails to read what it holds, an
// impossible state transition, a full inflight window. The application must stop using the node
// and persist nothing more from it (RaftNode's loop catches the exception and stops the member:
// what is durable stays consistent, and the next start recovers from it). Malformed or stale
// messages from peers are not invariants: Step ignores them or returns an error.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "etcdw/raft/raft.h"

namespace etcdw::raft {

struct Ready {
  std::optional<SoftState> soft_state;          // set when it changed
  std::optional<raftpb::HardState> hard_state;  // set when it changed
  std::vector<ReadState> read_states;
  std::vector<raftpb::Entry> entries;            // to persist
  std::optional<raftpb::Snapshot> snapshot;      // to persist and install
  std::vector<raftpb::Entry> committed_entries;  // to apply
  std::vector<raftpb::Message> messages;         // to send after persisting
  bool must_sync = false;  // entries or term/vote changed: the write must be synced
};

struct NodeStatusInfo {
  uint64_t id = 0;
  raftpb::HardState hard_state;
  SoftState soft_state;
  uint64_t applied = 0;
  uint64_t lead_transferee = 0;
  std::map<uint64_t, Progress> progress;  // leader only
};
using NodeStatus = NodeStatusInfo;

enum class SnapshotStatus { kFinish, kFailure };

class RawNode {
 public:
  explicit RawNode(const Config& c);

  // Bootstraps a new cluster (empty storage) with the given members.
  etcdw::Status Bootstrap(const std::vector<raftpb::ConfChange>& peers);

  void Tick() { raft_.Tick(); }
  void Campaign();
  etcdw::Status Propose(std::string data);
  etcdw::Status ProposeConfChange(const raftpb::ConfChange& cc);
  // A message from a peer. Local message types are refused, as are responses from unknown
  // peers.
  etcdw::Status Step(const raftpb::Message& m);
  raftpb::ConfState ApplyConfChange(const raftpb::ConfChange& cc) {
    return raft_.ApplyConfChange(cc);
  }
  void TransferLeader(uint64_t transferee);
  // Requests a linearizable read point; the answer arrives as a ReadState carrying `ctx`.
  void ReadIndex(std::string ctx);
  void ReportUnreachable(uint64_t id);
  void ReportSnapshot(uint64_t id, SnapshotStatus status);

  bool HasReady() const;
  Ready GetReady();
  void Advance(const Ready& rd);

  NodeStatus GetStatus() const;
  Raft& raft() { return raft_; }
  const Raft& raft() const { return raft_; }

 private:
  Raft raft_;
  SoftState prev_soft_;
  raftpb::HardState prev_hard_;
};

bool IsEmptyHardState(const raftpb::HardState& hs);
bool HardStateEqual(const raftpb::HardState& a, const raftpb::HardState& b);

}  // namespace etcdw::raft
