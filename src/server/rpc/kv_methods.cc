// etcdserverpb.KV on the native server: the same checks as the gRPC library's service
// (grpc/kv_service.cc), the work done by EtcdServer.
#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/etcd_errors.h"
#include "method_table.h"

namespace etcdw::server::rpc {

void AddKvMethods(MethodTable& t, EtcdServer& s) {
  using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)
  // etcd refuses every request on a learner except Status and serializable ranges.
  t.AddUnary<RangeRequest, RangeResponse>(s, "/etcdserverpb.KV/Range",
                                          [&s](const RangeRequest& r, Reply<RangeResponse> done) {
                                            if (!r.serializable() && s.IsLearner())
                                              return done(errors::NotSupportedForLearner());
                                            s.Range(r, std::move(done));
                                          });
  t.AddUnary<PutRequest, PutResponse>(s, "/etcdserverpb.KV/Put",
                                      [&s](const PutRequest& r, Reply<PutResponse> done) {
                                        if (s.IsLearner())
                                          return done(errors::NotSupportedForLearner());
                                        s.Put(r, std::move(done));
                                      });
  t.AddUnary<DeleteRangeRequest, DeleteRangeResponse>(
      s, "/etcdserverpb.KV/DeleteRange",
      [&s](const DeleteRangeRequest& r, Reply<DeleteRangeResponse> done) {
        if (s.IsLearner()) return done(errors::NotSupportedForLearner());
        s.DeleteRange(r, std::move(done));
      });
  t.AddUnary<TxnRequest, TxnResponse>(s, "/etcdserverpb.KV/Txn",
                                      [&s](const TxnRequest& r, Reply<TxnResponse> done) {
                                        if (s.IsLearner())
                                          return done(errors::NotSupportedForLearner());
                                        s.Txn(r, std::move(done));
                                      });
  t.AddUnary<CompactionRequest, CompactionResponse>(
      s, "/etcdserverpb.KV/Compact",
      [&s](const CompactionRequest& r, Reply<CompactionResponse> done) {
        if (s.IsLearner()) return done(errors::NotSupportedForLearner());
        s.Compact(r, std::move(done));
      });
}

}  // namespace etcdw::server::rpc
