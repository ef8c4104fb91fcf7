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
#include "etcdw/common/clock.h"
#include "etcdw/common/config.h"
#include "etcdw/mvcc/compactor.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/mvcc/snapshot.h"
#include "etcdw/server/alarm_store.h"
#include "etcdw/server/applier.h"
#include "etcdw/server/apply_result.h"
#include "etcdw/server/auto_compactor.h"
#include "etcdw/server/lessor.h"
#include "etcdw/server/membership.h"
#include "etcdw/server/node.h"
#include "etcdw/server/quota.h"
#include "etcdw/server/task_runner.h"
#include "etcdw/server/watch_hub.h"
#include "etcdw/storage/engine.h"

namespace etcdw::server {

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
  // Called with the error when the member stops by itself (storage failure).
  void SetFatalHandler(std::function<void(const Status&)> fn) { on_fatal_ = std::move(fn); }

  uint64_t member_id() const { return cluster_.local_id; }
  uint64_t cluster_id() const { return cluster_.cluster_id; }
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
  // Keepalive: the lease's TTL; 0 when the lease is unknown or expired (etcd's answer).
  Result<int64_t> LeaseRenew(int64_t id);
  etcdserverpb::LeaseTimeToLiveResponse LeaseTimeToLive(
      const etcdserverpb::LeaseTimeToLiveRequest& r);
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

  WatchHub& watch_hub() { return *hub_; }
  mvcc::KvStore& kv() { return *kv_; }
  Node& node() { return *node_; }
  Lessor& lessor() { return *lessor_; }

  // Runs the periodic duties once (lease expiry, progress notifications, auto compaction);
  // normally the ticker thread does this.
  void RunPeriodicDuties();

 private:
  EtcdServer(const common::EtcdConfig& cfg, const common::Clock& clock)
      : cfg_(cfg), clock_(clock) {}
  // Proposes `req`; `done` receives the applied result (on the apply thread).
  void Propose(internalpb::Request req, ApplyCallback done);
  template <typename Resp>
  void ProposeFor(internalpb::Request req, Reply<Resp> reply);
  // When `cost` does not fit the quota: raises NOSPACE, calls `reply` with NoSpace once the
  // alarm is applied, and returns true.
  bool OverQuota(int64_t cost, std::function<void(Status)> reply);
  // Proposes the NOSPACE alarm for this member (no-op when it is already active).
  void RaiseNoSpaceAlarm();
  void TickerLoop();
  void Fatal(const Status& st);

  common::EtcdConfig cfg_;
  const common::Clock& clock_;
  std::unique_ptr<storage::Engine> engine_;
  std::unique_ptr<mvcc::KvStore> kv_;
  std::unique_ptr<mvcc::Compactor> compactor_;
  ClusterState cluster_;
  std::unique_ptr<AlarmStore> alarms_;
  std::unique_ptr<Lessor> lessor_;
  std::unique_ptr<Quota> quota_;
  std::unique_ptr<WatchHub> hub_;
  WaitRegistry waits_;
  std::unique_ptr<Applier> applier_;
  std::unique_ptr<Node> node_;
  std::unique_ptr<TaskRunner> tasks_;
  std::optional<AutoCompactor> auto_compactor_;

  std::atomic<uint64_t> next_request_id_{0};
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::function<void(const Status&)> on_fatal_;

  std::mutex ticker_mu_;
  std::condition_variable ticker_cv_;
  bool ticker_stop_ = false;
  std::thread ticker_;
  common::Clock::TimePoint next_progress_tick_;
  common::Clock::TimePoint next_compact_tick_;
};

}  // namespace etcdw::server
