// etcdserverpb.Watch on the client API server: one bidirectional stream carrying many
// watchers. The stream's logic lives in WatchHub/WatchStream; this file connects it to an
// HTTP/2 stream. A response counts as written once the transport took it (the client's
// flow-control window admitted it), so a client that reads slowly fills its stream's queue and
// its watchers fall back to catching up from history.
#include <absl/base/thread_annotations.h>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/member/watch_hub.h"
#include "method_table.h"

namespace etcdw::client_api {

namespace {

using etcdserverpb::WatchRequest;

// Where a WatchStream writes. It outlives the call while a write is in flight: the stream
// finishes its sink only once no write is, and the last thing it does with the sink is Finish.
class WatchOut final : public member::WatchSink {
 public:
  static std::shared_ptr<WatchOut> New(std::shared_ptr<StreamSink> out) {
    std::shared_ptr<WatchOut> s(new WatchOut(std::move(out)));
    s->self_ = s;
    return s;
  }
  void Attach(std::shared_ptr<member::WatchStream> stream) { stream_ = stream; }
  // Why the stream ends when it was not cancelled (a request that does not parse).
  void EndWith(Status st) {
    std::lock_guard lock(mu_);
    end_ = std::move(st);
  }

  void StartWrite(std::string wire) override {
    // The callback holds the stream until the write is done: it is told exactly once, and the
    // stream finishes this sink only after it.
    out_->Send(FrameBytes(wire), [stream = stream_.lock()](bool ok) {
      if (stream) stream->WriteDone(ok);
    });
  }
  void Finish() override {
    Status end(Code::kCanceled, "etcdserver: watch canceled");
    {
      std::lock_guard lock(mu_);
      if (end_) end = *end_;
    }
    out_->Finish(end);
    // Nothing touches this sink any more; it goes when its last holder lets go.
    std::shared_ptr<WatchOut> last = std::move(self_);
  }

 private:
  explicit WatchOut(std::shared_ptr<StreamSink> out) : out_(std::move(out)) {}
  std::shared_ptr<StreamSink> out_;
  std::weak_ptr<member::WatchStream> stream_;
  std::shared_ptr<WatchOut> self_;  // until Finish
  std::mutex mu_;
  std::optional<Status> end_ ABSL_GUARDED_BY(mu_);
};

class WatchCall final : public StreamCall {
 public:
  WatchCall(member::WatchHub& hub, std::shared_ptr<StreamSink> sink) : out_(WatchOut::New(sink)) {
    stream_ = hub.NewStream(out_.get());
    out_->Attach(stream_);
  }
  ~WatchCall() override { stream_->Close(); }

  void OnMessage(std::string_view payload) override {
    WatchRequest req;
    if (Status st = ParseStreamMessage(payload, &req); !st.ok()) {
      out_->EndWith(st);
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
  }
  // Like etcd, a client that closed its side still gets events until it cancels.
  void OnHalfClose() override {}
  void OnGone() override { stream_->Close(); }

 private:
  std::shared_ptr<WatchOut> out_;
  std::shared_ptr<member::WatchStream> stream_;
};

}  // namespace

void AddWatchMethods(MethodTable& t, member::EtcdServer& s) {
  t.AddStream(s, "/etcdserverpb.Watch/Watch", MethodTable::StreamKind::kBidi,
              [&s](std::shared_ptr<StreamSink> sink) {
                return std::make_unique<WatchCall>(s.watch_hub(), std::move(sink));
              });
}

}  // namespace etcdw::client_api
