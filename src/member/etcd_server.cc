// EtcdServer (etcd_server.h): opening, starting and stopping the member, proposals and their
// waits, the node's callbacks, and the periodic duties of the ticker thread. Each client API has
// a file of its own: etcd_server_kv.cc, etcd_server_lease.cc, etcd_server_maintenance.cc,
// etcd_server_cluster.cc, and etcd_server_leader_calls.cc for what only the leader answers.
#include "etcdw/member/etcd_server.h"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/thread_name.h"
#include "etcdw/member/call_deadline.h"
#include "etcdw/member/join.h"
#include "etcdw/member/raft_node.h"

namespace etcdw::member {

namespace {

// etcd's minimum lease TTL: ceil(1.5 x election timeout), in whole heartbeats.
int64_t MinLeaseTtl(const common::EtcdConfig& cfg) {
  const int64_t election_ticks = cfg.election_timeout.count() / cfg.heartbeat_interval.count();
  const int64_t ms = ((3 * election_ticks) / 2) * cfg.heartbeat_interval.count();  // whole ticks
  return (ms + 999) / 1000;
}

// etcd's request ID generator: 2 bytes of member ID, 5 bytes of milliseconds, 1 byte counter.
uint64_t InitialRequestId(uint64_t member_id) {
  uint64_t ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
  return ((member_id & 0xffff) << 48) | ((ms & ((uint64_t{1} << 40) - 1)) << 8);
}

}  // namespace

Result<std::unique_ptr<EtcdServer>> EtcdServer::Open(const common::EtcdConfig& cfg,
                                                     const common::Clock& clock) {
  std::unique_ptr<EtcdServer> s(new EtcdServer(cfg, clock));
  if (std::getenv("ETCDW_TEST_UNSAFE_LOCAL_READS") != nullptr) {
    s->unsafe_local_reads_ = true;
    log::Warn(
        "ETCDW_TEST_UNSAFE_LOCAL_READS is set: this member serves STALE linearizable "
        "reads (a deliberately broken build for tests); never set it in production");
  }
  std::string member_dir = cfg.data_dir + "/member";
  if (mkdir(member_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return InvalidArgument("data-dir: cannot create \"" + member_dir +
                           "\": " + std::strerror(errno));
  }
  ETCDW_ASSIGN_OR_RETURN(s->engine_, storage::Engine::Open(member_dir + "/store", {}));
  ETCDW_ASSIGN_OR_RETURN(s->kv_, mvcc::KvStore::Open(*s->engine_));
  log::Info("store opened", {log::F("revision", s->kv_->Rev()),
                             log::F("key-index", s->kv_->loaded_saved_index()
                                                     ? "loaded the copy saved at the last stop"
                                                     : "rebuilt from the keys")});
  ETCDW_RETURN_IF_ERROR(s->membership_.Load(*s->engine_));

  // Identity: stored on the first start. As etcd, the initial-cluster settings matter only
  // then; a restart uses the identity and membership in the data directory.
  ETCDW_ASSIGN_OR_RETURN(auto local_id, cluster::LoadLocalMemberId(*s->engine_));
  // A data directory restored from a snapshot (data_dir.h) starts as the member it was made for.
  ETCDW_ASSIGN_OR_RETURN(auto restored, cluster::LoadRestoredIdentity(*s->engine_));
  std::vector<cluster::Member> bootstrap;
  if (local_id) {
    s->local_id_ = *local_id;
  } else if (cfg.initial_cluster_state == "existing") {
    if (restored) {
      // Joining would apply the cluster's log over the restored state.
      return FailedPrecondition(
          "data-dir was restored from a snapshot: start it with initial-cluster-state new");
    }
    // Joining after MemberAdd: the cluster tells this member its ID; the leader then sends the
    // log (or a snapshot of its state), which brings the membership.
    ETCDW_ASSIGN_OR_RETURN(JoinInfo join, DiscoverCluster(cfg, 5, std::chrono::seconds(1), clock));
    s->local_id_ = join.local_id;
    storage::Batch batch(*s->engine_);
    cluster::StageLocalMemberId(batch, join.local_id);
    cluster::StageJoinMembers(batch, join.members);
    s->membership_.StageClusterId(batch, join.cluster_id);
    ETCDW_RETURN_IF_ERROR(s->engine_->Write(batch, /*sync=*/true));
    log::Info("joining an existing cluster",
              {log::Hex("cluster-id", join.cluster_id), log::Hex("local-member-id", join.local_id),
               log::F("members", join.members.size())});
  } else {
    bootstrap = cluster::InitialMembers(cfg);
    std::vector<std::string> mine;
    for (const auto& u : cfg.initial_advertise_peer_urls) mine.push_back(u.ToString());
    for (const cluster::Member& m : bootstrap) {
      if (cluster::ComputeMemberId(mine, cfg.initial_cluster_token) == m.id) s->local_id_ = m.id;
    }
    if (s->local_id_ == 0) {
      return InvalidArgument("initial-cluster: no entry matches initial-advertise-peer-urls " +
                             common::JoinUrls(cfg.initial_advertise_peer_urls));
    }
    std::vector<uint64_t> ids;
    ids.reserve(bootstrap.size());
    for (const cluster::Member& m : bootstrap) ids.push_back(m.id);
    const uint64_t cluster_id = cluster::ComputeClusterId(ids);
    if (restored && (restored->member_id != s->local_id_ || restored->cluster_id != cluster_id)) {
      return FailedPrecondition(
          "data-dir was restored from a snapshot for member " +
          cluster::IdToHex(restored->member_id) + " of cluster " +
          cluster::IdToHex(restored->cluster_id) +
          ", but initial-cluster, initial-cluster-token and initial-advertise-peer-urls give "
          "member " +
          cluster::IdToHex(s->local_id_) + " of cluster " + cluster::IdToHex(cluster_id));
    }
    storage::Batch batch(*s->engine_);
    cluster::StageLocalMemberId(batch, s->local_id_);
    s->membership_.StageClusterId(batch, cluster_id);
    if (restored) cluster::StageClearRestoredIdentity(batch);
    ETCDW_RETURN_IF_ERROR(s->engine_->Write(batch, /*sync=*/true));
    log::Info("bootstrapping a new cluster",
              {log::Hex("cluster-id", s->membership_.cluster_id()),
               log::Hex("local-member-id", s->local_id_), log::F("members", bootstrap.size())});
  }

  s->alarms_ = std::make_unique<AlarmStore>();
  ETCDW_RETURN_IF_ERROR(s->alarms_->Load(*s->engine_));
  s->auth_ = std::make_unique<AuthStore>();
  ETCDW_RETURN_IF_ERROR(s->auth_->Load(*s->engine_));
  ETCDW_ASSIGN_OR_RETURN(s->tokens_, NewTokenProvider(cfg.auth_token, clock, cfg.auth_token_ttl));
  s->lessor_ = std::make_unique<Lessor>(clock);
  // The leases in the store, known without expiry until this member leads (a follower lists
  // them and forwards their keepalives).
  s->lessor_->Reset(s->kv_->leases().List());
  s->quota_ = std::make_unique<Quota>(*s->engine_, cfg.quota_backend_bytes, member_dir);

  WatchHubOptions wo;
  wo.fragment_bytes = cfg.max_request_bytes + (size_t{512} << 10);
  EtcdServer* self = s.get();
  wo.fill_header = [self](etcdserverpb::ResponseHeader* h) {
    h->set_cluster_id(self->membership_.cluster_id());
    h->set_member_id(self->local_id_);
    h->set_raft_term(self->node_ ? self->node_->Term() : 0);
  };
  s->hub_ = std::make_unique<WatchHub>(*s->kv_, wo);
  s->no_leader_ =
      std::make_unique<NoLeaderMonitor>(kNoLeaderElectionTimeouts * cfg.election_timeout);
  s->compactor_ = std::make_unique<mvcc::Compactor>(*s->kv_);

  ApplierDeps deps;
  deps.kv = s->kv_.get();
  deps.compactor = s->compactor_.get();
  deps.lessor = s->lessor_.get();
  deps.alarms = s->alarms_.get();
  deps.auth = s->auth_.get();
  deps.tokens = s->tokens_.get();
  deps.hub = s->hub_.get();
  deps.waits = &s->waits_;
  deps.quota = s->quota_.get();
  deps.membership = &s->membership_;
  deps.metrics = &s->metrics_;
  deps.min_lease_ttl = MinLeaseTtl(cfg);
  deps.on_quota_exceeded = [self] { self->RaiseNoSpaceAlarm(); };
  deps.on_term_entry = [self](uint64_t term) { self->OnTermEntryApplied(term); };
  deps.on_conf_change = [self](const raftpb::ConfChange& cc) { self->node_->ApplyConfChange(cc); };
  s->applier_ = std::make_unique<Applier>(deps);

  RaftNodeOptions no;
  no.member_id = s->local_id_;
  no.clock = &clock;
  no.tick_interval = cfg.heartbeat_interval;
  no.election_ticks = static_cast<int>(cfg.election_timeout / cfg.heartbeat_interval);
  no.snapshot_count = cfg.snapshot_count;
  no.bootstrap_members = std::move(bootstrap);
  no.wal_dir = member_dir + "/wal";
  no.snapshot_dir = member_dir + "/snap";
  no.on_fatal = [self](const Status& st) { self->Fatal(st); };
  no.on_removed = [self] {
    self->Fatal(Status(Code::kFailedPrecondition,
                       "the member has been permanently removed from the cluster"));
  };
  no.on_leader_change = [self](uint64_t leader, bool is_leader) {
    self->metrics_.SawLeader(leader);
    self->OnLeaderChange(is_leader);
  };
  no.on_conf_change = [self](const raftpb::ConfChange& cc) { self->OnConfChange(cc); };
  no.on_snapshot_installed = [self] { self->OnSnapshotInstalled(); };
  s->node_ = std::make_unique<RaftNode>(*s->engine_, *s->kv_, *s->applier_, s->membership_, no);
  s->tasks_ = std::make_unique<TaskRunner>(2, "member-tasks");
  s->reads_ = std::make_unique<TaskRunner>(2, "member-reads");
  s->next_request_id_ = InitialRequestId(s->local_id_);

  auto ac =
      AutoCompactor::Create(cfg.auto_compaction_mode, cfg.auto_compaction_retention, clock.Now());
  if (!ac.ok()) return ac.status().WithContext("auto-compaction-retention");
  if (ac->enabled()) s->auto_compactor_ = std::move(ac).value();
  return s;
}

EtcdServer::~EtcdServer() { Stop(); }

Status EtcdServer::Start() {
  hub_->Start();
  peer_transport::PeerTransportOptions to;
  to.clock = &clock_;
  to.local_id = local_id_;
  to.cluster_id = membership_.cluster_id();
  to.listen_urls = cfg_.listen_peer_urls;
  to.tls = cfg_.peer_tls;
  to.max_message_bytes = std::max<size_t>(64 << 20, 4 * cfg_.max_request_bytes);
  peer_transport::PeerTransportHandler th;
  RaftNode* node = node_.get();
  th.on_message = [node](raftpb::Message m) { node->OnMessage(std::move(m)); };
  th.on_snapshot = [node](const raftpb::Message& m) { return node->OnSnapshot(m); };
  th.on_snapshot_received = [node](raftpb::Message m) { node->OnSnapshotReceived(std::move(m)); };
  th.on_unreachable = [node](uint64_t peer) { node->OnUnreachable(peer); };
  th.on_snapshot_sent = [node](uint64_t peer, bool ok) { node->OnSnapshotSent(peer, ok); };
  th.on_call = [this](uint32_t method, std::string payload,
                      std::function<void(Status, std::string)> respond) {
    ServePeerCall(method, std::move(payload), std::move(respond));
  };
  th.on_cluster_info = [this] { return ClusterInfo(); };
  ETCDW_ASSIGN_OR_RETURN(transport_, peer_transport::PeerTransport::Start(to, th));
  // A member that joined knows the others from the cluster's answer until its log brings the
  // membership (later changes update the transport through OnConfChange).
  std::vector<cluster::Member> known = membership_.List();
  if (known.empty()) {
    ETCDW_ASSIGN_OR_RETURN(known, cluster::LoadJoinMembers(*engine_));
  }
  for (const cluster::Member& m : known) {
    if (m.id != local_id_) transport_->AddPeer(m.id, m.peer_urls);
  }
  // On a fresh bootstrap the members appear when the node applies the bootstrap entries;
  // OnConfChange then tells the transport.
  node_->SetTransport(transport_.get());
  ETCDW_RETURN_IF_ERROR(node_->Start());
  auto now = clock_.Now();
  next_progress_tick_ = now + cfg_.watch_progress_notify_interval;
  if (auto_compactor_) next_compact_tick_ = now + auto_compactor_->interval();
  {
    std::lock_guard lock(ticker_mu_);
    ticker_stop_ = false;
  }
  ticker_ = common::NamedThread("member-ticker", [this] { TickerLoop(); });
  // A member that is its own quorum publishes its name and client URLs before it serves, so
  // that MemberList is complete from the first request (etcd is ready only once published).
  if (node_->CanReadLocally()) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!Published() && std::chrono::steady_clock::now() < deadline) {
      MaybePublishAttributes();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  started_ = true;
  log::Info("etcd member started",
            {log::F("name", cfg_.name), log::Hex("member-id", member_id()),
             log::Hex("cluster-id", cluster_id()), log::F("revision", kv_->Rev()),
             log::F("term", node_->Term()), log::F("applied-index", node_->AppliedIndex())});
  return Status::Ok();
}

void EtcdServer::Stop() {
  if (stopped_.exchange(true)) return;
  {
    std::lock_guard lock(ticker_mu_);
    ticker_stop_ = true;
  }
  ticker_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  // Calls waiting to be retried end now (with Stopped); later ones run at once.
  std::vector<std::function<void()>> soon;
  {
    std::lock_guard lock(soon_mu_);
    soon_closed_ = true;
    soon.swap(soon_);
  }
  for (auto& fn : soon) fn();
  if (node_) node_->Stop();
  if (transport_) transport_->Stop();
  waits_.FailAll(errors::Stopped());
  if (hub_) hub_->Stop();
  reads_.reset();
  tasks_.reset();
  compactor_.reset();
  // Nothing applies any more: the next start loads the key index instead of rebuilding it.
  if (kv_) {
    Status st = kv_->SaveKeyIndex();
    if (!st.ok()) log::Warn("saving the key index at shutdown failed", {log::F("error", st)});
  }
  if (engine_) {
    Status st = engine_->Flush();
    if (!st.ok()) log::Warn("flush at shutdown failed", {log::F("error", st)});
  }
}

void EtcdServer::Fatal(const Status& st) {
  log::Error("member stopped by an unrecoverable error", {log::F("error", st)});
  if (on_fatal_) on_fatal_(st);
}

void EtcdServer::OnLeaderChange(bool is_leader) {
  // A new leader's lessor waits for OnTermEntryApplied: until then renewals wait (they are
  // retried until the lessor leads) and nothing expires.
  if (!is_leader) lessor_->Demote();
}

void EtcdServer::OnTermEntryApplied(uint64_t term) {
  // The leader runs lease expiry once it has applied every entry of the terms before its own,
  // as etcd does: a revocation an earlier leader committed is applied first, and no renewal
  // answered here can revive that lease. Leases restart with their full TTL plus an election
  // timeout.
  if (node_->IsLeader() && node_->Term() == term) {
    lessor_->Promote(kv_->leases().List(), cfg_.election_timeout);
  }
}

void EtcdServer::OnConfChange(const raftpb::ConfChange& cc) {
  if (!transport_ || cc.node_id() == local_id_) return;
  switch (cc.type()) {
    case raftpb::CONF_CHANGE_ADD_NODE:
    case raftpb::CONF_CHANGE_ADD_LEARNER_NODE:
    case raftpb::CONF_CHANGE_UPDATE_NODE:
      if (auto m = membership_.Get(cc.node_id())) transport_->UpdatePeer(m->id, m->peer_urls);
      break;
    case raftpb::CONF_CHANGE_REMOVE_NODE:
      transport_->RemovePeer(cc.node_id());
      break;
    default:
      break;
  }
}

void EtcdServer::OnSnapshotInstalled() {
  // The state was replaced: reload what is kept in memory beside the store.
  Status st = alarms_->Load(*engine_);
  if (!st.ok()) log::Error("reloading alarms after a snapshot failed", {log::F("error", st)});
  st = auth_->Load(*engine_);
  if (!st.ok()) log::Error("reloading auth after a snapshot failed", {log::F("error", st)});
  if (node_->IsLeader()) {
    lessor_->Promote(kv_->leases().List(), cfg_.election_timeout);
  } else {
    lessor_->Demote();
    lessor_->Reset(kv_->leases().List());
  }
  hub_->Resync(kv_->Rev());
  if (transport_) {
    for (const cluster::Member& m : membership_.List()) {
      if (m.id != local_id_) transport_->UpdatePeer(m.id, m.peer_urls);
    }
  }
}

void EtcdServer::FillHeader(etcdserverpb::ResponseHeader* h) const {
  h->set_cluster_id(membership_.cluster_id());
  h->set_member_id(local_id_);
  h->set_raft_term(node_->Term());
  if (h->revision() == 0) h->set_revision(kv_->Rev());
}

void EtcdServer::Propose(internalpb::Request req, ApplyCallback done) {
  ProposeEntry(std::move(req), 0, std::move(done));
}

void EtcdServer::ProposeAsLeader(internalpb::Request req, uint64_t term, ApplyCallback done) {
  ProposeEntry(std::move(req), term, std::move(done));
}

void EtcdServer::ProposeEntry(internalpb::Request req, uint64_t leader_term, ApplyCallback done) {
  uint64_t id = ++next_request_id_;
  req.set_id(id);
  std::string data = req.SerializeAsString();
  if (data.size() > cfg_.max_request_bytes) {
    done(ApplyResult{errors::RequestTooLarge(), nullptr, 0});
    return;
  }
  const auto now = clock_.Now();
  waits_.Register(id, std::move(done), now + RequestTimeout());
  // The deadline of the client's call served on this thread, if any (grpc-timeout).
  auto deadline = common::Clock::TimePoint::max();
  if (auto call = CallDeadline::Current()) {
    deadline = now + std::chrono::duration_cast<common::Clock::Duration>(
                         *call - std::chrono::steady_clock::now());
  }
  Status st = leader_term == 0 ? node_->Propose(std::move(data), deadline)
                               : node_->ProposeAsLeader(std::move(data), leader_term);
  if (!st.ok()) {
    metrics_.proposals_failed.Add();
    waits_.Trigger(id, ApplyResult{st, nullptr, 0});
  }
}

bool EtcdServer::OverQuota(int64_t cost, std::function<void(Status)> reply) {
  if (quota_->Available(cost)) return false;
  // As etcd's quota check, the member that finds its own store full raises the alarm in its
  // own name (once: activating it again would change nothing).
  for (const auto& a : alarms_->Get(etcdserverpb::NOSPACE)) {
    if (a.memberid() == member_id()) {
      reply(errors::NoSpace());
      return true;
    }
  }
  // Like etcd, answer only once the alarm is applied, so that a client that saw the error also
  // sees the alarm.
  internalpb::Request req;
  auto* a = req.mutable_alarm();
  a->set_action(etcdserverpb::AlarmRequest::ACTIVATE);
  a->set_memberid(member_id());
  a->set_alarm(etcdserverpb::NOSPACE);
  Propose(std::move(req), [reply = std::move(reply)](ApplyResult) { reply(errors::NoSpace()); });
  return true;
}

void EtcdServer::RaiseNoSpaceAlarm() {
  if (alarms_->Active(etcdserverpb::NOSPACE)) return;
  internalpb::Request req;
  auto* a = req.mutable_alarm();
  a->set_action(etcdserverpb::AlarmRequest::ACTIVATE);
  a->set_memberid(member_id());
  a->set_alarm(etcdserverpb::NOSPACE);
  Propose(std::move(req), [](ApplyResult) {});
}

// ---------------------------------------------------------------------------------------------
// Periodic duties

void EtcdServer::RunPeriodicDuties() {
  std::vector<std::function<void()>> soon;
  {
    std::lock_guard lock(soon_mu_);
    soon.swap(soon_);
  }
  for (auto& fn : soon) fn();
  tokens_->Expire();
  // Requests whose entry was lost (a leader failed after taking it) time out, as in etcd.
  metrics_.proposals_failed.Add(waits_.ExpireBefore(
      clock_.Now(), node_->Leader() == 0 ? errors::TimeoutDueToLeaderFail() : errors::Timeout()));
  MaybePublishAttributes();
  if (node_->IsLeader()) {
    // Revoke expired leases (bounded per tick, like etcd's revocation rate limit). Only as the
    // leader of this term: a leader that was replaced without knowing it yet (paused, cut off)
    // still finds leases expired that the new leader has renewed since, and its revocation,
    // forwarded to that leader as a proposal would be, would end them early. (etcd 3.4
    // forwards it.)
    const uint64_t term = node_->Term();
    for (int64_t id : lessor_->TakeExpired(100)) {
      internalpb::Request req;
      req.mutable_lease_revoke()->set_id(id);
      log::Debug("revoking expired lease", {log::Hex("lease-id", static_cast<uint64_t>(id))});
      ProposeAsLeader(std::move(req), term, [this, id](ApplyResult r) {
        if (!r.status.ok() && r.status.code() != Code::kNotFound) lessor_->Requeue(id);
      });
    }
  }
  auto now = clock_.Now();
  no_leader_->Observe(now, node_->Leader());
  if (now >= next_progress_tick_) {
    hub_->ProgressTick();
    next_progress_tick_ = now + cfg_.watch_progress_notify_interval;
  }
  if (auto_compactor_ && now >= next_compact_tick_) {
    next_compact_tick_ = now + auto_compactor_->interval();
    std::optional<int64_t> rev;
    {
      std::lock_guard lock(ticker_mu_);
      rev = auto_compactor_->Tick(now, kv_->Rev());
    }
    if (rev) {
      internalpb::Request req;
      req.mutable_compaction()->set_revision(*rev);
      log::Info("starting auto compaction", {log::F("revision", *rev)});
      Propose(std::move(req), [this](ApplyResult r) {
        bool ok = r.status.ok() || r.status == errors::Compacted();
        // The ticker thread owns the auto compactor; hand the outcome over under its lock.
        std::lock_guard lock(ticker_mu_);
        auto_compactor_->Done(ok, clock_.Now());
      });
    }
  }
}

void EtcdServer::TickerLoop() {
  std::unique_lock lock(ticker_mu_);
  while (!ticker_stop_) {
    // Every 100 ms of the member's clock (a ManualClock in tests runs the duties as it advances).
    clock_.WaitUntil(lock, ticker_cv_, clock_.Now() + std::chrono::milliseconds(100),
                     [&] { return ticker_stop_; });
    if (ticker_stop_) break;
    lock.unlock();
    RunPeriodicDuties();
    lock.lock();
  }
}

}  // namespace etcdw::member
