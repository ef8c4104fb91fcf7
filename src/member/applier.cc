#include "etcdw/member/applier.h"

#include <chrono>

#include "etcdw/common/deferred_wakes.h"
#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/logging.h"
#include "etcdw/mvcc/lease_table.h"
#include "etcdw/mvcc/txn.h"

namespace etcdw::member {

using etcdserverpb::AlarmType;

namespace {

template <typename T>
ApplyResult Ok(T&& resp) {
  return ApplyResult{Status::Ok(), std::make_shared<std::decay_t<T>>(std::forward<T>(resp)), 0};
}

ApplyResult Err(Status st) { return ApplyResult{std::move(st), nullptr, 0}; }

// Runs `fn` inside one write transaction of the batch.
template <typename Fn>
auto InTxn(mvcc::ApplyBatch& batch, Fn fn) {
  auto txn = batch.Begin();
  auto r = fn(*txn);
  batch.End(std::move(txn));
  return r;
}

}  // namespace

ApplyResult Applier::ApplyRequest(mvcc::ApplyBatch& batch, const internalpb::Request& req,
                                  uint64_t index, Effects& fx) {
  const bool nospace = d_.alarms->Active(etcdserverpb::NOSPACE);
  const bool corrupt = d_.alarms->Active(etcdserverpb::CORRUPT);
  // Judged before the request changes anything; answered after the alarms' refusals, which
  // etcd's appliers give first.
  const Status denied = CheckPermission(batch, req);
  switch (req.op_case()) {
    case internalpb::Request::kPut: {
      if (corrupt) return Err(errors::Corrupt());
      if (nospace) return Err(errors::NoSpace());
      if (!denied.ok()) return Err(denied);
      // etcd judges the quota before applying and reports NoSpace after applying.
      bool fits = d_.quota->Available(Quota::Cost(req.put()));
      auto r = InTxn(batch, [&](mvcc::WriteTxn& t) { return mvcc::ExecutePut(t, req.put()); });
      if (!r.ok()) {
        // ignore_value or ignore_lease on a missing key: etcd read it and put nothing.
        if (r.status() == errors::KeyNotFound()) d_.metrics->CountPut(req.put(), false);
        return Err(r.status());
      }
      d_.metrics->CountPut(req.put(), true);
      if (!fits) return QuotaExceeded();
      return Ok(std::move(r).value());
    }
    case internalpb::Request::kDeleteRange: {
      if (corrupt) return Err(errors::Corrupt());
      if (!denied.ok()) return Err(denied);
      auto r = InTxn(batch, [&](mvcc::WriteTxn& t) {
        return mvcc::ExecuteDeleteRange(t, req.delete_range());
      });
      if (!r.ok()) return Err(r.status());
      d_.metrics->CountDelete(req.delete_range());
      return Ok(std::move(r).value());
    }
    case internalpb::Request::kTxn: {
      if (corrupt) return Err(errors::Corrupt());
      int64_t cost = Quota::Cost(req.txn());
      if (nospace && cost > 0) return Err(errors::NoSpace());
      if (!denied.ok()) return Err(denied);
      bool fits = d_.quota->Available(cost);
      auto r = InTxn(batch, [&](mvcc::WriteTxn& t) { return mvcc::ExecuteTxn(t, req.txn()); });
      if (!r.ok()) return Err(r.status());
      d_.metrics->CountTxn(req.txn(), *r, /*read_only=*/false);
      if (!fits) return QuotaExceeded();
      return Ok(std::move(r).value());
    }
    case internalpb::Request::kCompaction: {
      if (corrupt) return Err(errors::Corrupt());
      Status st = d_.kv->Compact(batch, req.compaction().revision());
      if (!st.ok()) return Err(st);
      d_.metrics->CountRange();  // etcd reads a key for the answer's revision
      etcdserverpb::CompactionResponse resp;
      resp.mutable_header()->set_revision(batch.pending_rev());
      ApplyResult r = Ok(std::move(resp));
      r.compaction = req.compaction().revision();
      return r;
    }
    case internalpb::Request::kLeaseGrant: {
      if (corrupt) return Err(errors::Corrupt());
      if (nospace) return Err(errors::NoSpace());
      bool fits = d_.quota->Available(Quota::Cost(req.lease_grant()));
      auto r = InTxn(batch, [&](mvcc::WriteTxn& t) {
        return mvcc::ExecuteLeaseGrant(t, req.lease_grant(), d_.min_lease_ttl);
      });
      if (!r.ok()) return Err(r.status());
      fx.granted.emplace_back(r->id(), r->ttl());
      if (!fits) return QuotaExceeded();
      return Ok(std::move(r).value());
    }
    case internalpb::Request::kLeaseRevoke: {
      if (corrupt) return Err(errors::Corrupt());
      if (!denied.ok()) return Err(denied);
      const size_t revisions = batch.changes().size();
      auto r = InTxn(batch, [&](mvcc::WriteTxn& t) {
        return mvcc::ExecuteLeaseRevoke(t, req.lease_revoke());
      });
      if (!r.ok()) return Err(r.status());
      // The attached keys' deletions, counted as etcd's lessor deletes them: one transaction.
      if (batch.changes().size() > revisions) {
        d_.metrics->CountStoreTxn({0, 0, batch.changes().back().events.size()});
      }
      fx.revoked.push_back(req.lease_revoke().id());
      r->mutable_header()->set_revision(batch.pending_rev());
      return Ok(std::move(r).value());
    }
    case internalpb::Request::kLeaseCheckpoint: {
      for (const auto& c : req.lease_checkpoint().checkpoints()) {
        auto txn = batch.Begin();
        txn->mutable_leases().StageCheckpoint(batch.batch(), c.id(), c.remaining_ttl());
        batch.End(std::move(txn));
      }
      etcdserverpb::LeaseCheckpointResponse resp;
      resp.mutable_header()->set_revision(batch.pending_rev());
      return Ok(std::move(resp));
    }
    case internalpb::Request::kAlarm: {
      const auto& a = req.alarm();
      etcdserverpb::AlarmResponse resp;
      switch (a.action()) {
        case etcdserverpb::AlarmRequest::GET:
          for (auto& m : d_.alarms->Get(a.alarm())) *resp.add_alarms() = m;
          break;
        case etcdserverpb::AlarmRequest::ACTIVATE: {
          bool was = d_.alarms->Active(a.alarm());
          *resp.add_alarms() = d_.alarms->Activate(batch.batch(), a.memberid(), a.alarm());
          if (!was) {
            log::Warn("alarm raised", {log::F("alarm", etcdserverpb::AlarmType_Name(a.alarm())),
                                       log::Hex("from", a.memberid())});
          }
          break;
        }
        case etcdserverpb::AlarmRequest::DEACTIVATE: {
          d_.quota->Refresh();  // writes resume: judge them on the current size
          auto m = d_.alarms->Deactivate(batch.batch(), a.memberid(), a.alarm());
          if (m) {
            *resp.add_alarms() = *m;
            if (!d_.alarms->Active(a.alarm())) {
              log::Warn("alarm disarmed", {log::F("alarm", etcdserverpb::AlarmType_Name(a.alarm())),
                                           log::Hex("from", a.memberid())});
            }
          }
          break;
        }
        default:
          break;
      }
      resp.mutable_header()->set_revision(batch.pending_rev());
      return Ok(std::move(resp));
    }
    case internalpb::Request::kMemberAttributes: {
      const auto& a = req.member_attributes();
      if (auto m = d_.membership->Get(a.id())) {
        m->name = a.name();
        m->client_urls.assign(a.client_urls().begin(), a.client_urls().end());
        d_.membership->StageUpdate(batch.batch(), *m);
      }
      return Ok(etcdserverpb::MemberListResponse());
    }
    case internalpb::Request::kAuthEnable:
    case internalpb::Request::kAuthDisable:
    case internalpb::Request::kAuthenticate:
    case internalpb::Request::kUserAdd:
    case internalpb::Request::kUserDelete:
    case internalpb::Request::kUserChangePassword:
    case internalpb::Request::kUserGrantRole:
    case internalpb::Request::kUserRevokeRole:
    case internalpb::Request::kUserGet:
    case internalpb::Request::kUserList:
    case internalpb::Request::kRoleAdd:
    case internalpb::Request::kRoleDelete:
    case internalpb::Request::kRoleGrantPermission:
    case internalpb::Request::kRoleRevokePermission:
    case internalpb::Request::kRoleGet:
    case internalpb::Request::kRoleList:
      if (!denied.ok()) return Err(denied);
      return ApplyAuthRequest(batch, req, index);
    case internalpb::Request::OP_NOT_SET:
      break;
  }
  return Err(InvalidArgument("empty request"));
}

Status Applier::CheckPermission(mvcc::ApplyBatch& batch, const internalpb::Request& req) {
  if (!req.has_auth() || !d_.auth->Enabled()) return Status::Ok();
  const AuthInfo who{req.auth().username(), req.auth().revision()};
  const AuthStore& as = *d_.auth;
  // etcd's checkLeasePuts: a user may attach keys to a lease, or revoke it, only when it may
  // write every key already attached (revoking deletes them).
  auto lease_keys_writable = [&](int64_t lease) -> Status {
    if (lease == 0) return Status::Ok();
    ETCDW_ASSIGN_OR_RETURN(auto keys,
                           mvcc::LeaseTable::AttachedKeys(d_.kv->engine(), lease, &batch.batch()));
    for (const std::string& k : keys) ETCDW_RETURN_IF_ERROR(as.CheckPut(who, k));
    return Status::Ok();
  };
  switch (req.op_case()) {
    case internalpb::Request::kPut: {
      const auto& p = req.put();
      ETCDW_RETURN_IF_ERROR(as.CheckPut(who, p.key()));
      ETCDW_RETURN_IF_ERROR(lease_keys_writable(p.lease()));
      if (p.prev_kv()) return as.CheckRange(who, p.key(), {});
      return Status::Ok();
    }
    case internalpb::Request::kDeleteRange: {
      const auto& d = req.delete_range();
      ETCDW_RETURN_IF_ERROR(as.CheckDeleteRange(who, d.key(), d.range_end()));
      if (d.prev_kv()) return as.CheckRange(who, d.key(), d.range_end());
      return Status::Ok();
    }
    case internalpb::Request::kTxn:
      return as.CheckTxn(who, req.txn());
    case internalpb::Request::kLeaseRevoke:
      return lease_keys_writable(req.lease_revoke().id());
    case internalpb::Request::kUserGet:
      // A user may read its own roles.
      if (Status st = as.CheckAdmin(who); !st.ok() && req.user_get().name() != who.user) {
        return st;
      }
      return Status::Ok();
    case internalpb::Request::kRoleGet:
      // A user may read the roles granted to it.
      if (Status st = as.CheckAdmin(who);
          !st.ok() && !as.HasRole(who.user, req.role_get().role())) {
        return st;
      }
      return Status::Ok();
    case internalpb::Request::kAuthEnable:
    case internalpb::Request::kAuthDisable:
    case internalpb::Request::kUserAdd:
    case internalpb::Request::kUserDelete:
    case internalpb::Request::kUserChangePassword:
    case internalpb::Request::kUserGrantRole:
    case internalpb::Request::kUserRevokeRole:
    case internalpb::Request::kUserList:
    case internalpb::Request::kRoleAdd:
    case internalpb::Request::kRoleDelete:
    case internalpb::Request::kRoleGrantPermission:
    case internalpb::Request::kRoleRevokePermission:
    case internalpb::Request::kRoleList:
      return as.CheckAdmin(who);
    default:
      return Status::Ok();
  }
}

ApplyResult Applier::ApplyAuthRequest(mvcc::ApplyBatch& batch, const internalpb::Request& req,
                                      uint64_t index) {
  AuthStore& as = *d_.auth;
  storage::Batch& b = batch.batch();
  // Every answer carries the store's revision, as etcd's auth answers do.
  auto answer = [&](Status st, auto resp) -> ApplyResult {
    if (!st.ok()) return Err(std::move(st));
    resp.mutable_header()->set_revision(batch.pending_rev());
    return Ok(std::move(resp));
  };
  switch (req.op_case()) {
    case internalpb::Request::kAuthEnable:
      return answer(as.StageEnable(b), etcdserverpb::AuthEnableResponse());
    case internalpb::Request::kAuthDisable:
      if (as.StageDisable(b)) d_.tokens->Clear();
      return answer(Status::Ok(), etcdserverpb::AuthDisableResponse());
    case internalpb::Request::kAuthenticate: {
      const auto& a = req.authenticate();
      if (Status st = as.CheckAuthenticate(a.name()); !st.ok()) return Err(st);
      auto token = d_.tokens->Assign(a.simple_token(), index, a.name(), as.Revision());
      if (!token.ok()) return Err(token.status());
      etcdserverpb::AuthenticateResponse resp;
      resp.set_token(std::move(*token));
      return answer(Status::Ok(), std::move(resp));
    }
    case internalpb::Request::kUserAdd:
      return answer(as.StageUserAdd(b, req.user_add()), etcdserverpb::AuthUserAddResponse());
    case internalpb::Request::kUserDelete: {
      Status st = as.StageUserDelete(b, req.user_delete().name());
      if (st.ok()) d_.tokens->InvalidateUser(req.user_delete().name());
      return answer(st, etcdserverpb::AuthUserDeleteResponse());
    }
    case internalpb::Request::kUserChangePassword: {
      const auto& r = req.user_change_password();
      Status st = as.StageUserChangePassword(b, r.name(), r.hashedpassword());
      if (st.ok()) d_.tokens->InvalidateUser(r.name());
      return answer(st, etcdserverpb::AuthUserChangePasswordResponse());
    }
    case internalpb::Request::kUserGrantRole:
      return answer(
          as.StageUserGrantRole(b, req.user_grant_role().user(), req.user_grant_role().role()),
          etcdserverpb::AuthUserGrantRoleResponse());
    case internalpb::Request::kUserRevokeRole:
      return answer(
          as.StageUserRevokeRole(b, req.user_revoke_role().name(), req.user_revoke_role().role()),
          etcdserverpb::AuthUserRevokeRoleResponse());
    case internalpb::Request::kUserGet: {
      auto roles = as.UserRoles(req.user_get().name());
      if (!roles.ok()) return Err(roles.status());
      etcdserverpb::AuthUserGetResponse resp;
      for (auto& r : *roles) resp.add_roles(std::move(r));
      return answer(Status::Ok(), std::move(resp));
    }
    case internalpb::Request::kUserList: {
      etcdserverpb::AuthUserListResponse resp;
      for (auto& u : as.UserNames()) resp.add_users(std::move(u));
      return answer(Status::Ok(), std::move(resp));
    }
    case internalpb::Request::kRoleAdd:
      return answer(as.StageRoleAdd(b, req.role_add().name()), etcdserverpb::AuthRoleAddResponse());
    case internalpb::Request::kRoleDelete:
      return answer(as.StageRoleDelete(b, req.role_delete().role()),
                    etcdserverpb::AuthRoleDeleteResponse());
    case internalpb::Request::kRoleGrantPermission:
      return answer(as.StageRoleGrantPermission(b, req.role_grant_permission().name(),
                                                req.role_grant_permission().perm()),
                    etcdserverpb::AuthRoleGrantPermissionResponse());
    case internalpb::Request::kRoleRevokePermission: {
      const auto& r = req.role_revoke_permission();
      return answer(as.StageRoleRevokePermission(b, r.role(), r.key(), r.range_end()),
                    etcdserverpb::AuthRoleRevokePermissionResponse());
    }
    case internalpb::Request::kRoleGet: {
      auto perms = as.RolePermissions(req.role_get().role());
      if (!perms.ok()) return Err(perms.status());
      etcdserverpb::AuthRoleGetResponse resp;
      for (auto& p : *perms) *resp.add_perm() = std::move(p);
      return answer(Status::Ok(), std::move(resp));
    }
    case internalpb::Request::kRoleList: {
      etcdserverpb::AuthRoleListResponse resp;
      for (auto& r : as.RoleNames()) resp.add_roles(std::move(r));
      return answer(Status::Ok(), std::move(resp));
    }
    default:
      return Err(InvalidArgument("not an auth request"));
  }
}

// etcd allows at most one learner at a time.
constexpr size_t kMaxLearners = 1;

ApplyResult Applier::ApplyConfChange(mvcc::ApplyBatch& batch, raftpb::ConfChange& cc) {
  cluster::Membership& ms = *d_.membership;
  const uint64_t id = cc.node_id();
  Status refused;
  std::optional<cluster::Member> proposed;
  if (!cc.context().empty()) proposed = cluster::Member::Parse(cc.context());
  auto existing = ms.Get(id);
  switch (cc.type()) {
    case raftpb::CONF_CHANGE_ADD_NODE:
    case raftpb::CONF_CHANGE_ADD_LEARNER_NODE: {
      const bool learner = cc.type() == raftpb::CONF_CHANGE_ADD_LEARNER_NODE;
      if (cc.context().empty() && !learner) {
        // A promotion: ADD_NODE of an existing learner, without a member record.
        if (!existing) {
          refused = errors::MemberNotFound();
        } else if (!existing->is_learner) {
          refused = errors::MemberNotLearner();
        } else {
          existing->is_learner = false;
          ms.StageUpdate(batch.batch(), *existing);
        }
      } else if (ms.IsRemoved(id)) {
        refused = Status(Code::kFailedPrecondition, "membership: ID removed");
      } else if (existing) {
        refused = errors::MemberExist();
      } else if (!proposed || proposed->id != id) {
        refused = InvalidArgument("membership: conf change without a valid member record");
      } else if (ms.FindUsingAnyPeerUrl(proposed->peer_urls)) {
        refused = errors::PeerURLExist();
      } else if (learner && ms.LearnerCount() >= kMaxLearners) {
        refused = errors::TooManyLearners();
      } else {
        proposed->is_learner = learner;
        ms.StageAdd(batch.batch(), *proposed);
      }
      break;
    }
    case raftpb::CONF_CHANGE_REMOVE_NODE:
      if (ms.IsRemoved(id)) {
        refused = Status(Code::kFailedPrecondition, "membership: ID removed");
      } else if (!existing) {
        refused = errors::MemberNotFound();
      } else {
        ms.StageRemove(batch.batch(), id);
      }
      break;
    case raftpb::CONF_CHANGE_UPDATE_NODE:
      if (!existing) {
        refused = errors::MemberNotFound();
      } else if (!proposed) {
        refused = InvalidArgument("membership: conf change without a valid member record");
      } else if (ms.FindUsingAnyPeerUrl(proposed->peer_urls, id)) {
        refused = errors::PeerURLExist();
      } else {
        existing->peer_urls = proposed->peer_urls;
        ms.StageUpdate(batch.batch(), *existing);
      }
      break;
    default:
      refused = InvalidArgument("membership: unknown conf change type");
  }
  if (!refused.ok()) {
    cc.set_node_id(0);  // Raft keeps its configuration
    return Err(refused);
  }
  etcdserverpb::MemberListResponse resp;
  ms.Fill(&resp);
  return Ok(std::move(resp));
}

ApplyResult Applier::QuotaExceeded() {
  if (d_.on_quota_exceeded) d_.on_quota_exceeded();
  return Err(errors::NoSpace());
}

Status Applier::Apply(const std::vector<raftpb::Entry>& entries) {
  const auto start = std::chrono::steady_clock::now();
  auto batch = d_.kv->BeginApply();
  std::vector<std::pair<uint64_t, ApplyResult>> results;
  Effects fx;
  uint64_t last = d_.kv->ConsistentIndex();
  const uint64_t applied = last;
  std::vector<raftpb::ConfChange> conf_changes;
  std::vector<uint64_t> term_entries;  // terms of the empty entries that start a leader's term
  for (const auto& e : entries) {
    if (e.index() <= applied) continue;
    last = e.index();
    if (e.type() == raftpb::ENTRY_CONF_CHANGE) {
      raftpb::ConfChange& cc = conf_changes.emplace_back();
      if (!cc.ParseFromString(e.data())) {
        return DataLoss("log entry " + std::to_string(e.index()) +
                        " does not hold a valid conf change");
      }
      results.emplace_back(cc.id(), ApplyConfChange(*batch, cc));
      continue;
    }
    if (e.type() == raftpb::ENTRY_NORMAL && e.data().empty()) term_entries.push_back(e.term());
    if (e.type() != raftpb::ENTRY_NORMAL || e.data().empty()) continue;
    internalpb::Request req;
    if (!req.ParseFromString(e.data())) {
      return DataLoss("log entry " + std::to_string(e.index()) + " does not hold a valid request");
    }
    ApplyResult r = ApplyRequest(*batch, req, e.index(), fx);
    // DataLoss from the store stops the member; the CORRUPT alarm's answer to clients has the
    // same code but is an ordinary result (a client may raise that alarm).
    if (r.status.code() == Code::kDataLoss && r.status != errors::Corrupt()) {
      return r.status.WithContext("apply");
    }
    results.emplace_back(req.id(), std::move(r));
  }
  if (last == applied) return Status::Ok();
  ETCDW_RETURN_IF_ERROR(d_.kv->Commit(*batch, last));
  if (d_.on_conf_change) {
    for (const auto& cc : conf_changes) d_.on_conf_change(cc);
  }

  for (auto& [id, ttl] : fx.granted) d_.lessor->OnGranted(id, ttl);
  for (int64_t id : fx.revoked) d_.lessor->OnRevoked(id);
  if (d_.on_term_entry) {
    for (uint64_t term : term_entries) d_.on_term_entry(term);
  }
  if (batch->compaction()) d_.compactor->Schedule(*batch->compaction());
  if (!batch->changes().empty()) d_.hub->Notify(batch->changes(), d_.kv->Rev());
  {
    // Answers reach their event loops in one wake-up each: a loop woken by the first would
    // otherwise drain it and sleep again before the next (common/deferred_wakes.h).
    common::DeferredWakes wakes;
    for (auto& [id, r] : results) d_.waits->Trigger(id, std::move(r));
  }
  // etcd warns of an apply over 100 ms (and counts it): likely a slow disk.
  if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(100)) {
    d_.metrics->slow_applies.Add();
  }
  return Status::Ok();
}

}  // namespace etcdw::member
