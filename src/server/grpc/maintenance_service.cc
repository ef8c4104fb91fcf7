// etcdserverpb.Maintenance
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcdw/common/etcd_errors.h"
#include "grpc_util.h"

namespace etcdw::server::grpcapi {

namespace {

using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)

// Streams a consistent snapshot in 32 KiB blobs; remaining_bytes counts what is still to come
// after each message, and the stream ends with the SHA-256 of everything before it.
class SnapshotReactor final : public grpc::ServerWriteReactor<SnapshotResponse> {
 public:
  static constexpr size_t kChunk = 32 * 1024;

  explicit SnapshotReactor(EtcdServer& s) : s_(s) {
    s_.OpenSnapshot([this](Result<std::pair<std::shared_ptr<mvcc::SnapshotWriter>, uint64_t>> r) {
      if (!r.ok()) {
        Finish(ToGrpc(r.status()));
        return;
      }
      writer_ = r->first;
      remaining_ = r->second;
      s_.FillHeader(resp_.mutable_header());
      SendNext();
    });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "etcdserver: request canceled"));
      return;
    }
    if (done_) {
      Finish(grpc::Status::OK);
      return;
    }
    resp_.clear_header();
    SendNext();
  }

  void OnDone() override { delete this; }

 private:
  void SendNext() {
    std::string* blob = resp_.mutable_blob();
    blob->clear();
    while (blob->size() < kChunk) {
      auto more = writer_->Next(*blob, kChunk);
      if (!more.ok()) {
        Finish(ToGrpc(more.status()));
        return;
      }
      if (!more.value()) break;
    }
    if (blob->size() > remaining_) {
      Finish(grpc::Status(grpc::StatusCode::INTERNAL, "snapshot grew while streaming"));
      return;
    }
    remaining_ -= blob->size();
    resp_.set_remaining_bytes(remaining_);
    done_ = remaining_ == 0;
    StartWrite(&resp_);
  }

  EtcdServer& s_;
  std::shared_ptr<mvcc::SnapshotWriter> writer_;
  uint64_t remaining_ = 0;
  bool done_ = false;
  SnapshotResponse resp_;
};

class MaintenanceService final : public etcdserverpb::Maintenance::CallbackService {
 public:
  explicit MaintenanceService(EtcdServer& s) : s_(s) {}

  grpc::ServerUnaryReactor* Alarm(grpc::CallbackServerContext* ctx, const AlarmRequest* req,
                                  AlarmResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    s_.Alarm(*req, FinishWith(s_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx, const StatusRequest*,
                                   StatusResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    *resp = s_.StatusInfo();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* Defragment(grpc::CallbackServerContext* ctx, const DefragmentRequest*,
                                       DefragmentResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    s_.Defragment(FinishWith(s_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* Hash(grpc::CallbackServerContext* ctx, const HashRequest*,
                                 HashResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    s_.Hash(FinishWith(s_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* HashKV(grpc::CallbackServerContext* ctx, const HashKVRequest* req,
                                   HashKVResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    s_.HashKV(*req, FinishWith(s_, reactor, resp));
    return reactor;
  }

  grpc::ServerWriteReactor<SnapshotResponse>* Snapshot(grpc::CallbackServerContext*,
                                                      const SnapshotRequest*) override {
    return new SnapshotReactor(s_);
  }

  grpc::ServerUnaryReactor* MoveLeader(grpc::CallbackServerContext* ctx,
                                       const MoveLeaderRequest* req,
                                       MoveLeaderResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!s_.node().IsLeader()) {
      reactor->Finish(ToGrpc(errors::NotLeader()));
      return reactor;
    }
    // With a single voting member the only valid transferee is this member, already leader.
    if (req->targetid() != s_.member_id()) {
      reactor->Finish(ToGrpc(errors::BadLeaderTransferee()));
      return reactor;
    }
    s_.FillHeader(resp->mutable_header());
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  EtcdServer& s_;
};

class ClusterService final : public etcdserverpb::Cluster::CallbackService {
 public:
  explicit ClusterService(EtcdServer& s) : s_(s) {}

  grpc::ServerUnaryReactor* MemberList(grpc::CallbackServerContext* ctx, const MemberListRequest*,
                                       MemberListResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    *resp = s_.MemberList();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  EtcdServer& s_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewMaintenanceService(EtcdServer& server) {
  return std::make_unique<MaintenanceService>(server);
}

std::unique_ptr<grpc::Service> NewClusterService(EtcdServer& server) {
  return std::make_unique<ClusterService>(server);
}

}  // namespace etcdw::server::grpcapi
