// The Raft consensus algorithm as a deterministic state machine (the design of etcd's raft
// package): no I/O, no threads, no clocks. Inputs are messages (Step) and logical clock ticks
// (Tick); outputs are queued messages, log changes and state, which RawNode packages into a
// Ready for the application to persist, send and apply. Randomness (election timeouts) comes
// from a seeded generator so that runs are reproducible.
//
// Features: leader election with pre-vote and check-quorum, log replication with pipelining
// and flow control, commitment by quorum, snapshots for lagging followers, single-step
// membership changes (voters and learners), leadership transfer, and linearizable reads
// through ReadIndex.
//
// A broken invariant throws std::logic_error from the call that finds it; the contract is in
// raw_node.h ("Broken invariants").
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/raft.pb.h"
#include "etcdw/raft/log.h"
#include "etcdw/raft/progress.h"
#include "etcdw/raft/storage.h"

namespace etcdw::raft {

inline constexpr uint64_t kNone = 0;
// Context of the vote requests of a leadership transfer: they bypass check-quorum leases.
inline constexpr char kCampaignTransfer[] = "CampaignTransfer";

struct Config {
  uint64_t id = 0;  // non-zero, never reused
  int election_tick = 10;
  int heartbeat_tick = 1;
  const Storage* storage = nullptr;
  uint64_t applied = 0;  // the application's applied index at start
  uint64_t max_size_per_msg = 1 << 20;
  uint64_t max_committed_size_per_ready = 64 << 20;
  uint64_t max_uncommitted_entries_size = 0;  // 0: unlimited
  size_t max_inflight_msgs = 256;
  bool check_quorum = true;
  bool pre_vote = true;
  bool disable_proposal_forwarding = false;
  uint64_t seed = 1;  // for randomized election timeouts

  Status Validate() const;
};

enum class StateType { kFollower, kCandidate, kLeader, kPreCandidate };
const char* StateName(StateType s);

struct SoftState {
  uint64_t lead = kNone;
  StateType state = StateType::kFollower;
  bool operator==(const SoftState&) const = default;
};

// The answer to a ReadIndex request: a read issued with `request_ctx` is linearizable once the
// application has applied `index`.
struct ReadState {
  uint64_t index = 0;
  std::string request_ctx;
};

Status ErrProposalDropped();

class Raft {
 public:
  explicit Raft(const Config& c);

  // Advances the logical clock by one tick.
  void Tick();
  // Processes one message (from a peer, or local: MsgHup, MsgBeat, MsgProp, ...).
  Status Step(const raftpb::Message& m);
  // Applies an applied membership change to the Raft configuration; returns the new one.
  raftpb::ConfState ApplyConfChange(const raftpb::ConfChange& cc);

  // Bootstrap of a new cluster: entries 1..n adding each peer, committed in term 1, applied to
  // the configuration at once. Storage must be empty.
  Status Bootstrap(const std::vector<raftpb::ConfChange>& peers);

  SoftState soft_state() const { return {lead_, state_}; }
  raftpb::HardState hard_state() const;
  bool promotable() const;

  uint64_t id() const { return id_; }
  uint64_t term() const { return term_; }
  uint64_t vote() const { return vote_; }
  uint64_t lead() const { return lead_; }
  StateType state() const { return state_; }
  uint64_t lead_transferee() const { return lead_transferee_; }
  Log& log() { return log_; }
  const Log& log() const { return log_; }
  ProgressTracker& tracker() { return prs_; }
  const ProgressTracker& tracker() const { return prs_; }
  int randomized_election_timeout() const { return randomized_election_timeout_; }
  // Payload bytes of the leader's uncommitted tail (bounded by max_uncommitted_entries_size).
  uint64_t uncommitted_size() const { return uncommitted_size_; }
  // Committed entries were handed to the application: they no longer count as uncommitted.
  // RawNode::Advance calls it with each Ready's committed entries.
  void ReduceUncommittedSize(const std::vector<raftpb::Entry>& ents);
  // For tests: fixes the randomized timeout.
  void set_randomized_election_timeout(int t) { randomized_election_timeout_ = t; }

