// EtcdServer's KV API (etcd_server.h): reads served from the applied state, locally or after a
// ReadIndex round; writes proposed and answered once applied.
#include "etcdw/common/etcd_errors.h"
#include "etcdw/member/etcd_server.h"
#include "etcdw/member/raft_node.h"
#include "etcdw/mvcc/txn.h"

namespace etcdw::member {

Status EtcdServer::CheckRead(const Who& who,
                             const std::function<Status(const AuthInfo&)>& check) const {
  return who ? check(*who) : Status::Ok();
}

bool EtcdServer::AuthChangedSince(const Who& who) const {
  return who && who->revision != 0 && who->revision != auth_->Revision();
}

void EtcdServer::Range(const etcdserverpb::RangeRequest& r,
                       Reply<etcdserverpb::RangeResponse> reply, Who who) {
  if (Status st = mvcc::CheckRangeRequest(r); !st.ok()) return reply(st);
  auto serve = [this, &r, reply, who](Status st) {
    if (!st.ok()) return reply(st);
    st = CheckRead(
        who, [&](const AuthInfo& ai) { return auth_->CheckRange(ai, r.key(), r.range_end()); });
    if (!st.ok()) return reply(st);
    auto view = kv_->NewReadView();
    metrics_.CountRange();
    auto resp = mvcc::ExecuteRange(*view, r);
    if (AuthChangedSince(who)) return reply(errors::AuthOldRevision());
    reply(std::move(resp));
  };
  if (r.serializable() || node_->CanReadLocally() || unsafe_local_reads_) {
    return serve(Status::Ok());
  }
  // Confirmed on the node's thread; the read itself runs on a read thread.
  node_->ReadIndex([this, serve](Status st) { reads_->Submit([serve, st] { serve(st); }); });
}

void EtcdServer::Put(const etcdserverpb::PutRequest& r, Reply<etcdserverpb::PutResponse> reply,
                     Who who) {
  if (OverQuota(Quota::Cost(r), [reply](Status st) { reply(std::move(st)); })) return;
  if (Status st = mvcc::CheckPutRequest(r); !st.ok()) return reply(st);
  internalpb::Request req;
  *req.mutable_put() = r;
  ProposeAs(std::move(req), who, std::move(reply));
}

void EtcdServer::DeleteRange(const etcdserverpb::DeleteRangeRequest& r,
                             Reply<etcdserverpb::DeleteRangeResponse> reply, Who who) {
  if (Status st = mvcc::CheckDeleteRequest(r); !st.ok()) return reply(st);
  internalpb::Request req;
  *req.mutable_delete_range() = r;
  ProposeAs(std::move(req), who, std::move(reply));
}

void EtcdServer::Txn(const etcdserverpb::TxnRequest& r, Reply<etcdserverpb::TxnResponse> reply,
                     Who who) {
  if (OverQuota(Quota::Cost(r), [reply](Status st) { reply(std::move(st)); })) return;
  if (Status st = mvcc::CheckTxnRequest(r, static_cast<int64_t>(cfg_.max_txn_ops)); !st.ok()) {
    return reply(st);
  }
  if (mvcc::IsTxnReadOnly(r)) {
    // Read-only transactions are not proposed: served like a Range.
    auto serve = [this, &r, reply, who](Status st) {
      if (!st.ok()) return reply(st);
      st = CheckRead(who, [&](const AuthInfo& ai) { return auth_->CheckTxn(ai, r); });
      if (!st.ok()) return reply(st);
      auto view = kv_->NewReadView();
      Result<etcdserverpb::TxnResponse> resp = mvcc::ExecuteReadTxn(*view, r);
      if (resp.ok()) metrics_.CountTxn(r, *resp, /*read_only=*/true);
      if (AuthChangedSince(who)) return reply(errors::AuthOldRevision());
      reply(std::move(resp));
    };
    if (mvcc::IsTxnSerializable(r) || node_->CanReadLocally()) return serve(Status::Ok());
    return node_->ReadIndex(
        [this, serve](Status st) { reads_->Submit([serve, st] { serve(st); }); });
  }
  internalpb::Request req;
  *req.mutable_txn() = r;
  ProposeAs(std::move(req), who, std::move(reply));
}

void EtcdServer::Compact(const etcdserverpb::CompactionRequest& r,
                         Reply<etcdserverpb::CompactionResponse> reply, Who who) {
  internalpb::Request req;
  *req.mutable_compaction() = r;
  if (who) {  // carried as etcd carries it; compaction needs no permission in etcd 3.4
    req.mutable_auth()->set_username(who->user);
    req.mutable_auth()->set_revision(who->revision);
  }
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

}  // namespace etcdw::member
