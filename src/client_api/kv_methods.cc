// etcdserverpb.KV on the client API server: etcd's checks and headers, the work done by
// EtcdServer.
#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/etcd_errors.h"
#include "method_table.h"

namespace etcdw::client_api {

void AddKvMethods(MethodTable& t, member::EtcdServer& s) {
  using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)
  // A learner serves serializable ranges only.
  t.AddUnary<RangeRequest, RangeResponse>(
      s, "/etcdserverpb.KV/Range",
      [&s](const CallContext& ctx, const RangeRequest& r, member::Reply<RangeResponse> done) {
        if (!r.serializable() && s.IsLearner()) return done(errors::NotSupportedForLearner());
        auto who = CallerOf(s, ctx);
        if (!who.ok()) return done(who.status());
        s.Range(r, std::move(done), *who);
      });
  t.AddAsCaller<PutRequest, PutResponse>(s, "/etcdserverpb.KV/Put", &member::EtcdServer::Put);
  t.AddAsCaller<DeleteRangeRequest, DeleteRangeResponse>(s, "/etcdserverpb.KV/DeleteRange",
                                                         &member::EtcdServer::DeleteRange);
  t.AddAsCaller<TxnRequest, TxnResponse>(s, "/etcdserverpb.KV/Txn", &member::EtcdServer::Txn);
  t.AddAsCaller<CompactionRequest, CompactionResponse>(s, "/etcdserverpb.KV/Compact",
                                                       &member::EtcdServer::Compact);
}

}  // namespace etcdw::client_api
