// etcdserverpb.Watch: one bidirectional stream per client connection, carrying many watchers.
// The stream's logic lives in WatchHub/WatchStream; this file adapts it to a gRPC reactor.
// The method is registered "raw" (messages as byte buffers): the hub hands over responses
// already serialized, built from event encodings shared by every watcher (watch_wire.h).
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "grpc_util.h"

namespace etcdw::server::grpcapi {

namespace {

using etcdserverpb::WatchRequest;

class WatchReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  WatchReactor(EtcdServer& server, const grpc::CallbackServerContext* ctx) : sink_(this) {
    if (auto refused = RefuseStream(server, ctx)) {
      Finish(ToGrpc(*refused));
      return;
    }
    stream_ = server.watch_hub().NewStream(&sink_);
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the client closed its side: like etcd, keep delivering until it cancels
    WatchRequest req;
    if (!grpc::SerializationTraits<WatchRequest>::Deserialize(&in_, &req).ok()) {
      // The stream ends with grpc-go's answer to a message that does not parse (etcd's).
      refusal_ = grpc::Status(grpc::StatusCode::INTERNAL,
                              "grpc: failed to unmarshal the received message");
      stream_->Close();
      return;
    }
    switch (req.request_union_case()) {
      case WatchRequest::kCreateRequest:
        stream_->Create(req.create_request());
        break;
      case WatchRequest::kCancelRequest:
        stream_->Cancel(req.cancel_request().watch_id());
        break;
      case WatchRequest::kProgressRequest:
        stream_->RequestProgress();
        break;
      case WatchRequest::REQUEST_UNION_NOT_SET:
        break;  // etcd ignores requests it does not understand
    }
    StartRead(&in_);
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
    void StartWrite(std::string wire) override {
      // The buffer takes the bytes over without copying them.
      auto* owned = new std::string(std::move(wire));
      grpc::Slice slice(
          owned->data(), owned->size(), [](void* p) { delete static_cast<std::string*>(p); },
          owned);
      out_ = grpc::ByteBuffer(&slice, 1);
      r_->StartWrite(&out_);
    }
    void Finish() override {
      r_->Finish(r_->refusal_
                     ? *r_->refusal_
                     : grpc::Status(grpc::StatusCode::CANCELLED, "etcdserver: watch canceled"));
    }

   private:
    WatchReactor* r_;
    grpc::ByteBuffer out_;  // the write in flight (one at a time)
  };

  Sink sink_;
  std::shared_ptr<WatchStream> stream_;
  grpc::ByteBuffer in_;
  std::optional<grpc::Status> refusal_;  // why the stream ends, when not cancelled
};

class WatchService final
    : public etcdserverpb::Watch::WithRawCallbackMethod_Watch<etcdserverpb::Watch::Service> {
 public:
  explicit WatchService(EtcdServer& s) : s_(s) {}
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Watch(
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
