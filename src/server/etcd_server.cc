#include "etcdw/server/etcd_server.h"

#include <sys/stat.h>

#include <cmath>
#include <cstring>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/version.h"
#include "etcdw/mvcc/hash.h"
#include "etcdw/mvcc/txn.h"
#include "etcdw/server/local_node.h"

namespace etcdw::server {

namespace {

// etcd's minimum lease TTL: ceil(1.5 x election timeout), in whole heartbeats.
int64_t MinLeaseTtl(const common::EtcdConfig& cfg) {
  int64_t election_ticks = cfg.election_timeout.count() / cfg.heartbeat_interval.count();
  double ms = static_cast<double>((3 * election_ticks) / 2) * cfg.heartbeat_interval.count();
  return static_cast<int64_t>(std::ceil(ms / 1000.0));
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
  std::string member_dir = cfg.data_dir + "/member";
  // As etcd, the initial-cluster settings matter only when the member is created; a restart
  // uses the membership stored in the data directory.
  struct stat st {};
  const bool fresh = stat((member_dir + "/store/CURRENT").c_str(), &st) != 0;
  if (fresh && (cfg.initial_cluster.size() > 1 || cfg.initial_cluster_state != "new")) {
    return InvalidArgument(
        "initial-cluster: this build runs single-member clusters only (initial-cluster must "
        "name just this member and initial-cluster-state must be new)");
  }
  if (mkdir(member_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return InvalidArgument("data-dir: cannot create \"" + member_dir +
                           "\": " + std::strerror(errno));
  }
  ETCDW_ASSIGN_OR_RETURN(s->engine_, storage::Engine::Open(member_dir + "/store", {}));
  ETCDW_ASSIGN_OR_RETURN(s->kv_, mvcc::KvStore::Open(*s->engine_));
  ETCDW_ASSIGN_OR_RETURN(s->cluster_, LoadOrBootstrapCluster(*s->engine_, cfg));
  if (s->cluster_.members.size() > 1) {
    return InvalidArgument("data-dir: the stored membership has " +
                           std::to_string(s->cluster_.members.size()) +
                           " members; this build runs single-member clusters only");
  }
  // This member's attributes come from its configuration at every start, as etcd publishes them.
  for (auto& m : s->cluster_.members) {
    if (m.id != s->cluster_.local_id) continue;
    m.name = cfg.name;
    m.client_urls.clear();
    for (const auto& u : cfg.advertise_client_urls) m.client_urls.push_back(u.ToString());
  }
  s->alarms_ = std::make_unique<AlarmStore>();
  ETCDW_RETURN_IF_ERROR(s->alarms_->Load(*s->engine_));
  s->lessor_ = std::make_unique<Lessor>(clock);
  s->quota_ = std::make_unique<Quota>(*s->engine_, cfg.quota_backend_bytes);

  WatchHubOptions wo;
  wo.fragment_bytes = cfg.max_request_bytes + 512 * 1024;
  EtcdServer* self = s.get();
  wo.fill_header = [self](etcdserverpb::ResponseHeader* h) {
    h->set_cluster_id(self->cluster_.cluster_id);
    h->set_member_id(self->cluster_.local_id);
    h->set_raft_term(self->node_ ? self->node_->Term() : 0);
  };
  s->hub_ = std::make_unique<WatchHub>(*s->kv_, wo);
  s->compactor_ = std::make_unique<mvcc::Compactor>(*s->kv_);

  ApplierDeps deps;
  deps.kv = s->kv_.get();
  deps.compactor = s->compactor_.get();
  deps.lessor = s->lessor_.get();
  deps.alarms = s->alarms_.get();
  deps.hub = s->hub_.get();
  deps.waits = &s->waits_;
  deps.quota = s->quota_.get();
  deps.min_lease_ttl = MinLeaseTtl(cfg);
  deps.on_quota_exceeded = [self] { self->RaiseNoSpaceAlarm(); };
  s->applier_ = std::make_unique<Applier>(deps);

  LocalNodeOptions no;
  no.member_id = s->cluster_.local_id;
  no.snapshot_count = cfg.snapshot_count;
  no.on_fatal = [self](const Status& st) { self->Fatal(st); };
  s->node_ = std::make_unique<LocalNode>(*s->engine_, *s->applier_, no);
  s->tasks_ = std::make_unique<TaskRunner>(2);
  s->next_request_id_ = InitialRequestId(s->cluster_.local_id);

  auto ac =
      AutoCompactor::Create(cfg.auto_compaction_mode, cfg.auto_compaction_retention, clock.Now());
  if (!ac.ok()) return ac.status().WithContext("auto-compaction-retention");
  if (ac->enabled()) s->auto_compactor_ = std::move(ac).value();
  return s;
}

EtcdServer::~EtcdServer() { Stop(); }

Status EtcdServer::Start() {
  hub_->Start();
  ETCDW_RETURN_IF_ERROR(node_->Start());
  // This member runs lease expiry: leases restart with their full TTL plus an election timeout.
  lessor_->Promote(kv_->leases().List(), cfg_.election_timeout);
  auto now = clock_.Now();
  next_progress_tick_ = now + cfg_.watch_progress_notify_interval;
  if (auto_compactor_) next_compact_tick_ = now + auto_compactor_->interval();
  {
    std::lock_guard lock(ticker_mu_);
    ticker_stop_ = false;
  }
  ticker_ = std::thread([this] { TickerLoop(); });
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
  if (node_) node_->Stop();
  waits_.FailAll(errors::Stopped());
  if (hub_) hub_->Stop();
  tasks_.reset();
  compactor_.reset();
  if (engine_) {
    Status st = engine_->Flush();
    if (!st.ok()) log::Warn("flush at shutdown failed", {log::F("error", st)});
  }
}

void EtcdServer::Fatal(const Status& st) {
  log::Error("member stopped by an unrecoverable error", {log::F("error", st)});
  if (on_fatal_) on_fatal_(st);
}

void EtcdServer::FillHeader(etcdserverpb::ResponseHeader* h) const {
  h->set_cluster_id(cluster_.cluster_id);
  h->set_member_id(cluster_.local_id);
  h->set_raft_term(node_->Term());
  if (h->revision() == 0) h->set_revision(kv_->Rev());
}

void EtcdServer::Propose(internalpb::Request req, ApplyCallback done) {
  uint64_t id = ++next_request_id_;
  req.set_id(id);
  std::string data = req.SerializeAsString();
  if (data.size() > cfg_.max_request_bytes) {
    done(ApplyResult{errors::RequestTooLarge(), nullptr, 0});
    return;
  }
  waits_.Register(id, std::move(done));
  Status st = node_->Propose(std::move(data));
  if (!st.ok()) waits_.Trigger(id, ApplyResult{st, nullptr, 0});
}

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

bool EtcdServer::OverQuota(int64_t cost, std::function<void(Status)> reply) {
  if (quota_->Available(cost)) return false;
  if (alarms_->Active(etcdserverpb::NOSPACE)) {
    reply(errors::NoSpace());
    return true;
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
// KV

void EtcdServer::Range(const etcdserverpb::RangeRequest& r,
                       Reply<etcdserverpb::RangeResponse> reply) {
  if (Status st = mvcc::CheckRangeRequest(r); !st.ok()) return reply(st);
  auto serve = [this, &r, reply](Status st) {
    if (!st.ok()) return reply(st);
    auto view = kv_->NewReadView();
    reply(mvcc::ExecuteRange(*view, r));
  };
  if (r.serializable()) return serve(Status::Ok());
  node_->ReadIndex(std::move(serve));
}

void EtcdServer::Put(const etcdserverpb::PutRequest& r, Reply<etcdserverpb::PutResponse> reply) {
  if (OverQuota(Quota::Cost(r), [reply](Status st) { reply(std::move(st)); })) return;
  if (Status st = mvcc::CheckPutRequest(r); !st.ok()) return reply(st);
  internalpb::Request req;
  *req.mutable_put() = r;
  ProposeFor(std::move(req), std::move(reply));
}

void EtcdServer::DeleteRange(const etcdserverpb::DeleteRangeRequest& r,
                             Reply<etcdserverpb::DeleteRangeResponse> reply) {
  if (Status st = mvcc::CheckDeleteRequest(r); !st.ok()) return reply(st);
  internalpb::Request req;
  *req.mutable_delete_range() = r;
  ProposeFor(std::move(req), std::move(reply));
}

void EtcdServer::Txn(const etcdserverpb::TxnRequest& r, Reply<etcdserverpb::TxnResponse> reply) {
  if (OverQuota(Quota::Cost(r), [reply](Status st) { reply(std::move(st)); })) return;
  if (Status st = mvcc::CheckTxnRequest(r, static_cast<int64_t>(cfg_.max_txn_ops)); !st.ok()) {
    return reply(st);
  }
  if (mvcc::IsTxnReadOnly(r)) {
    // Read-only transactions are not proposed: served like a Range.
    auto serve = [this, &r, reply](Status st) {
      if (!st.ok()) return reply(st);
      auto view = kv_->NewReadView();
      reply(mvcc::ExecuteReadTxn(*view, r));
    };
    if (mvcc::IsTxnSerializable(r)) return serve(Status::Ok());
    return node_->ReadIndex(std::move(serve));
  }
  internalpb::Request req;
  *req.mutable_txn() = r;
  ProposeFor(std::move(req), std::move(reply));
}

void EtcdServer::Compact(const etcdserverpb::CompactionRequest& r,
                         Reply<etcdserverpb::CompactionResponse> reply) {
  internalpb::Request req;
  *req.mutable_compaction() = r;
  bool physical = r.physical();
  Propose(std::move(req), [this, physical, reply = std::move(reply)](ApplyResult ar) {
    if (!ar.status.ok()) return reply(ar.status);
    auto resp = std::move(*static_cast<etcdserverpb::CompactionResponse*>(ar.response.get()));
    if (!physical) {
      resp.mutable_header()->set_revision(kv_->Rev());
      return reply(std::move(resp));
    }
    // Wait for the deletion off the apply thread.
    int64_t rev = ar.compaction;
    tasks_->Submit([this, rev, resp = std::move(resp), reply]() mutable {
      Status st = compactor_->WaitFinished(rev);
      if (st.code() == Code::kUnavailable) return reply(errors::Stopped());
      if (!st.ok()) return reply(st);
      resp.mutable_header()->set_revision(kv_->Rev());
      reply(std::move(resp));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Lease

void EtcdServer::LeaseGrant(const etcdserverpb::LeaseGrantRequest& r,
                            Reply<etcdserverpb::LeaseGrantResponse> reply) {
  if (OverQuota(Quota::Cost(r), [reply](Status st) { reply(std::move(st)); })) return;
  internalpb::Request req;
  *req.mutable_lease_grant() = r;
  while (req.lease_grant().id() == 0) {
    // The server picks a positive ID.
    req.mutable_lease_grant()->set_id(
        static_cast<int64_t>(++next_request_id_ & ((uint64_t{1} << 63) - 1)));
  }
  ProposeFor(std::move(req), std::move(reply));
}

void EtcdServer::LeaseRevoke(const etcdserverpb::LeaseRevokeRequest& r,
                             Reply<etcdserverpb::LeaseRevokeResponse> reply) {
  internalpb::Request req;
  *req.mutable_lease_revoke() = r;
  ProposeFor(std::move(req), std::move(reply));
}

Result<int64_t> EtcdServer::LeaseRenew(int64_t id) {
  auto r = lessor_->Renew(id);
  if (!r.ok() && r.status().code() == Code::kNotFound) return int64_t{0};
  return r;
}

etcdserverpb::LeaseTimeToLiveResponse EtcdServer::LeaseTimeToLive(
    const etcdserverpb::LeaseTimeToLiveRequest& r) {
  etcdserverpb::LeaseTimeToLiveResponse resp;
  resp.set_id(r.id());
  auto info = kv_->leases().Get(r.id());
  auto remaining = lessor_->RemainingSeconds(r.id());
  if (!info || !remaining) {
    resp.set_ttl(-1);
  } else {
    resp.set_ttl(*remaining);
    resp.set_grantedttl(info->ttl);
    if (r.keys()) {
      auto keys = mvcc::LeaseTable::AttachedKeys(*engine_, r.id());
      if (keys.ok()) {
        for (auto& k : keys.value()) resp.add_keys(std::move(k));
      }
    }
  }
  FillHeader(resp.mutable_header());
  return resp;
}

etcdserverpb::LeaseLeasesResponse EtcdServer::LeaseLeases() {
  etcdserverpb::LeaseLeasesResponse resp;
  for (int64_t id : lessor_->IdsByExpiry()) resp.add_leases()->set_id(id);
  FillHeader(resp.mutable_header());
  return resp;
}

// ---------------------------------------------------------------------------------------------
// Maintenance

void EtcdServer::Alarm(const etcdserverpb::AlarmRequest& r,
                       Reply<etcdserverpb::AlarmResponse> reply) {
  internalpb::Request req;
  *req.mutable_alarm() = r;
  ProposeFor(std::move(req), std::move(reply));
}

etcdserverpb::StatusResponse EtcdServer::StatusInfo() {
  etcdserverpb::StatusResponse resp;
  FillHeader(resp.mutable_header());
  resp.set_version(kEtcdVersion);
  resp.set_dbsize(static_cast<int64_t>(engine_->SizeOnDisk()));
  resp.set_dbsizeinuse(static_cast<int64_t>(engine_->SizeInUse()));
  resp.set_leader(node_->Leader());
  resp.set_raftindex(node_->CommitIndex());
  resp.set_raftterm(node_->Term());
  resp.set_raftappliedindex(node_->AppliedIndex());
  for (const auto& a : alarms_->Get(etcdserverpb::NONE)) {
    // The Go text form of the AlarmMember message, as etcd reports it.
    resp.add_errors("memberID:" + std::to_string(a.memberid()) +
                    " alarm:" + etcdserverpb::AlarmType_Name(a.alarm()) + " ");
  }
  return resp;
}

void EtcdServer::Defragment(Reply<etcdserverpb::DefragmentResponse> reply) {
  tasks_->Submit([this, reply] {
    log::Info("defragmenting", {log::F("size-before", engine_->SizeOnDisk())});
    Status st = engine_->CompactAll();
    quota_->Refresh();
    if (!st.ok()) return reply(st);
    log::Info("defragmented", {log::F("size-after", engine_->SizeOnDisk())});
    etcdserverpb::DefragmentResponse resp;
    FillHeader(resp.mutable_header());
    reply(std::move(resp));
  });
}

void EtcdServer::Hash(Reply<etcdserverpb::HashResponse> reply) {
  tasks_->Submit([this, reply] {
    auto h = mvcc::HashAll(*engine_);
    if (!h.ok()) return reply(h.status());
    etcdserverpb::HashResponse resp;
    resp.set_hash(h.value());
    FillHeader(resp.mutable_header());
    reply(std::move(resp));
  });
}

void EtcdServer::HashKV(const etcdserverpb::HashKVRequest& r,
                        Reply<etcdserverpb::HashKVResponse> reply) {
  int64_t rev = r.revision();
  tasks_->Submit([this, rev, reply] {
    auto h = mvcc::HashKV(*kv_, rev);
    if (!h.ok()) return reply(h.status());
    etcdserverpb::HashKVResponse resp;
    resp.set_hash(h->hash);
    resp.set_compact_revision(h->compact_rev);
    resp.mutable_header()->set_revision(h->rev);
    FillHeader(resp.mutable_header());
    reply(std::move(resp));
  });
}

void EtcdServer::OpenSnapshot(
    Reply<std::pair<std::shared_ptr<mvcc::SnapshotWriter>, uint64_t>> reply) {
  auto writer = std::make_shared<mvcc::SnapshotWriter>(*engine_);
  tasks_->Submit([writer, reply] {
    auto size = writer->TotalSize();
    if (!size.ok()) return reply(size.status());
    reply(std::make_pair(writer, size.value()));
  });
}

// ---------------------------------------------------------------------------------------------
// Cluster

etcdserverpb::MemberListResponse EtcdServer::MemberList() {
  etcdserverpb::MemberListResponse resp;
  for (const auto& m : cluster_.members) m.ToProto(resp.add_members());
  // etcd's cluster service header carries no revision.
  auto* h = resp.mutable_header();
  h->set_cluster_id(cluster_.cluster_id);
  h->set_member_id(cluster_.local_id);
  h->set_raft_term(node_->Term());
  return resp;
}

// ---------------------------------------------------------------------------------------------
// Periodic duties

void EtcdServer::RunPeriodicDuties() {
  if (node_->IsLeader()) {
    // Revoke expired leases (bounded per tick, like etcd's revocation rate limit).
    for (int64_t id : lessor_->TakeExpired(100)) {
      internalpb::Request req;
      req.mutable_lease_revoke()->set_id(id);
      log::Debug("revoking expired lease", {log::Hex("lease-id", static_cast<uint64_t>(id))});
      Propose(std::move(req), [this, id](ApplyResult r) {
        if (!r.status.ok() && r.status.code() != Code::kNotFound) lessor_->Requeue(id);
      });
    }
  }
  auto now = clock_.Now();
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
    ticker_cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (ticker_stop_) break;
    lock.unlock();
    RunPeriodicDuties();
    lock.lock();
  }
}

}  // namespace etcdw::server
