// etcdserverpb.Watch on the client API server: one bidirectional stream carrying many
// watchers. The stream's logic lives in WatchHub/WatchStream; this file connects it to an
// HTTP/2 stream. A response counts as written once the transport took it (the client's
// flow-control window admitted it), so a client that reads slowly fills its stream's queue and
// its watchers fall back to catching up from history.
#include <absl/base/thread_annotations.h>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/etcd_errors.h"
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

// Why etcd 3.4 refuses to create a watcher (its isWatchPermitted): the text of the gRPC error,
// as Go prints it, in the answer's cancel_reason. Empty when the watch may be created.
std::string WatchRefusal(member::EtcdServer& s, const CallContext& ctx,
                         const etcdserverpb::WatchCreateRequest& req) {
  auto who = CallerOf(s, ctx);
  Status st = who.status();
  if (who.ok()) {
    // etcd checks the key it watches ("\0" for an empty key) and, for a watch of every key
    // from it (range end "\0"), that key alone.
    const std::string key = req.key().empty() ? std::string(1, '\0') : req.key();
    const std::string end = req.range_end() == std::string(1, '\0') ? "" : req.range_end();
    st = s.auth().CheckRange(*who, key, end);
  }
  if (st.ok()) return "";
  Status shown = errors::PermissionDenied();
  if (st == errors::InvalidAuthToken() || st == errors::AuthOldRevision() ||
      st == errors::UserEmpty()) {
    shown = st;
  }
  return std::string("rpc error: code = ") + CodeName(shown.code()) + " desc = " + shown.message();
}

class WatchCall final : public StreamCall {
 public:
  WatchCall(member::EtcdServer& s, const CallContext& ctx, std::shared_ptr<StreamSink> sink)
      : server_(s), ctx_(ctx), out_(WatchOut::New(sink)) {
    stream_ = s.watch_hub().NewStream(out_.get());
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
        if (std::string refused = WatchRefusal(server_, ctx_, req.create_request());
            !refused.empty()) {
          stream_->RefuseCreate(refused);
        } else {
          stream_->Create(req.create_request());
        }
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
  member::EtcdServer& server_;
  const CallContext ctx_;  // the stream's metadata: its token names who creates each watcher
  std::shared_ptr<WatchOut> out_;
  std::shared_ptr<member::WatchStream> stream_;
};

}  // namespace

void AddWatchMethods(MethodTable& t, member::EtcdServer& s) {
  t.AddStream(s, "/etcdserverpb.Watch/Watch", MethodTable::StreamKind::kBidi,
              [&s](const CallContext& ctx, std::shared_ptr<StreamSink> sink) {
                return std::make_unique<WatchCall>(s, ctx, std::move(sink));
              });
}

}  // namespace etcdw::client_api
