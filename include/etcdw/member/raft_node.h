// A member's consensus node: our Raft core (RawNode) driven by one loop thread that ticks it,
// feeds it peer messages and proposals, and processes each Ready in the order Raft requires
// (a single member's proposer may take the loop's turn: RaftNode::CallerStep):
//   1. append entries and hard state to the durable log (synced when Raft says so);
//   2. send messages (snapshots stream from a consistent copy of the state);
//   3. install a received snapshot / apply committed entries (conf changes reconfigure Raft,
//      the membership and the transport);
//   4. advance.
// It serves linearizable reads through ReadIndex (concurrent reads share one round), compacts
// the log every snapshot-count entries, and installs snapshots crash-safely.
#pragma once

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/cluster/membership.h"
#include "etcdw/common/clock.h"
#include "etcdw/member/applier.h"
#include "etcdw/member/node.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/peer_transport/peer_transport.h"
#include "etcdw/raft/raw_node.h"
#include "etcdw/storage/raft_log.h"

namespace etcdw::member {

struct RaftNodeOptions {
  uint64_t member_id = 0;
  // Ticks, request timeouts and read-round retries are measured on it.
  const common::Clock* clock = &common::SystemClock::Instance();
  std::chrono::milliseconds tick_interval{100};  // heartbeat-interval
  int election_ticks = 10;                       // election-timeout / heartbeat-interval
  uint64_t snapshot_count = 100000;
  uint64_t catch_up_entries = 5000;  // kept in the log after compaction for slow followers
  // The log is also compacted once its segments hold about this many bytes (large values),
  // keeping half its applied entries if that is fewer than catch_up_entries: a start reads the
  // whole log, and compaction needs no snapshot here (snapshots are taken from the applied
  // state when a follower needs one).
  uint64_t compact_log_bytes = uint64_t{128} << 20;
  uint64_t max_size_per_msg = 1 << 20;
  size_t max_inflight_msgs = 512;
  bool pre_vote = true;
  // Bootstrap a new cluster with these members (fresh data directory only).
  std::vector<cluster::Member> bootstrap_members;
  std::string wal_dir;       // the Raft log's directory (storage::RaftLog)
  std::string snapshot_dir;  // where received snapshots are staged
  // An unrecoverable error stopped the node (the member must stop).
  std::function<void(const Status&)> on_fatal;
  // This member was removed from the cluster (applied).
  std::function<void()> on_removed;
  // Leadership changed; `leader` is the new leader (0: none), `is_leader` whether it is us.
  std::function<void(uint64_t leader, bool is_leader)> on_leader_change;
  // A membership change was applied (for the transport's peer list). Callbacks run on the
  // stepping thread: the node's, or a CallerStep's.
  std::function<void(const raftpb::ConfChange&)> on_conf_change;
  // A snapshot replaced the state.
  std::function<void()> on_snapshot_installed;
};

class RaftNode final : public Node {
 public:
  RaftNode(storage::Engine& engine, mvcc::KvStore& kv, Applier& applier,
           cluster::Membership& membership, RaftNodeOptions opts);
  ~RaftNode() override;

  // Where messages go; set before Start (the transport's handler calls the On* methods).
  void SetTransport(peer_transport::PeerTransport* transport) { transport_ = transport; }

  Status Start() override;
  void Stop() override;
  Status Propose(std::string data, common::Clock::TimePoint deadline) override;
  Status ProposeAsLeader(std::string data, uint64_t term) override;
  // `ready` runs on the stepping thread once the read is safe or the round failed, or on the
  // caller's thread before ReadIndex returns when the node is not running (Stopped). It must not
  // block: every other request waits on that thread.
  void ReadIndex(std::function<void(Status)> ready) override;
  // True when a linearizable read needs no round trip: this member is the only voter and the
  // leader, so every acknowledged write is already applied here.
  bool CanReadLocally() const;

  // Proposes a membership change (the caller validated it).
  Status ProposeConfChange(const raftpb::ConfChange& cc);
  // Asks Raft to hand leadership to `to`; completes when `to` leads or after `timeout`. `done`
  // runs on the stepping thread (or at Stop, on the node's thread) and must not block.
  void TransferLeadership(uint64_t to, std::chrono::milliseconds timeout,
                          std::function<void(Status)> done);

  uint64_t Term() const override { return term_.load(); }
  uint64_t Leader() const override { return lead_.load(); }
  bool IsLeader() const override { return is_leader_.load(); }
  uint64_t CommitIndex() const override { return commit_.load(); }
  uint64_t AppliedIndex() const override { return applier_.AppliedIndex(); }
  // What the Raft log's appends cost (any thread).
  const storage::RaftLogStats& log_stats() const { return log_.stats(); }
  // The leader's view of a member's replication (match index), if this member leads.
  std::optional<uint64_t> MatchIndex(uint64_t member) const;
  uint64_t LastIndex() const { return last_index_.load(); }
  uint64_t SyncedWrites() const { return synced_writes_.load(); }

  // Called by the applier (on the stepping thread) for each applied conf change.
  void ApplyConfChange(const raftpb::ConfChange& cc);

