// The member core: one etcd member (the store, the consensus node, the applier, leases, alarms,
// watches and the maintenance operations) behind the API the client API server calls. Requests
// that change state are proposed and answered asynchronously once applied; reads are served from
// the applied state after the node confirms they are linearizable (unless serializable).
//
// The library (src/member/, include/etcdw/member/) owns the member's running state and its
// threads. It uses the store (mvcc, storage), the consensus algorithm (raft), the stored
// membership (cluster) and the peer transport; nothing above it (client API, wrapper) and no
// wire protocol of clients. The allowed graph: scripts/include-rules.txt.
//
// Threads and replies. Every Reply is called exactly once, on one of these threads:
//   caller  the thread that called the method, before the method returns: invalid requests,
//           requests refused at once (over quota, not leader, ...), and reads served locally
//           (serializable, or linearizable on a member that is its own quorum);
//   apply   the thread that applies committed entries: the node's loop thread, or a thread
//           running RaftNode::CallerStep, which may be the caller's own (a lone write on a
//           single member is appended, applied and answered before the call returns);
//   read    one of the two read threads, for linearizable reads after a ReadIndex round;
//   node    the node's loop thread (or a CallerStep's), for what the node itself completes:
//           a ReadIndex round without a read thread, a leadership transfer;
//   task    one of the two task threads, for work too slow for the others (defragmentation,
//           hashes, snapshot sizing, waiting for a physical compaction);
//   ticker  the ticker thread: proposals that time out, calls to the leader retried;
//   peer    the peer transport's thread: answers from the leader to forwarded calls;
//   stop    the thread that calls Stop(), which fails every waiting request with Stopped.
// Each method below names the threads its reply may run on. A reply must not block and must not
// wait for another reply: the threads above serve every other request. Replies hand their result
// to the client's own thread (the client API posts it to the connection's event loop).
// Request arguments passed by reference must stay valid until the reply has been called (a
// linearizable Range reads its request on a read thread after the call returned).
// Methods returning a value answer on the caller's thread and are safe from any thread.
#pragma once

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/cluster/membership.h"
#include "etcdw/common/clock.h"
#include "etcdw/common/config.h"
#include "etcdw/member/alarm_store.h"
#include "etcdw/member/applier.h"
#include "etcdw/member/apply_result.h"
#include "etcdw/member/auth_store.h"
#include "etcdw/member/auth_tokens.h"
#include "etcdw/member/auto_compactor.h"
#include "etcdw/member/lessor.h"
#include "etcdw/member/no_leader_monitor.h"
#include "etcdw/member/node.h"
#include "etcdw/member/peer_methods.h"
#include "etcdw/member/quota.h"
#include "etcdw/member/raft_node.h"
#include "etcdw/member/server_metrics.h"
#include "etcdw/member/task_runner.h"
#include "etcdw/member/watch_hub.h"
#include "etcdw/mvcc/compactor.h"
#include "etcdw/mvcc/etcd_export.h"
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
  // `clock` measures every duration the member keeps: lease expiry, request timeouts, Raft
  // ticks, the ticker's period, progress notifications, auto compaction.
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
  // Called with the error when the member stops by itself (storage failure), on the node's
  // thread; it must not call Stop() (it may request a stop from another thread).
  void SetFatalHandler(std::function<void(const Status&)> fn) { on_fatal_ = std::move(fn); }

  uint64_t member_id() const { return local_id_; }
  uint64_t cluster_id() const { return membership_.cluster_id(); }
  const common::EtcdConfig& config() const { return cfg_; }
  // Sets cluster_id, member_id, raft_term, and the current revision if revision is 0.
  void FillHeader(etcdserverpb::ResponseHeader* h) const;

  // Who asks. The client API passes the identity of every client request (AuthInfoFromToken,
  // or an empty AuthInfo when the client gave none), which the auth store checks: reads when
  // served, writes when applied. nullopt: the member's own callers (tests, in-process tools),
  // which no permission limits.
  using Who = std::optional<AuthInfo>;

  // --- KV ---
  // Range: caller (serializable; or linearizable where CanReadLocally), read, or stop.
  // Put, DeleteRange, Txn: caller (refused), apply, ticker (timeout) or stop; a read-only Txn
  // is served as a Range. Compact: as Put, or task when physical (it waits for the deletion).
  void Range(const etcdserverpb::RangeRequest& r, Reply<etcdserverpb::RangeResponse> reply,
             Who who = std::nullopt);
  void Put(const etcdserverpb::PutRequest& r, Reply<etcdserverpb::PutResponse> reply,
           Who who = std::nullopt);
  void DeleteRange(const etcdserverpb::DeleteRangeRequest& r,
                   Reply<etcdserverpb::DeleteRangeResponse> reply, Who who = std::nullopt);
  void Txn(const etcdserverpb::TxnRequest& r, Reply<etcdserverpb::TxnResponse> reply,
           Who who = std::nullopt);
  void Compact(const etcdserverpb::CompactionRequest& r,
               Reply<etcdserverpb::CompactionResponse> reply, Who who = std::nullopt);

  // --- Lease ---
  // LeaseGrant, LeaseRevoke: caller (refused), apply, ticker or stop.
  void LeaseGrant(const etcdserverpb::LeaseGrantRequest& r,
                  Reply<etcdserverpb::LeaseGrantResponse> reply);
  void LeaseRevoke(const etcdserverpb::LeaseRevokeRequest& r,
                   Reply<etcdserverpb::LeaseRevokeResponse> reply, Who who = std::nullopt);
  // Keepalive: the lease's TTL; 0 when the lease is unknown or expired (etcd's answer). The
  // leader renews; another member forwards the renewal to it. Reply: caller (on the leader, or
  // refused), peer (the leader's answer), ticker (retried, timed out) or stop.
  void LeaseRenew(int64_t id, Reply<int64_t> reply);
  // Answered by the leader (it runs lease expiry), forwarded there by the others: as LeaseRenew.
  void LeaseTimeToLive(const etcdserverpb::LeaseTimeToLiveRequest& r,
                       Reply<etcdserverpb::LeaseTimeToLiveResponse> reply);
  etcdserverpb::LeaseLeasesResponse LeaseLeases();

  // --- Maintenance ---
  // Alarm: as Put. Defragment, Hash, HashKV, OpenSnapshot: task (or stop).
  void Alarm(const etcdserverpb::AlarmRequest& r, Reply<etcdserverpb::AlarmResponse> reply);
  etcdserverpb::StatusResponse StatusInfo();
  // The alarms raised in the cluster, ordered by member then type (the health endpoints').
  std::vector<etcdserverpb::AlarmMember> Alarms() const { return alarms_->Get(etcdserverpb::NONE); }
  void Defragment(Reply<etcdserverpb::DefragmentResponse> reply);
  void Hash(Reply<etcdserverpb::HashResponse> reply);
  void HashKV(const etcdserverpb::HashKVRequest& r, Reply<etcdserverpb::HashKVResponse> reply);
  // The current state as etcd's snapshot file (mvcc/etcd_export.h: its bbolt database, then
  // the 32-byte SHA-256 of it) and the file's size. Built on a worker thread into
  // "<data-dir>/member/snapshot-export-<n>.tmp" (files of that name left by a crash are removed
  // when no export runs), which is unlinked as soon as the stream opens it.
  void OpenSnapshot(Reply<std::pair<std::shared_ptr<mvcc::SnapshotFileStream>, uint64_t>> reply);

  // --- Cluster ---
  // MemberList: caller, or node after a ReadIndex round when linearizable. MemberAdd,
  // MemberRemove, MemberUpdate: caller (refused by etcd's checks), apply, ticker or stop.
  // MemberPromote: as LeaseRenew. MoveLeader: caller (refused) or node.
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
  // a graceful stop, as etcd does). Blocks the caller at most `timeout`: never call it from a
  // reply or from one of the member's threads.
  void TransferLeadershipForStop(std::chrono::milliseconds timeout);

  // --- Auth (etcd_server_auth.cc) ---
  // Every call is proposed and answered once applied, like Put; the auth store judges `who`
  // then (the root role for management; UserGet and RoleGet also for the user's own). UserAdd
  // and UserChangePassword hash the password first on a task thread: only the hash is
  // proposed. Authenticate confirms it serves current state (a ReadIndex round), compares the
  // password on a task thread, then proposes the token (auth_tokens.h). AuthStatus: as a
  // linearizable Range.
  AuthStore& auth() { return *auth_; }
  // The caller a token names (etcd's AuthInfoFromCtx): its user at the current auth revision;
  // InvalidAuthToken when the token is unknown or expired (whether or not auth is enabled).
  Result<AuthInfo> AuthInfoFromToken(const std::string& token);
  // Whether `token` names an entry this member has not applied yet. A simple token names the
  // Authenticate entry that issued it; a client may bring it to this member before this member
  // applied that entry (it got the token from another member). etcd then waits for the index:
  // WaitForTokenEntry runs `then` after a ReadIndex round, which applies every entry committed
  // before it, the token's included (on a read thread; also when the round fails, and
  // AuthInfoFromToken then answers InvalidAuthToken). Cheap: checked on every call with a token.
  bool TokenEntryPending(const std::string& token) const;
  void WaitForTokenEntry(std::function<void()> then);
  void AuthEnable(Reply<etcdserverpb::AuthEnableResponse> reply, Who who = std::nullopt);
  void AuthDisable(Reply<etcdserverpb::AuthDisableResponse> reply, Who who = std::nullopt);
  void AuthStatus(Reply<etcdserverpb::AuthStatusResponse> reply);
  void Authenticate(const etcdserverpb::AuthenticateRequest& r,
                    Reply<etcdserverpb::AuthenticateResponse> reply);
  void UserAdd(const etcdserverpb::AuthUserAddRequest& r,
               Reply<etcdserverpb::AuthUserAddResponse> reply, Who who = std::nullopt);
  void UserGet(const etcdserverpb::AuthUserGetRequest& r,
               Reply<etcdserverpb::AuthUserGetResponse> reply, Who who = std::nullopt);
  void UserList(Reply<etcdserverpb::AuthUserListResponse> reply, Who who = std::nullopt);
  void UserDelete(const etcdserverpb::AuthUserDeleteRequest& r,
                  Reply<etcdserverpb::AuthUserDeleteResponse> reply, Who who = std::nullopt);
  void UserChangePassword(const etcdserverpb::AuthUserChangePasswordRequest& r,
                          Reply<etcdserverpb::AuthUserChangePasswordResponse> reply,
                          Who who = std::nullopt);
  void UserGrantRole(const etcdserverpb::AuthUserGrantRoleRequest& r,
                     Reply<etcdserverpb::AuthUserGrantRoleResponse> reply, Who who = std::nullopt);
  void UserRevokeRole(const etcdserverpb::AuthUserRevokeRoleRequest& r,
                      Reply<etcdserverpb::AuthUserRevokeRoleResponse> reply,
                      Who who = std::nullopt);
  void RoleAdd(const etcdserverpb::AuthRoleAddRequest& r,
               Reply<etcdserverpb::AuthRoleAddResponse> reply, Who who = std::nullopt);
  void RoleGet(const etcdserverpb::AuthRoleGetRequest& r,
               Reply<etcdserverpb::AuthRoleGetResponse> reply, Who who = std::nullopt);
  void RoleList(Reply<etcdserverpb::AuthRoleListResponse> reply, Who who = std::nullopt);
  void RoleDelete(const etcdserverpb::AuthRoleDeleteRequest& r,
                  Reply<etcdserverpb::AuthRoleDeleteResponse> reply, Who who = std::nullopt);
  void RoleGrantPermission(const etcdserverpb::AuthRoleGrantPermissionRequest& r,
                           Reply<etcdserverpb::AuthRoleGrantPermissionResponse> reply,
                           Who who = std::nullopt);
  void RoleRevokePermission(const etcdserverpb::AuthRoleRevokePermissionRequest& r,
                            Reply<etcdserverpb::AuthRoleRevokePermissionResponse> reply,
                            Who who = std::nullopt);

  // The member's own counters (server_metrics.h); MetricsText writes the whole page.
  ServerMetrics& metrics() { return metrics_; }
  // Proposals made by this member and not yet applied, failed or timed out.
  size_t PendingProposals() const { return waits_.Size(); }
  // The backend quota in force (etcd's quota-backend-bytes, 0 meaning 2 GiB); < 0: none.
  int64_t QuotaBytes() const { return quota_->limit(); }

  WatchHub& watch_hub() { return *hub_; }
  // The streams that asked for a leader, cancelled when the member has had none for
  // kNoLeaderElectionTimeouts election timeouts (checked by the ticker).
  NoLeaderMonitor& no_leader_monitor() { return *no_leader_; }
  static constexpr int kNoLeaderElectionTimeouts = 2;
  mvcc::KvStore& kv() { return *kv_; }
  RaftNode& node() { return *node_; }
  cluster::Membership& membership() { return membership_; }
  Lessor& lessor() { return *lessor_; }

  // Runs the periodic duties once (lease expiry, progress notifications, auto compaction);
  // normally the ticker thread does this, every 100 ms of the member's clock. Replies of the
  // requests it times out run on the calling thread.
  void RunPeriodicDuties();

 private:
  EtcdServer(const common::EtcdConfig& cfg, const common::Clock& clock)
      : cfg_(cfg), clock_(clock) {}
  // Proposes `req`; `done` receives the applied result (on the apply thread).
  void Propose(internalpb::Request req, ApplyCallback done);
  // Proposes `req` only as the leader of `term` (Node::ProposeAsLeader): dropped, and `done`
  // told at the request timeout, when this member no longer leads that term.
  void ProposeAsLeader(internalpb::Request req, uint64_t term, ApplyCallback done);
  // Both: leader_term 0 for any member.
  void ProposeEntry(internalpb::Request req, uint64_t leader_term, ApplyCallback done);
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
  void CallLeader(PeerMethod method, std::string payload, common::Clock::TimePoint deadline,
                  std::function<void(Result<std::string>)> done);
  // Renews lease `id` here if this member still leads: a ReadIndex round confirms it first (a
  // leader whose loop stopped, paused or stuck on a slow disk, may not know it was deposed while
  // a new leader runs expiry; etcd's ensureLeadership), then the lessor renews. `done` gets the
  // TTL, NotFound, or NotLeader when this member does not lead (the caller asks the leader).
  // `done` runs once, on any thread.
  void RenewAsLeader(int64_t id, std::function<void(Result<int64_t>)> done);
  // LeaseRenew on a member that does not lead: asks the leader, through leader changes.
  void ForwardRenew(int64_t id, Reply<int64_t> reply);
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
  // ProposeFor, with `who` in the request's auth header.
  template <typename Resp>
  void ProposeAs(internalpb::Request req, const Who& who, Reply<Resp> reply) {
    if (who) {
      req.mutable_auth()->set_username(who->user);
      req.mutable_auth()->set_revision(who->revision);
    }
    ProposeFor(std::move(req), std::move(reply));
  }
  // etcd's doSerialize for reads: `check` before serving, then the answer refused with
  // AuthOldRevision when the auth store changed while it was served.
  Status CheckRead(const Who& who, const std::function<Status(const AuthInfo&)>& check) const;
  bool AuthChangedSince(const Who& who) const;
  // One try of Authenticate; tries again (at most `attempts_left` times in all) when the auth
  // store changed between the password check and the token's entry.
  void AuthenticateAttempt(std::string name, std::string password,
                           Reply<etcdserverpb::AuthenticateResponse> reply, int attempts_left);
  // Hashes `password` on a task thread (bcrypt is slow), then calls `then` there.
  void HashThen(std::string password, std::function<void(Result<std::string>)> then);
  // When `cost` does not fit the quota: raises NOSPACE, calls `reply` with NoSpace once the
  // alarm is applied, and returns true.
  bool OverQuota(int64_t cost, std::function<void(Status)> reply);
  // Proposes the NOSPACE alarm for this member (no-op when it is already active).
  void RaiseNoSpaceAlarm();
  void TickerLoop();
  void Fatal(const Status& st);
  // Node callbacks (node thread).
  void OnLeaderChange(bool is_leader);
  // The applier applied the empty entry that starts leader term `term` (applier.h).
  void OnTermEntryApplied(uint64_t term);
  void OnConfChange(const raftpb::ConfChange& cc);
  void OnSnapshotInstalled();

  // Set by Open and Start, before any other thread runs; read-only after.
  common::EtcdConfig cfg_;
  const common::Clock& clock_;
  ServerMetrics metrics_;  // thread-safe
  std::unique_ptr<storage::Engine> engine_;
  std::unique_ptr<mvcc::KvStore> kv_;
  std::unique_ptr<mvcc::Compactor> compactor_;
  uint64_t local_id_ = 0;
  cluster::Membership membership_;
  std::unique_ptr<AlarmStore> alarms_;
  std::unique_ptr<AuthStore> auth_;
  std::unique_ptr<TokenProvider> tokens_;
  std::unique_ptr<Lessor> lessor_;
  std::unique_ptr<Quota> quota_;
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<NoLeaderMonitor> no_leader_;
  WaitRegistry waits_;
  std::unique_ptr<Applier> applier_;
  std::unique_ptr<RaftNode> node_;
  std::unique_ptr<peer_transport::PeerTransport> transport_;
  std::unique_ptr<TaskRunner> tasks_;
  std::unique_ptr<TaskRunner> reads_;  // linearizable reads confirmed by a ReadIndex round
  std::optional<AutoCompactor> auto_compactor_;  // its Tick and Done run under ticker_mu_

  std::atomic<uint64_t> next_request_id_{0};
  std::atomic<uint64_t> next_export_{0};  // names OpenSnapshot's files
  std::atomic<int> exports_running_{0};   // OpenSnapshot's files being built
  std::atomic<bool> publishing_{false};
  // Only the thread that set publishing_ touches it (MaybePublishAttributes).
  common::Clock::TimePoint next_publish_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::function<void(const Status&)> on_fatal_;  // set before Start
  // A deliberately broken member, for tests that must catch it (the fault campaign): with
  // ETCDW_TEST_UNSAFE_LOCAL_READS in the environment, linearizable reads are served from the
  // local store without a ReadIndex round, as serializable ones. Logged loudly at start.
  bool unsafe_local_reads_ = false;

  std::mutex soon_mu_;
  std::vector<std::function<void()>> soon_ ABSL_GUARDED_BY(soon_mu_);  // RunSoon's queue
  bool soon_closed_ ABSL_GUARDED_BY(soon_mu_) = false;                 // set by Stop()

  std::mutex ticker_mu_;
  std::condition_variable ticker_cv_;
  bool ticker_stop_ ABSL_GUARDED_BY(ticker_mu_) = false;
  std::thread ticker_;
  // The ticker thread's (RunPeriodicDuties), set by Start before the thread starts.
  common::Clock::TimePoint next_progress_tick_;
  common::Clock::TimePoint next_compact_tick_;
};

// Used by each API's file (etcd_server_*.cc).
template <typename Resp>
void EtcdServer::ProposeFor(internalpb::Request req, Reply<Resp> reply) {
  Propose(std::move(req), [reply = std::move(reply)](ApplyResult r) {
    if (!r.status.ok()) {
      reply(r.status);
    } else {
      reply(std::move(*static_cast<Resp*>(r.response.get())));
    }
  });
}

}  // namespace etcdw::member
