// etcdserverpb.Maintenance
#include <algorithm>
#include <cstdint>
#include <string>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcdw/common/etcd_errors.h"
#include "grpc_util.h"

namespace etcdw::server::grpcapi {

namespace {

using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)

// Streams a consistent snapshot as etcd does: the data in blobs of at most 32 KiB, each with
// remaining_bytes counting the data still to come, then one last message holding the 32-byte
// SHA-256 of the data (remaining_bytes 0). No message carries a header.
class SnapshotReactor final : public grpc::ServerWriteReactor<SnapshotResponse> {
 public:
  static constexpr size_t kChunk = 32 * 1024;
  static constexpr size_t kShaSize = 32;

  explicit SnapshotReactor(EtcdServer& s) {
    if (s.IsLearner()) {  // etcd refuses streams on learners
      Finish(ToGrpc(errors::NotSupportedForLearner()));
      return;
    }
    s.OpenSnapshot([this](Result<std::pair<std::shared_ptr<mvcc::SnapshotWriter>, uint64_t>> r) {
      if (!r.ok()) {
        Finish(ToGrpc(r.status()));
        return;
      }
      writer_ = r->first;
      if (r->second < kShaSize) {
        Finish(grpc::Status(grpc::StatusCode::INTERNAL, "snapshot is too short"));
        return;
      }
      data_total_ = r->second - kShaSize;
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
    SendNext();
  }

  void OnDone() override { delete this; }

 private:
  // Reads from the writer until `pending_` holds `want` bytes or the stream is exhausted.
  bool Fill(size_t want) {
    while (pending_.size() < want && !exhausted_) {
      auto more = writer_->Next(pending_, kChunk);
      if (!more.ok()) {
        Finish(ToGrpc(more.status()));
        return false;
      }
      if (!more.value()) exhausted_ = true;
    }
    return true;
  }

  void SendNext() {
    const bool data_phase = sent_ < data_total_;
    const size_t want = data_phase
                            ? static_cast<size_t>(std::min<uint64_t>(kChunk, data_total_ - sent_))
                            : kShaSize;
    if (!Fill(data_phase ? want : SIZE_MAX)) return;
    if (pending_.size() < want || (!data_phase && pending_.size() != kShaSize)) {
      Finish(grpc::Status(grpc::StatusCode::INTERNAL, "snapshot changed size while streaming"));
      return;
    }
    resp_.set_blob(pending_.substr(0, want));
    pending_.erase(0, want);
    if (data_phase) {
      sent_ += want;
      resp_.set_remaining_bytes(data_total_ - sent_);
    } else {
      resp_.set_remaining_bytes(0);
      done_ = true;
    }
    StartWrite(&resp_);
  }

  std::shared_ptr<mvcc::SnapshotWriter> writer_;
  uint64_t data_total_ = 0;  // bytes before the SHA-256 trailer
  uint64_t sent_ = 0;
  std::string pending_;  // produced by the writer, not sent yet
  bool exhausted_ = false;
  bool done_ = false;
  SnapshotResponse resp_;
};

class MaintenanceService final : public etcdserverpb::Maintenance::CallbackService {
 public:
  MaintenanceService(EtcdServer& s, CallTracker& calls) : s_(s), calls_(calls) {}

  grpc::ServerUnaryReactor* Alarm(grpc::CallbackServerContext* ctx, const AlarmRequest* req,
                                  AlarmResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.Alarm(*req,
             FinishWith(s_, calls_, reactor, resp, /*header=*/false));  // etcd sends no header here
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
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.Defragment(
        FinishWith(s_, calls_, reactor, resp, /*header=*/false));  // etcd sends no header here
    return reactor;
  }

  grpc::ServerUnaryReactor* Hash(grpc::CallbackServerContext* ctx, const HashRequest*,
                                 HashResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.Hash(FinishWith(s_, calls_, reactor, resp));
    return reactor;
  }

  grpc::ServerUnaryReactor* HashKV(grpc::CallbackServerContext* ctx, const HashKVRequest* req,
                                   HashKVResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!LearnerAllows(s_, reactor)) return reactor;
    s_.HashKV(*req, FinishWith(s_, calls_, reactor, resp));
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
    if (!LearnerAllows(s_, reactor)) return reactor;
    // etcd answers without a header.
    s_.MoveLeader(*req, FinishWith(s_, calls_, reactor, resp, /*header=*/false));
    return reactor;
  }

 private:
  EtcdServer& s_;
  CallTracker& calls_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewMaintenanceService(EtcdServer& server, CallTracker& calls) {
  return std::make_unique<MaintenanceService>(server, calls);
}

}  // namespace etcdw::server::grpcapi