  // Lets a thread that queues work for the node (proposals, reads, transfers) run the node's
  // step itself instead of waking the node's thread. While a CallerStep lives, what this
  // thread queues for `node` does not wake the node's thread; Finish (or the end of the scope)
  // then runs the step here when this member is the only voter and leads and the node's
  // thread is not stepping, and wakes the node's thread otherwise. A lone write is then
  // appended, synced, applied and answered on the caller's thread: two thread hand-offs fewer,
  // each the wake-up of an idle CPU, costly on virtual machines. The caller must hold no lock
  // the apply path takes (the step runs result callbacks on this thread).
  class CallerStep {
   public:
    explicit CallerStep(RaftNode& node);
    ~CallerStep() { Finish(); }
    CallerStep(const CallerStep&) = delete;
    CallerStep& operator=(const CallerStep&) = delete;
    // `may_step` false: the caller has other work a step would hold up (many requests in
    // flight, whose batching the node's thread does better); the node's thread is woken.
    // True when the step ran here (results were delivered on this thread).
    bool Finish(bool may_step = true);

   private:
    RaftNode* node_ = nullptr;  // null when finished, or nested in another CallerStep
  };

  // Transport callbacks (any thread).
  void OnMessage(raftpb::Message m);
  void OnUnreachable(uint64_t peer);
  void OnSnapshotSent(uint64_t peer, bool ok);
  std::unique_ptr<peer_transport::SnapshotSink> OnSnapshot(const raftpb::Message& m);
  void OnSnapshotReceived(raftpb::Message m);

 private:
  struct Event {
    enum Kind { kMessage, kPropose, kConfChange, kUnreachable, kSnapStatus, kTransfer } kind;
    raftpb::Message msg;
    std::string data;
    raftpb::ConfChange cc;
    uint64_t peer = 0;
    bool ok = false;
    std::function<void(Status)> done;
    common::Clock::TimePoint deadline = common::Clock::TimePoint::max();  // kPropose
    uint64_t leader_term = 0;  // kPropose: only as the leader of this term (0: any member)
  };
  // A proposal dropped by Raft for want of a leader, retried once one is known.
  struct UnsentProposal {
    std::string data;
    common::Clock::TimePoint queued;
    common::Clock::TimePoint deadline;  // its client's; dropped after it
  };
  struct ReadRound {
    std::string ctx;
    std::vector<std::function<void(Status)>> waiters;
    common::Clock::TimePoint sent;
    common::Clock::TimePoint first;
  };
  struct Transfer {
    uint64_t to;
    common::Clock::TimePoint deadline;
    std::function<void(Status)> done;
  };

  void Push(Event e);
  // Wakes the node's thread for queued work, unless this thread's CallerStep will see to it.
  void Wake();
  // Runs the step on the calling thread if it can (see CallerStep), or wakes the node's thread.
  bool StepHereOrWake(bool may_step);
  void Loop();
  // One step under step_mu_: the queued events, a tick if `tick`, every Ready. False when the
  // node stops (stopping, or a fatal error).
  bool Step(bool tick);
  // Processes every Ready; false on a fatal error.
  bool ProcessReadies();
  Status HandleReady(raft::Ready& rd);
  Status InstallSnapshot(const raftpb::Snapshot& snap);
  void SendMessages(std::vector<raftpb::Message>& msgs);
  void ServeReads(const std::vector<raft::ReadState>& states);
  void MaybeStartReadRound();
  void ExpireWaits();
  // Compacts the log when it is due (by entry count or size), after syncing the engine's WAL.
  Status MaybeCompactLog();
  // At start: raises the durable commit index to the applied index (see raft_node.cc).
  Status ReconcileCommitWithApplied();
  Status RecoverInterruptedInstall();
  std::chrono::milliseconds RequestTimeout() const;
  std::string SnapshotPath(uint64_t index) const;
  // The snapshot Raft sends a lagging follower: the applied state's index, term and membership.
  Result<raftpb::Snapshot> SnapshotNow() const;
  void Fail(const Status& st);

  storage::Engine& engine_;
  mvcc::KvStore& kv_;
  Applier& applier_;
  cluster::Membership& membership_;
  RaftNodeOptions opts_;
  storage::RaftLog log_;
  std::unique_ptr<raft::Storage> raft_storage_;
  std::unique_ptr<raft::RawNode> raw_;
  peer_transport::PeerTransport* transport_ = nullptr;

  // What other threads hand the node (Push, ReadIndex, Stop).
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> inbox_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(Status)>> read_waiters_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread loop_;

  // Held by whichever thread steps: the loop's thread, or a CallerStep's. Order: step_mu_, then
  // mu_. raw_, log_ and raft_storage_ are used under it only, once the node is started.
  std::mutex step_mu_;
  std::deque<UnsentProposal> unsent_props_ ABSL_GUARDED_BY(step_mu_);
  std::optional<ReadRound> read_round_ ABSL_GUARDED_BY(step_mu_);
  std::deque<std::pair<uint64_t, std::vector<std::function<void(Status)>>>> ready_reads_
      ABSL_GUARDED_BY(step_mu_);
  std::vector<Transfer> transfers_ ABSL_GUARDED_BY(step_mu_);
  std::vector<std::function<void(Status)>> next_round_ ABSL_GUARDED_BY(step_mu_);
  uint64_t read_seq_ ABSL_GUARDED_BY(step_mu_) = 0;

  std::atomic<bool> running_{false};
  std::atomic<uint64_t> term_{0};
  std::atomic<uint64_t> lead_{0};
  std::atomic<bool> is_leader_{false};
  std::atomic<uint64_t> commit_{0};
  std::atomic<uint64_t> last_index_{0};
  std::atomic<uint64_t> synced_writes_{0};
  std::atomic<bool> single_voter_{false};
  mutable std::mutex status_mu_;
  std::map<uint64_t, uint64_t> match_ ABSL_GUARDED_BY(status_mu_);  // leader's view, every step
};

}  // namespace etcdw::member
