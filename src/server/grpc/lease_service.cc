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
  explicit KeepAliveReactor(EtcdServer& s) : s_(s) { StartRead(&req_); }

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
    auto ttl = s_.LeaseRenew(req_.id());
    if (!ttl.ok()) {
      Finish(ToGrpc(ttl.status()));
      return;
    }
    resp_.set_ttl(ttl.value());
    StartWrite(&resp_);
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
    s_.LeaseGrant(*req, FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* LeaseRevoke(grpc::CallbackServerContext* ctx,
                                        const LeaseRevokeRequest* req,
                                        LeaseRevokeResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    s_.LeaseRevoke(*req, FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerBidiReactor<LeaseKeepAliveRequest, LeaseKeepAliveResponse>* LeaseKeepAlive(
      grpc::CallbackServerContext*) override {
    return new KeepAliveReactor(s_);
  }

  grpc::ServerUnaryReactor* LeaseTimeToLive(grpc::CallbackServerContext* ctx,
                                            const LeaseTimeToLiveRequest* req,
                                            LeaseTimeToLiveResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    *resp = s_.LeaseTimeToLive(*req);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* LeaseLeases(grpc::CallbackServerContext* ctx, const LeaseLeasesRequest*,
                                        LeaseLeasesResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
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
