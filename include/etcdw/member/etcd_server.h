// One etcd member: the store, the consensus node, the applier, leases, alarms, watches and the
// maintenance operations, behind the API the gRPC services call. Requests that change state
// are proposed and answered asynchronously once applied; reads are served from the applied
// state after the node confirms they are linearizable (unless serializable).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/cluster/membership.h"
#include "etcdw/common/clock.h"
#include "etcdw/common/config.h"
#include "etcdw/member/alarm_store.h"
#include "etcdw/member/applier.h"
#include "etcdw/member/apply_result.h"
#include "etcdw/member/auto_compactor.h"
#include "etcdw/member/lessor.h"
#include "etcdw/member/node.h"
#include "etcdw/member/peer_methods.h"
#include "etcdw/member/quota.h"
#include "etcdw/member/raft_node.h"
#include "etcdw/member/server_metrics.h"
#include "etcdw/member/task_runner.h"
#include "etcdw/member/watch_hub.h"
#include "etcdw/mvcc/compactor.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/mvcc/snapshot.h"
#include "etcdw/peer_transport/peer_transport.h"
#include "etcdw/storage/engine.h"

namespace etcdw::member {

template <typename T>
using Reply = std::function<void(Result<T>)>;

class EtcdServer {
 public:
  // Opens the data directory (creating the store on first start) and prepares the member.
  static Result<std::unique_ptr<EtcdServer>> Open(
      const common::EtcdConfig& cfg, const common::Clock& clock = common::SystemClock::Instance());
  ~EtcdServer();

  // Replays the log, starts consensus, lease expiry and background work.
  Status Start();
  // Stops accepting work, fails waiting requests, stops background work. Idempotent.
  void Stop();
  // Whether this member has published its name and client URLs to the cluster (etcd serves
  // clients only from then on: until then MemberList would show it unstarted).
  bool Published() const;
  // Called with the error when the member stops by itself (storage failure).
  void SetFatalHandler(std::function<void(const Status&)> fn) { on_fatal_ = std::move(fn); }

  uint64_t member_id() const { return local_id_; }
  uint64_t cluster_id() const { return membership_.cluster_id(); }
  const common::EtcdConfig& config() const { return cfg_; }
  // Sets cluster_id, member_id, raft_term, and the current revision if revision is 0.
  void FillHeader(etcdserverpb::ResponseHeader* h) const;

  // --- KV ---
  void Range(const etcdserverpb::RangeRequest& r, Reply<etcdserverpb::RangeResponse> reply);
  void Put(const etcdserverpb::PutRequest& r, Reply<etcdserverpb::PutResponse> reply);
  void DeleteRange(const etcdserverpb::DeleteRangeRequest& r,
                   Reply<etcdserverpb::DeleteRangeResponse> reply);
  void Txn(const etcdserverpb::TxnRequest& r, Reply<etcdserverpb::TxnResponse> reply);
  void Compact(const etcdserverpb::CompactionRequest& r,
               Reply<etcdserverpb::CompactionResponse> reply);

  // --- Lease ---
  void LeaseGrant(const etcdserverpb::LeaseGrantRequest& r,
                  Reply<etcdserverpb::LeaseGrantResponse> reply);
  void LeaseRevoke(const etcdserverpb::LeaseRevokeRequest& r,
                   Reply<etcdserverpb::LeaseRevokeResponse> reply);
  // Keepalive: the lease's TTL; 0 when the lease is unknown or expired (etcd's answer). The
  // leader renews; another member forwards the renewal to it.
  void LeaseRenew(int64_t id, Reply<int64_t> reply);
  // Answered by the leader (it runs lease expiry), forwarded there by the others.
  void LeaseTimeToLive(const etcdserverpb::LeaseTimeToLiveRequest& r,
                       Reply<etcdserverpb::LeaseTimeToLiveResponse> reply);
  etcdserverpb::LeaseLeasesResponse LeaseLeases();

  // --- Maintenance ---
  void Alarm(const etcdserverpb::AlarmRequest& r, Reply<etcdserverpb::AlarmResponse> reply);
  etcdserverpb::StatusResponse StatusInfo();
  void Defragment(Reply<etcdserverpb::DefragmentResponse> reply);
  void Hash(Reply<etcdserverpb::HashResponse> reply);
  void HashKV(const etcdserverpb::HashKVRequest& r, Reply<etcdserverpb::HashKVResponse> reply);
  // A snapshot of the current state and its exact size (computed on a worker thread).
  void OpenSnapshot(Reply<std::pair<std::shared_ptr<mvcc::SnapshotWriter>, uint64_t>> reply);

  // --- Cluster ---
  etcdserverpb::MemberListResponse MemberList();
  void MemberList(const etcdserverpb::MemberListRequest& r,
                  Reply<etcdserverpb::MemberListResponse> reply);
  void MemberAdd(const etcdserverpb::MemberAddRequest& r,
                 Reply<etcdserverpb::MemberAddResponse> reply);
  void MemberRemove(const etcdserverpb::MemberRemoveRequest& r,
                    Reply<etcdserverpb::MemberRemoveResponse> reply);
  void MemberUpdate(const etcdserverpb::MemberUpdateRequest& r,
                    Reply<etcdserverpb::MemberUpdateResponse> reply);
  // Decided by the leader, forwarded there by the others.
  void MemberPromote(const etcdserverpb::MemberPromoteRequest& r,
                     Reply<etcdserverpb::MemberPromoteResponse> reply);
  void MoveLeader(const etcdserverpb::MoveLeaderRequest& r,
                  Reply<etcdserverpb::MoveLeaderResponse> reply);
  // A learner serves only Status and serializable ranges (etcd's rule).
  bool IsLearner() const;
  // The header of cluster responses: identity and term, no revision (as etcd's).
  void FillClusterHeader(etcdserverpb::ResponseHeader* h) const;
  // When leading a cluster with other voters, hands leadership to one of them (used before
  // a graceful stop, as etcd does). Waits at most `timeout`.
  void TransferLeadershipForStop(std::chrono::milliseconds timeout);