  // Outbox and read states; RawNode takes them when building a Ready.
  std::vector<raftpb::Message> msgs;
  std::vector<ReadState> read_states;

  // The transition functions, public for tests that drive the state machine directly.
  void BecomeFollower(uint64_t term, uint64_t lead);
  void BecomeCandidate();
  void BecomePreCandidate();
  void BecomeLeader();

 private:
  enum class CampaignType { kPreElection, kElection, kTransfer };

  void Reset(uint64_t term);
  void ResetRandomizedElectionTimeout();
  bool PastElectionTimeout() const { return election_elapsed_ >= randomized_election_timeout_; }
  void TickElection();
  void TickHeartbeat();

  void Hup(CampaignType t);
  void Campaign(CampaignType t);
  VoteResult Poll(uint64_t id, raftpb::MessageType t, bool granted);

  Status StepLeader(const raftpb::Message& m);
  Status StepCandidate(const raftpb::Message& m);
  Status StepFollower(const raftpb::Message& m);

  static Status Validate(const raftpb::Message& m);
  void Send(raftpb::Message m);
  // Sends a copy of a message to the leader (proposals, transfer and read requests).
  void Forward(const raftpb::Message& m);
  bool MaybeSendAppend(uint64_t to, bool send_if_empty);
  void SendAppend(uint64_t to) { MaybeSendAppend(to, true); }
  void BcastAppend();
  void BcastHeartbeat();
  void BcastHeartbeatWithCtx(const std::string& ctx);
  void SendHeartbeat(uint64_t to, const std::string& ctx);
  void SendTimeoutNow(uint64_t to);
  bool MaybeCommit();
  bool AppendEntries(std::vector<raftpb::Entry> es);

  void HandleAppendEntries(const raftpb::Message& m);
  void HandleHeartbeat(const raftpb::Message& m);
  void HandleSnapshot(const raftpb::Message& m);
  bool Restore(const raftpb::Snapshot& s);
  void AbortLeaderTransfer() { lead_transferee_ = kNone; }
  bool HasUnappliedConfChanges() const;
  bool CommittedEntryInCurrentTerm() const;

  // ReadIndex (safe: confirmed by a heartbeat round to a quorum).
  void HandleReadIndexAsLeader(const raftpb::Message& m);
  void RespondToReadIndex(const raftpb::Message& req, uint64_t index);
  void ReleasePendingReadIndexMessages();

  uint64_t id_;
  uint64_t term_ = 0;
  uint64_t vote_ = kNone;
  uint64_t lead_ = kNone;
  StateType state_ = StateType::kFollower;
  Log log_;
  ProgressTracker prs_;
  uint64_t max_msg_size_;
  uint64_t max_uncommitted_size_;
  uint64_t uncommitted_size_ = 0;
  bool check_quorum_;
  bool pre_vote_;
  bool disable_proposal_forwarding_;
  uint64_t lead_transferee_ = kNone;
  uint64_t pending_conf_index_ = 0;
  int election_elapsed_ = 0;
  int heartbeat_elapsed_ = 0;
  int election_timeout_;
  int heartbeat_timeout_;
  int randomized_election_timeout_ = 0;
  std::mt19937_64 rng_;

  struct PendingRead {
    raftpb::Message req;
    uint64_t index = 0;
    std::set<uint64_t> acks;
  };
  std::map<std::string, PendingRead> reads_;
  std::deque<std::string> read_queue_;
  std::vector<raftpb::Message> pending_read_index_msgs_;
};

bool IsLocalMessage(raftpb::MessageType t);
bool IsResponseMessage(raftpb::MessageType t);
raftpb::MessageType VoteResponseType(raftpb::MessageType t);
const char* MessageTypeName(raftpb::MessageType t);

}  // namespace etcdw::raft
