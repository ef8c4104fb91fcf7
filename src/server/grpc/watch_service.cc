// etcdserverpb.Watch: one bidirectional stream per client connection, carrying many watchers.
// The stream's logic lives in WatchHub/WatchStream; this file adapts it to a gRPC reactor.
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "grpc_util.h"

namespace etcdw::server::grpcapi {

namespace {

using etcdserverpb::WatchRequest;
using etcdserverpb::WatchResponse;

class WatchReactor final : public grpc::ServerBidiReactor<WatchRequest, WatchResponse> {
 public:
  WatchReactor(EtcdServer& server, const grpc::CallbackServerContext* ctx) : sink_(this) {
    if (auto refused = RefuseStream(server, ctx)) {
      Finish(ToGrpc(*refused));
      return;
    }
    stream_ = server.watch_hub().NewStream(&sink_);
    StartRead(&req_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the client closed its side: like etcd, keep delivering until it cancels
    switch (req_.request_union_case()) {
      case WatchRequest::kCreateRequest:
        stream_->Create(req_.create_request());
        break;
      case WatchRequest::kCancelRequest:
        stream_->Cancel(req_.cancel_request().watch_id());
        break;
      case WatchRequest::kProgressRequest:
        stream_->RequestProgress();
        break;
      case WatchRequest::REQUEST_UNION_NOT_SET:
        break;  // etcd ignores requests it does not understand
    }
    StartRead(&req_);
  }

  void OnWriteDone(bool ok) override { stream_->WriteDone(ok); }
  void OnCancel() override {
    if (stream_) stream_->Close();
  }
  void OnDone() override { delete this; }

 private:
  // Forwards the stream's writes to this reactor.
  class Sink final : public WatchSink {
   public:
    explicit Sink(WatchReactor* r) : r_(r) {}
    void StartWrite(const WatchResponse* resp) override { r_->StartWrite(resp); }
    void Finish() override {
      r_->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "etcdserver: watch canceled"));
    }

   private:
    WatchReactor* r_;
  };

  Sink sink_;
  std::shared_ptr<WatchStream> stream_;
  WatchRequest req_;
};

class WatchService final : public etcdserverpb::Watch::CallbackService {
 public:
  explicit WatchService(EtcdServer& s) : s_(s) {}
  grpc::ServerBidiReactor<WatchRequest, WatchResponse>* Watch(
      grpc::CallbackServerContext* ctx) override {
    return new WatchReactor(s_, ctx);
  }

 private:
  EtcdServer& s_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewWatchService(EtcdServer& server) {
  return std::make_unique<WatchService>(server);
}

}  // namespace etcdw::server::grpcapi
