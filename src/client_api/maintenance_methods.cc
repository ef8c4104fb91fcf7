// etcdserverpb.Maintenance on the client API server: etcd's checks and headers (none for
// Alarm, Defragment and MoveLeader), the work done by EtcdServer.
#include <algorithm>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/etcd_errors.h"
#include "method_table.h"

namespace etcdw::client_api {

namespace {

using etcdserverpb::SnapshotRequest;
using etcdserverpb::SnapshotResponse;

// Snapshot streams a consistent copy as etcd does: the data in blobs of at most 32 KiB, each
// with remaining_bytes counting the data still to come, then one last message holding the
// 32-byte SHA-256 of the data (remaining_bytes 0). No message carries a header. The next blob
// is read once the previous one is written, so a slow client holds one blob in memory.
class SnapshotSender : public std::enable_shared_from_this<SnapshotSender> {
 public:
  static constexpr size_t kChunk = size_t{32} << 10;
  static constexpr size_t kShaSize = 32;

  explicit SnapshotSender(std::shared_ptr<StreamSink> sink) : sink_(std::move(sink)) {}

  // Runs on whichever thread opened the snapshot, then on the connection's loop.
  void Start(std::shared_ptr<mvcc::SnapshotFileStream> writer, uint64_t total) {
    writer_ = std::move(writer);
    if (total < kShaSize) return sink_->Finish(Status(Code::kInternal, "snapshot is too short"));
    data_total_ = total - kShaSize;
    SendNext();
  }

 private:
  // Reads from the writer until `pending_` holds `want` bytes or the stream is exhausted.
  Status Fill(size_t want) {
    while (pending_.size() < want && !exhausted_) {
      auto more = writer_->Next(pending_, kChunk);
      if (!more.ok()) return more.status();
      if (!more.value()) exhausted_ = true;
    }
    return Status::Ok();
  }

  void SendNext() {
    const bool data_phase = sent_ < data_total_;
    const size_t want = data_phase
                            ? static_cast<size_t>(std::min<uint64_t>(kChunk, data_total_ - sent_))
                            : kShaSize;
    if (Status st = Fill(data_phase ? want : SIZE_MAX); !st.ok()) return sink_->Finish(st);
    if (pending_.size() < want || (!data_phase && pending_.size() != kShaSize)) {
      return sink_->Finish(Status(Code::kInternal, "snapshot changed size while streaming"));
    }
    SnapshotResponse resp;
    resp.set_blob(pending_.substr(0, want));
    pending_.erase(0, want);
    if (data_phase) {
      sent_ += want;
      resp.set_remaining_bytes(data_total_ - sent_);
    } else {
      resp.set_remaining_bytes(0);
    }
    const bool last = !data_phase;
    sink_->Send(FrameMessage(resp), [self = shared_from_this(), last](bool ok) {
      if (!ok) return;  // the client went away
      if (last) return self->sink_->Finish(Status::Ok());
      self->SendNext();
    });
  }

  std::shared_ptr<StreamSink> sink_;
  std::shared_ptr<mvcc::SnapshotFileStream> writer_;
  uint64_t data_total_ = 0;  // bytes before the SHA-256 trailer
  uint64_t sent_ = 0;
  std::string pending_;  // produced by the writer, not sent yet
  bool exhausted_ = false;
};

// The stream of one Snapshot call: its request starts the copy.
class SnapshotCall final : public StreamCall {
 public:
  SnapshotCall(member::EtcdServer& s, std::shared_ptr<StreamSink> sink)
      : s_(s), sink_(std::move(sink)) {}

  void OnMessage(std::string_view payload) override {
    if (started_) return;
    started_ = true;
    SnapshotRequest req;
    if (Status st = ParseStreamMessage(payload, &req); !st.ok()) return sink_->Finish(st);
    auto sender = std::make_shared<SnapshotSender>(sink_);
    s_.OpenSnapshot(
        [sender, sink = sink_](
            Result<std::pair<std::shared_ptr<mvcc::SnapshotFileStream>, uint64_t>> r) mutable {
          if (!r.ok()) return sink->Finish(r.status());
          sender->Start(std::move(r->first), r->second);
        });
  }
  void OnHalfClose() override {
    if (!started_) {
      sink_->Finish(Status(Code::kInternal, "grpc: the client sent no request message"));
    }
  }

 private:
  member::EtcdServer& s_;
  std::shared_ptr<StreamSink> sink_;
  bool started_ = false;
};

}  // namespace

void AddMaintenanceMethods(MethodTable& t, member::EtcdServer& s) {
  using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)
  using H = MethodTable::Header;
  t.AddRefusedOnLearner<AlarmRequest, AlarmResponse>(s, "/etcdserverpb.Maintenance/Alarm",
                                                     &member::EtcdServer::Alarm, H::kNone,
                                                     Identity::kMaintenanceValidToken);
  // A learner answers Status.
  t.AddUnary<StatusRequest, StatusResponse>(
      s, "/etcdserverpb.Maintenance/Status",
      [&s](const StatusRequest&, member::Reply<StatusResponse> done) { done(s.StatusInfo()); },
      H::kAsAnswered);
  t.AddUnary<DefragmentRequest, DefragmentResponse>(
      s, "/etcdserverpb.Maintenance/Defragment",
      [&s](const CallContext& ctx, const DefragmentRequest&,
           member::Reply<DefragmentResponse> done) {
        if (s.IsLearner()) return done(errors::NotSupportedForLearner());
        if (Status st = CheckIdentity(s, ctx, Identity::kMaintenanceAdmin); !st.ok())
          return done(st);
        s.Defragment(std::move(done));
      },
      H::kNone);
  t.AddUnary<HashRequest, HashResponse>(
      s, "/etcdserverpb.Maintenance/Hash",
      [&s](const CallContext& ctx, const HashRequest&, member::Reply<HashResponse> done) {
        if (s.IsLearner()) return done(errors::NotSupportedForLearner());
        if (Status st = CheckIdentity(s, ctx, Identity::kMaintenanceAdmin); !st.ok())
          return done(st);
        s.Hash(std::move(done));
      });
  t.AddRefusedOnLearner<HashKVRequest, HashKVResponse>(s, "/etcdserverpb.Maintenance/HashKV",
                                                       &member::EtcdServer::HashKV, H::kFull,
                                                       Identity::kMaintenanceAdmin);
  t.AddRefusedOnLearner<MoveLeaderRequest, MoveLeaderResponse>(
      s, "/etcdserverpb.Maintenance/MoveLeader", &member::EtcdServer::MoveLeader, H::kNone);
  t.AddStream(s, "/etcdserverpb.Maintenance/Snapshot", MethodTable::StreamKind::kServer,
              [&s](const CallContext& ctx,
                   std::shared_ptr<StreamSink> sink) -> std::unique_ptr<StreamCall> {
                if (Status st = CheckIdentity(s, ctx, Identity::kMaintenanceAdmin); !st.ok()) {
                  sink->Finish(st);
                  return nullptr;
                }
                return std::make_unique<SnapshotCall>(s, std::move(sink));
              });
}

}  // namespace etcdw::client_api
