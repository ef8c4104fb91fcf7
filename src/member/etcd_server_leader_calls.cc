// What only the leader can answer, and how the other members reach it: lease renewals and
// remaining TTLs (the leader's lessor runs expiry), learner promotion (the leader knows each
// learner's progress). Followers forward these over the peer transport's calls, as etcd
// forwards them over HTTP to the leader's peer URLs. Also the cluster information a joining
// member asks for.
#include <string_view>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/logging.h"
#include "etcdw/member/etcd_server.h"
#include "etcdw/mvcc/lease_table.h"

namespace etcdw::member {

namespace {

// Whether a failed call is worth another attempt: the leader changed (NotLeader from the old
// one) or the transport lost the connection. Errors the leader answered with carry etcd's
// "etcdserver: " prefix and go back to the client as they are.
bool Retryable(const Status& st) {
  if (st == errors::NotLeader()) return true;
  return st.code() == Code::kUnavailable && st.message().rfind("etcdserver: ", 0) != 0;
}

template <typename Msg>
Result<Msg> ParseAnswer(const Result<std::string>& answer, std::string_view what) {
  if (!answer.ok()) return answer.status();
  Msg m;
  if (!m.ParseFromString(*answer)) {
    return Internal(std::string("undecodable ") + std::string(what) + " answer from the leader");
  }
  return m;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Leases

void EtcdServer::RenewAsLeader(int64_t id, std::function<void(Result<int64_t>)> done) {
  if (!lessor_->primary()) return done(errors::NotLeader());
  const uint64_t term = node_->Term();
  node_->ReadIndex([this, id, term, done = std::move(done)](Status st) {
    // Still the leader of the same term after the round: no other leader runs expiry before
    // an election timeout has passed without our heartbeats, so the renewal is safe.
    if (!st.ok() || !node_->IsLeader() || node_->Term() != term) return done(errors::NotLeader());
    done(lessor_->Renew(id));
  });
}

void EtcdServer::LeaseRenew(int64_t id, Reply<int64_t> reply) {
  RenewAsLeader(id, [this, id, reply](Result<int64_t> r) {
    if (r.ok()) return reply(r);
    if (r.status().code() == Code::kNotFound) return reply(int64_t{0});
    if (r.status() != errors::NotLeader()) return reply(r.status());
    ForwardRenew(id, reply);
  });
}

void EtcdServer::ForwardRenew(int64_t id, Reply<int64_t> reply) {
  etcdserverpb::LeaseKeepAliveRequest req;
  req.set_id(id);
  CallLeader(PeerMethod::kLeaseRenew, req.SerializeAsString(), clock_.Now() + RequestTimeout(),
             [reply](Result<std::string> answer) {
               auto resp = ParseAnswer<etcdserverpb::LeaseKeepAliveResponse>(answer, "renew");
               if (!resp.ok()) return reply(resp.status());
               reply(resp->ttl());
             });
}

etcdserverpb::LeaseTimeToLiveResponse EtcdServer::LocalLeaseTimeToLive(
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
  return resp;
}

void EtcdServer::LeaseTimeToLive(const etcdserverpb::LeaseTimeToLiveRequest& r,
                                 Reply<etcdserverpb::LeaseTimeToLiveResponse> reply) {
  if (node_->IsLeader()) {
    auto resp = LocalLeaseTimeToLive(r);
    FillHeader(resp.mutable_header());
    return reply(std::move(resp));
  }
  CallLeader(PeerMethod::kLeaseTimeToLive, r.SerializeAsString(), clock_.Now() + RequestTimeout(),
             [this, reply](Result<std::string> answer) {
               auto resp = ParseAnswer<etcdserverpb::LeaseTimeToLiveResponse>(answer, "ttl");
               if (!resp.ok()) return reply(resp.status());
               // As etcd, the header is this member's.
               FillHeader(resp->mutable_header());
               reply(std::move(resp));
             });
}

// ---------------------------------------------------------------------------------------------
// Membership

void EtcdServer::MemberPromote(const etcdserverpb::MemberPromoteRequest& r,
                               Reply<etcdserverpb::MemberPromoteResponse> reply) {
  if (node_->IsLeader()) return PromoteAsLeader(r, std::move(reply));
  CallLeader(PeerMethod::kMemberPromote, r.SerializeAsString(), clock_.Now() + RequestTimeout(),
             [this, reply](Result<std::string> answer) {
               auto resp = ParseAnswer<etcdserverpb::MemberPromoteResponse>(answer, "promote");
               if (!resp.ok()) return reply(resp.status());
               FillClusterHeader(resp->mutable_header());
               reply(std::move(resp));
             });
}

std::string EtcdServer::ClusterInfo() const {
  etcdserverpb::MemberListResponse info;
  membership_.Fill(&info);
  info.mutable_header()->set_cluster_id(membership_.cluster_id());
  info.mutable_header()->set_member_id(local_id_);
  return info.SerializeAsString();
}

// ---------------------------------------------------------------------------------------------
// Calls to the leader

void EtcdServer::CallLeader(PeerMethod method, std::string payload,
                            common::Clock::TimePoint deadline,
                            std::function<void(Result<std::string>)> done) {
  if (stopped_.load()) return done(errors::Stopped());
  auto now = clock_.Now();
  if (now >= deadline) {
    return done(node_->Leader() == 0 ? errors::TimeoutDueToLeaderFail() : errors::Timeout());
  }
  auto retry = [this, method, payload, deadline, done] {
    RunSoon(
        [this, method, payload, deadline, done] { CallLeader(method, payload, deadline, done); });
  };
  uint64_t lead = node_->Leader();
  if (lead == 0) return retry();
  auto answer = [retry, done](Status st, std::string bytes) {
    if (st.ok()) return done(std::move(bytes));
    if (Retryable(st)) return retry();
    if (st.code() == Code::kDeadlineExceeded) return done(errors::Timeout());
    done(st);
  };
  if (lead == local_id_) {
    // Leadership came here while the call was waiting.
    return ServePeerCall(static_cast<uint32_t>(method), std::move(payload), std::move(answer));
  }
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
  transport_->Call(lead, static_cast<uint32_t>(method), std::move(payload), timeout,
                   std::move(answer));
}

void EtcdServer::ServePeerCall(uint32_t method, std::string payload,
                               std::function<void(Status, std::string)> respond) {
  auto undecodable = [&respond](const char* what) {
    respond(InvalidArgument(std::string("undecodable ") + what + " request"), "");
  };
  switch (static_cast<PeerMethod>(method)) {
    case PeerMethod::kLeaseRenew: {
      etcdserverpb::LeaseKeepAliveRequest req;
      if (!req.ParseFromString(payload)) return undecodable("lease renew");
      // Renewed here only: a member that lost leadership answers NotLeader and the caller
      // asks the new leader.
      return RenewAsLeader(req.id(), [id = req.id(), respond](Result<int64_t> ttl) {
        if (!ttl.ok() && ttl.status().code() != Code::kNotFound) {
          return respond(ttl.status(), "");
        }
        etcdserverpb::LeaseKeepAliveResponse resp;
        resp.set_id(id);
        resp.set_ttl(ttl.ok() ? *ttl : 0);
        respond(Status::Ok(), resp.SerializeAsString());
      });
    }
    case PeerMethod::kLeaseTimeToLive: {
      etcdserverpb::LeaseTimeToLiveRequest req;
      if (!req.ParseFromString(payload)) return undecodable("lease time-to-live");
      if (!node_->IsLeader()) return respond(errors::NotLeader(), "");
      return respond(Status::Ok(), LocalLeaseTimeToLive(req).SerializeAsString());
    }
    case PeerMethod::kMemberPromote: {
      etcdserverpb::MemberPromoteRequest req;
      if (!req.ParseFromString(payload)) return undecodable("member promote");
      return PromoteAsLeader(req, [respond](Result<etcdserverpb::MemberPromoteResponse> r) {
        if (!r.ok()) return respond(r.status(), "");
        respond(Status::Ok(), r->SerializeAsString());
      });
    }
  }
  respond(Status(Code::kUnimplemented, "unknown peer method " + std::to_string(method)), "");
}

void EtcdServer::RunSoon(std::function<void()> fn) {
  {
    std::lock_guard lock(soon_mu_);
    if (!soon_closed_) {
      soon_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

}  // namespace etcdw::member
