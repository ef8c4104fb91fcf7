// etcdserverpb.Cluster: membership.
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "grpc_util.h"

namespace etcdw::server::grpcapi {

namespace {

using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)

// Cluster answers carry a header without revision, as etcd's.
template <typename Resp>
Reply<Resp> FinishCluster(EtcdServer& s, CallTracker& calls, grpc::ServerUnaryReactor* reactor,
                          Resp* out) {
  calls.Enter();
  return [&s, &calls, reactor, out](Result<Resp> r) {
    if (!r.ok()) {
      reactor->Finish(ToGrpc(r.status()));
    } else {
      *out = std::move(r).value();
      s.FillClusterHeader(out->mutable_header());
      reactor->Finish(grpc::Status::OK);
    }
    calls.Leave();
  };
}

class ClusterService final : public etcdserverpb::Cluster::CallbackService {
 public:
  ClusterService(EtcdServer& s, CallTracker& calls) : s_(s), calls_(calls) {}

  grpc::ServerUnaryReactor* MemberAdd(grpc::CallbackServerContext* ctx, const MemberAddRequest* req,
                                      MemberAddResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.MemberAdd(*req, FinishCluster(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* MemberRemove(grpc::CallbackServerContext* ctx,
                                         const MemberRemoveRequest* req,
                                         MemberRemoveResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.MemberRemove(*req, FinishCluster(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* MemberUpdate(grpc::CallbackServerContext* ctx,
                                         const MemberUpdateRequest* req,
                                         MemberUpdateResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.MemberUpdate(*req, FinishCluster(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* MemberList(grpc::CallbackServerContext* ctx,
                                       const MemberListRequest* req,
                                       MemberListResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.MemberList(*req, FinishCluster(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* MemberPromote(grpc::CallbackServerContext* ctx,
                                          const MemberPromoteRequest* req,
                                          MemberPromoteResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.MemberPromote(*req, FinishCluster(s_, calls_, reactor, resp));
    return reactor;
  }

 private:
  EtcdServer& s_;
  CallTracker& calls_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewClusterService(EtcdServer& server, CallTracker& calls) {
  return std::make_unique<ClusterService>(server, calls);
}

}  // namespace etcdw::server::grpcapi
