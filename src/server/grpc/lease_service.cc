// etcdserverpb.Lease
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "grpc_util.h"

namespace etcdw::server::grpcapi {

namespace {

using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)

// Keepalives: each request renews the lease and is answered with its TTL (0 if unknown).
class KeepAliveReactor final
    : public grpc::ServerBidiReactor<LeaseKeepAliveRequest, LeaseKeepAliveResponse> {
 public:
  KeepAliveReactor(EtcdServer& s, const grpc::CallbackServerContext* ctx) : s_(s) {
    if (auto refused = RefuseStream(s_, ctx)) {
      Finish(ToGrpc(*refused));
      return;
    }
    StartRead(&req_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);  // the client closed its side
      return;
    }
    resp_.Clear();
    resp_.set_id(req_.id());
    // The header is taken before renewing, so a revocation at revision N is never reported
    // with a keepalive at a later revision.
    s_.FillHeader(resp_.mutable_header());
    // Answered at once by the leader, after a round trip to it elsewhere (on a transport
    // thread); the next request is read only after this answer is written.
    s_.LeaseRenew(req_.id(), [this](Result<int64_t> ttl) {
      if (!ttl.ok()) {
        Finish(ToGrpc(ttl.status()));
        return;
      }
      resp_.set_ttl(ttl.value());
      StartWrite(&resp_);
    });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "etcdserver: request canceled"));
      return;
    }
    StartRead(&req_);
  }

  void OnDone() override { delete this; }

 private:
  EtcdServer& s_;
  LeaseKeepAliveRequest req_;
  LeaseKeepAliveResponse resp_;
};

class LeaseService final : public etcdserverpb::Lease::CallbackService {
 public:
  LeaseService(EtcdServer& s, CallTracker& calls) : s_(s), calls_(calls) {}

  grpc::ServerUnaryReactor* LeaseGrant(grpc::CallbackServerContext* ctx,
                                       const LeaseGrantRequest* req,
                                       LeaseGrantResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.LeaseGrant(*req, FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* LeaseRevoke(grpc::CallbackServerContext* ctx,
                                        const LeaseRevokeRequest* req,
                                        LeaseRevokeResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.LeaseRevoke(*req, FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerBidiReactor<LeaseKeepAliveRequest, LeaseKeepAliveResponse>* LeaseKeepAlive(
      grpc::CallbackServerContext* ctx) override {
    return new KeepAliveReactor(s_, ctx);
  }

  grpc::ServerUnaryReactor* LeaseTimeToLive(grpc::CallbackServerContext* ctx,
                                            const LeaseTimeToLiveRequest* req,
                                            LeaseTimeToLiveResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.LeaseTimeToLive(*req, FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* LeaseLeases(grpc::CallbackServerContext* ctx, const LeaseLeasesRequest*,
                                        LeaseLeasesResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    *resp = s_.LeaseLeases();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  EtcdServer& s_;
  CallTracker& calls_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewLeaseService(EtcdServer& server, CallTracker& calls) {
  return std::make_unique<LeaseService>(server, calls);
}

}  // namespace etcdw::server::grpcapi
