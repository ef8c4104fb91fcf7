// EtcdServer's Cluster API (etcd_server.h): membership changes with etcd's strict
// reconfiguration checks, leadership moves, and publishing this member's attributes.
#include <future>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/logging.h"
#include "etcdw/member/etcd_server.h"
#include "etcdw/member/raft_node.h"
#include "etcdw/member/request_checks.h"

namespace etcdw::member {

void EtcdServer::FillClusterHeader(etcdserverpb::ResponseHeader* h) const {
  h->set_cluster_id(membership_.cluster_id());
  h->set_member_id(local_id_);
  h->set_raft_term(node_->Term());
}

etcdserverpb::MemberListResponse EtcdServer::MemberList() {
  etcdserverpb::MemberListResponse resp;
  membership_.Fill(&resp);
  // etcd's cluster service header carries no revision.
  FillClusterHeader(resp.mutable_header());
  return resp;
}

void EtcdServer::MemberList(const etcdserverpb::MemberListRequest& r,
                            Reply<etcdserverpb::MemberListResponse> reply) {
  if (!r.linearizable() || node_->CanReadLocally()) return reply(MemberList());
  node_->ReadIndex([this, reply](Status st) {
    if (!st.ok()) return reply(st);
    reply(MemberList());
  });
}

bool EtcdServer::IsLearner() const {
  auto m = membership_.Get(local_id_);
  return m && m->is_learner;
}

std::chrono::milliseconds EtcdServer::RequestTimeout() const {
  return std::chrono::milliseconds(5000) + 2 * cfg_.election_timeout;
}

void EtcdServer::ProposeConfChange(raftpb::ConfChange cc, ApplyCallback done) {
  uint64_t id = ++next_request_id_;
  cc.set_id(id);
  waits_.Register(id, std::move(done), clock_.Now() + RequestTimeout());
  Status st = node_->ProposeConfChange(cc);
  if (!st.ok()) waits_.Trigger(id, ApplyResult{st, nullptr, 0});
}

bool EtcdServer::ReadyToAddVoter() const {
  // etcd: after adding, the started voters must still be a quorum (a 1-member cluster may
  // always grow to 2, for restoring data).
  size_t members = membership_.VoterCount() + 1;
  size_t started = membership_.StartedVoterCount();
  if (started == 1 && members == 2) return true;
  return started >= members / 2 + 1;
}

bool EtcdServer::ReadyToRemoveVoter(uint64_t id) const {
  size_t members = 0, started = 0;
  for (const cluster::Member& m : membership_.List()) {
    if (m.is_learner || m.id == id) continue;
    ++members;
    if (!m.name.empty()) ++started;
  }
  return started >= members / 2 + 1;
}

namespace {
template <typename Resp>
void ReplyMembers(const ApplyResult& r, Reply<Resp>& reply, EtcdServer& s,
                  const std::function<void(Resp&)>& extra = nullptr) {
  if (!r.status.ok()) return reply(r.status);
  Resp resp;
  const auto& list = *static_cast<etcdserverpb::MemberListResponse*>(r.response.get());
  *resp.mutable_members() = list.members();
  if (extra) extra(resp);
  s.FillClusterHeader(resp.mutable_header());
  reply(std::move(resp));
}
}  // namespace

void EtcdServer::MemberAdd(const etcdserverpb::MemberAddRequest& r,
                           Reply<etcdserverpb::MemberAddResponse> reply) {
  cluster::Member m;
  Result<std::vector<std::string>> urls = CheckPeerUrls(r.peerurls());
  if (!urls.ok()) return reply(urls.status());
  m.peer_urls = std::move(urls).value();
  m.is_learner = r.islearner();
  if (!m.is_learner && !ReadyToAddVoter()) return reply(errors::MemberNotEnoughStarted());
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  m.id = cluster::ComputeMemberId(m.peer_urls, "", now);
  raftpb::ConfChange cc;
  cc.set_type(m.is_learner ? raftpb::CONF_CHANGE_ADD_LEARNER_NODE : raftpb::CONF_CHANGE_ADD_NODE);
  cc.set_node_id(m.id);
  cc.set_context(m.Serialize());
  ProposeConfChange(cc, [this, m, reply](ApplyResult ar) mutable {
    ReplyMembers<etcdserverpb::MemberAddResponse>(ar, reply, *this, [&](auto& resp) {
      auto* added = resp.mutable_member();
      added->set_id(m.id);
      for (const auto& u : m.peer_urls) added->add_peerurls(u);
      added->set_islearner(m.is_learner);
    });
  });
}

void EtcdServer::MemberRemove(const etcdserverpb::MemberRemoveRequest& r,
                              Reply<etcdserverpb::MemberRemoveResponse> reply) {
  auto m = membership_.Get(r.id());
  if (m && !m->is_learner && !ReadyToRemoveVoter(r.id())) {
    return reply(errors::MemberNotEnoughStarted());
  }
  raftpb::ConfChange cc;
  cc.set_type(raftpb::CONF_CHANGE_REMOVE_NODE);
  cc.set_node_id(r.id());
  ProposeConfChange(cc, [this, reply](ApplyResult ar) mutable {
    ReplyMembers<etcdserverpb::MemberRemoveResponse>(ar, reply, *this);
  });
}

void EtcdServer::MemberUpdate(const etcdserverpb::MemberUpdateRequest& r,
                              Reply<etcdserverpb::MemberUpdateResponse> reply) {
  cluster::Member m;
  m.id = r.id();
  Result<std::vector<std::string>> urls = CheckPeerUrls(r.peerurls());
  if (!urls.ok()) return reply(urls.status());
  m.peer_urls = std::move(urls).value();
  raftpb::ConfChange cc;
  cc.set_type(raftpb::CONF_CHANGE_UPDATE_NODE);
  cc.set_node_id(r.id());
  cc.set_context(m.Serialize());
  ProposeConfChange(cc, [this, reply](ApplyResult ar) mutable {
    ReplyMembers<etcdserverpb::MemberUpdateResponse>(ar, reply, *this);
  });
}

void EtcdServer::PromoteAsLeader(const etcdserverpb::MemberPromoteRequest& r,
                                 Reply<etcdserverpb::MemberPromoteResponse> reply) {
  // Only the leader knows how far the learner has caught up.
  if (!node_->IsLeader()) return reply(errors::NotLeader());
  auto m = membership_.Get(r.id());
  if (m && m->is_learner) {
    auto learner = node_->MatchIndex(r.id());
    auto leader = node_->MatchIndex(local_id_);
    // etcd: the learner must have at least 90% of the leader's log.
    if (!learner || !leader || static_cast<double>(*learner) < static_cast<double>(*leader) * 0.9) {
      return reply(errors::LearnerNotReady());
    }
    if (!ReadyToAddVoter()) return reply(errors::MemberNotEnoughStarted());
  }
  raftpb::ConfChange cc;
  cc.set_type(raftpb::CONF_CHANGE_ADD_NODE);  // without a record: a promotion
  cc.set_node_id(r.id());
  ProposeConfChange(cc, [this, reply](ApplyResult ar) mutable {
    ReplyMembers<etcdserverpb::MemberPromoteResponse>(ar, reply, *this);
  });
}

void EtcdServer::MoveLeader(const etcdserverpb::MoveLeaderRequest& r,
                            Reply<etcdserverpb::MoveLeaderResponse> reply) {
  if (!node_->IsLeader()) return reply(errors::NotLeader());
  auto target = membership_.Get(r.targetid());
  if (!target || target->is_learner) return reply(errors::BadLeaderTransferee());
  if (r.targetid() == local_id_) {
    etcdserverpb::MoveLeaderResponse resp;
    FillHeader(resp.mutable_header());
    return reply(std::move(resp));
  }
  node_->TransferLeadership(r.targetid(), RequestTimeout(), [this, reply](Status st) {
    if (!st.ok()) return reply(st);
    etcdserverpb::MoveLeaderResponse resp;
    FillHeader(resp.mutable_header());
    reply(std::move(resp));
  });
}

void EtcdServer::TransferLeadershipForStop(std::chrono::milliseconds timeout) {
  if (!node_->IsLeader()) return;
  // The voter that has the most of the log takes over.
  uint64_t best = 0, best_match = 0;
  for (const cluster::Member& m : membership_.List()) {
    if (m.id == local_id_ || m.is_learner) continue;
    uint64_t match = node_->MatchIndex(m.id).value_or(0);
    if (best == 0 || match > best_match) {
      best = m.id;
      best_match = match;
    }
  }
  if (best == 0) return;
  auto done = std::make_shared<std::promise<Status>>();
  auto f = done->get_future();
  node_->TransferLeadership(best, timeout, [done](Status st) { done->set_value(st); });
  Status st = f.get();
  if (st.ok()) {
    log::Info("leadership transferred before stopping", {log::Hex("to", best)});
  } else {
    log::Warn("leadership transfer before stopping failed", {log::F("error", st)});
  }
}

bool EtcdServer::Published() const {
  auto self = membership_.Get(local_id_);
  if (!self) return false;
  std::vector<std::string> urls;
  for (const auto& u : cfg_.advertise_client_urls) urls.push_back(u.ToString());
  return self->name == cfg_.name && self->client_urls == urls;
}

void EtcdServer::MaybePublishAttributes() {
  if (node_->Leader() == 0 || Published()) return;
  std::vector<std::string> urls;
  for (const auto& u : cfg_.advertise_client_urls) urls.push_back(u.ToString());
  // One attempt at a time (ticker and Start may both call); next_publish_ is only touched by
  // the thread that set publishing_.
  bool idle = false;
  if (!publishing_.compare_exchange_strong(idle, true)) return;
  auto now = clock_.Now();
  if (now < next_publish_ && started_.load()) {
    publishing_ = false;
    return;
  }
  next_publish_ = now + std::chrono::seconds(1);
  internalpb::Request req;
  auto* a = req.mutable_member_attributes();
  a->set_id(local_id_);
  a->set_name(cfg_.name);
  for (const auto& u : urls) a->add_client_urls(u);
  Propose(std::move(req), [this](ApplyResult r) {
    publishing_ = false;
    if (r.status.ok()) log::Info("published member attributes", {log::F("name", cfg_.name)});
  });
}

}  // namespace etcdw::member
