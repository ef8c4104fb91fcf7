// etcdserverpb.KV
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "grpc_util.h"

namespace etcdw::server::grpcapi {

namespace {

using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)

class KvService final : public KV::CallbackService {
 public:
  KvService(EtcdServer& s, CallTracker& calls) : s_(s), calls_(calls) {}

  grpc::ServerUnaryReactor* Range(grpc::CallbackServerContext* ctx, const RangeRequest* req,
                                  RangeResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!req->serializable() && !LearnerAllows(s_, reactor)) return reactor;
    s_.Range(*req, FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* ctx, const PutRequest* req,
                                PutResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.Put(*req, FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* DeleteRange(grpc::CallbackServerContext* ctx,
                                        const DeleteRangeRequest* req,
                                        DeleteRangeResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.DeleteRange(*req, FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* Txn(grpc::CallbackServerContext* ctx, const TxnRequest* req,
                                TxnResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.Txn(*req, FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* Compact(grpc::CallbackServerContext* ctx, const CompactionRequest* req,
                                    CompactionResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.Compact(*req, FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

 private:
  EtcdServer& s_;
  CallTracker& calls_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewKvService(EtcdServer& server, CallTracker& calls) {
  return std::make_unique<KvService>(server, calls);
}

}  // namespace etcdw::server::grpcapi