  // The member's own counters (server_metrics.h); MetricsText writes the whole page.
  ServerMetrics& metrics() { return metrics_; }
  // Proposals made by this member and not yet applied, failed or timed out.
  size_t PendingProposals() const { return waits_.Size(); }
  // The backend quota in force (etcd's quota-backend-bytes, 0 meaning 2 GiB); < 0: none.
  int64_t QuotaBytes() const { return quota_->limit(); }

  WatchHub& watch_hub() { return *hub_; }
  mvcc::KvStore& kv() { return *kv_; }
  RaftNode& node() { return *node_; }
  cluster::Membership& membership() { return membership_; }
  Lessor& lessor() { return *lessor_; }

  // Runs the periodic duties once (lease expiry, progress notifications, auto compaction);
  // normally the ticker thread does this.
  void RunPeriodicDuties();

 private:
  EtcdServer(const common::EtcdConfig& cfg, const common::Clock& clock)
      : cfg_(cfg), clock_(clock) {}
  // Proposes `req`; `done` receives the applied result (on the apply thread).
  void Propose(internalpb::Request req, ApplyCallback done);
  // Proposes a membership change; `done` receives the members after it, or the refusal.
  void ProposeConfChange(raftpb::ConfChange cc, ApplyCallback done);
  // The leader's side of MemberPromote (NotLeader elsewhere).
  void PromoteAsLeader(const etcdserverpb::MemberPromoteRequest& r,
                       Reply<etcdserverpb::MemberPromoteResponse> reply);
  // The leader's side of LeaseTimeToLive, from its lessor.
  etcdserverpb::LeaseTimeToLiveResponse LocalLeaseTimeToLive(
      const etcdserverpb::LeaseTimeToLiveRequest& r);
  // Runs `method` on the current leader (locally when this member leads), waiting for a leader
  // and retrying through leader changes and lost connections until `deadline`, then Timeout.
  // `done` runs once, on any thread.
  void CallLeader(PeerMethod method, std::string payload,
                  std::chrono::steady_clock::time_point deadline,
                  std::function<void(Result<std::string>)> done);
  // Answers a peer's call (PeerTransportHandler::on_call).
  void ServePeerCall(uint32_t method, std::string payload,
                     std::function<void(Status, std::string)> respond);
  // Runs `fn` on the ticker thread at its next tick (at most 100 ms), or at Stop().
  void RunSoon(std::function<void()> fn);
  // This member's view of the cluster for a joining member (on_cluster_info).
  std::string ClusterInfo() const;
  // etcd's strict reconfiguration checks.
  bool ReadyToAddVoter() const;
  bool ReadyToRemoveVoter(uint64_t id) const;
  // Publishes this member's name and client URLs once (etcd's publish), retried by the ticker.
  void MaybePublishAttributes();
  std::chrono::milliseconds RequestTimeout() const;
  template <typename Resp>
  void ProposeFor(internalpb::Request req, Reply<Resp> reply);
  // When `cost` does not fit the quota: raises NOSPACE, calls `reply` with NoSpace once the
  // alarm is applied, and returns true.
  bool OverQuota(int64_t cost, std::function<void(Status)> reply);
  // Proposes the NOSPACE alarm for this member (no-op when it is already active).
  void RaiseNoSpaceAlarm();
  void TickerLoop();
  void Fatal(const Status& st);
  // Node callbacks (node thread).
  void OnLeaderChange(bool is_leader);
  void OnConfChange(const raftpb::ConfChange& cc);
  void OnSnapshotInstalled();

  common::EtcdConfig cfg_;
  const common::Clock& clock_;
  ServerMetrics metrics_;
  std::unique_ptr<storage::Engine> engine_;
  std::unique_ptr<mvcc::KvStore> kv_;
  std::unique_ptr<mvcc::Compactor> compactor_;
  uint64_t local_id_ = 0;
  cluster::Membership membership_;
  std::unique_ptr<AlarmStore> alarms_;
  std::unique_ptr<Lessor> lessor_;
  std::unique_ptr<Quota> quota_;
  std::unique_ptr<WatchHub> hub_;
  WaitRegistry waits_;
  std::unique_ptr<Applier> applier_;
  std::unique_ptr<RaftNode> node_;
  std::unique_ptr<peer_transport::PeerTransport> transport_;
  std::unique_ptr<TaskRunner> tasks_;
  std::unique_ptr<TaskRunner> reads_;  // linearizable reads confirmed by a ReadIndex round
  std::optional<AutoCompactor> auto_compactor_;

  std::atomic<uint64_t> next_request_id_{0};
  std::atomic<bool> publishing_{false};
  common::Clock::TimePoint next_publish_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::function<void(const Status&)> on_fatal_;

  std::mutex soon_mu_;
  std::vector<std::function<void()>> soon_;  // RunSoon's queue
  bool soon_closed_ = false;                 // set by Stop()

  std::mutex ticker_mu_;
  std::condition_variable ticker_cv_;
  bool ticker_stop_ = false;
  std::thread ticker_;
  common::Clock::TimePoint next_progress_tick_;
  common::Clock::TimePoint next_compact_tick_;
};

}  // namespace etcdw::member
