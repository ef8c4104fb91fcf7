// etcdserverpb.Lease on the client API server: etcd's checks (learners refused, keepalives
// renewed one at a time in order), the work done by EtcdServer.
#include <absl/base/thread_annotations.h>

#include <deque>
#include <mutex>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/etcd_errors.h"
#include "method_table.h"

namespace etcdw::client_api {

namespace {

using etcdserverpb::LeaseKeepAliveRequest;
using etcdserverpb::LeaseKeepAliveResponse;

// LeaseKeepAlive: each request renews its lease and is answered with the TTL (0 if unknown),
// one at a time and in order, as etcd's loop of receive, renew, send.
class KeepAliveCall final : public StreamCall {
 public:
  KeepAliveCall(member::EtcdServer& s, std::shared_ptr<StreamSink> sink)
      : state_(std::make_shared<State>(s, std::move(sink))) {}

  void OnMessage(std::string_view payload) override {
    LeaseKeepAliveRequest req;
    if (Status st = ParseStreamMessage(payload, &req); !st.ok()) return state_->sink->Finish(st);
    std::unique_lock lock(state_->mu);
    state_->waiting.push_back(req.id());
    if (!state_->busy) State::RenewNext(state_, lock);
  }

  void OnHalfClose() override {
    std::lock_guard lock(state_->mu);
    state_->half_closed = true;
    if (!state_->busy) state_->sink->Finish(Status::Ok());
  }

 private:
  // Shared with the renewal in flight, which may answer on another thread.
  struct State {
    State(member::EtcdServer& s, std::shared_ptr<StreamSink> k) : server(s), sink(std::move(k)) {}
    member::EtcdServer& server;
    std::shared_ptr<StreamSink> sink;
    std::mutex mu;
    std::deque<int64_t> waiting ABSL_GUARDED_BY(mu);
    bool busy ABSL_GUARDED_BY(mu) = false;  // a renewal is in flight
    bool half_closed ABSL_GUARDED_BY(mu) = false;

    // Starts the first waiting renewal; `lock` holds mu and is released during the call.
    static void RenewNext(const std::shared_ptr<State>& self, std::unique_lock<std::mutex>& lock) {
      if (self->waiting.empty()) {
        self->busy = false;
        if (self->half_closed) self->sink->Finish(Status::Ok());
        return;
      }
      const int64_t id = self->waiting.front();
      self->waiting.pop_front();
      self->busy = true;
      lock.unlock();
      LeaseKeepAliveResponse resp;
      resp.set_id(id);
      // The header is taken before renewing, so a revocation at revision N is never reported
      // with a keepalive at a later revision.
      self->server.FillHeader(resp.mutable_header());
      self->server.LeaseRenew(id, [self, resp](Result<int64_t> ttl) mutable {
        if (!ttl.ok()) return self->sink->Finish(ttl.status());
        resp.set_ttl(ttl.value());
        self->sink->Send(FrameMessage(resp));
        std::unique_lock relock(self->mu);
        RenewNext(self, relock);
      });
      lock.lock();
    }
  };
  std::shared_ptr<State> state_;
};

}  // namespace

void AddLeaseMethods(MethodTable& t, member::EtcdServer& s) {
  using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)
  t.AddRefusedOnLearner<LeaseGrantRequest, LeaseGrantResponse>(
      s, "/etcdserverpb.Lease/LeaseGrant", &member::EtcdServer::LeaseGrant,
      MethodTable::Header::kFull, Identity::kValidToken);
  t.AddAsCaller<LeaseRevokeRequest, LeaseRevokeResponse>(s, "/etcdserverpb.Lease/LeaseRevoke",
                                                         &member::EtcdServer::LeaseRevoke);
  t.AddRefusedOnLearner<LeaseTimeToLiveRequest, LeaseTimeToLiveResponse>(
      s, "/etcdserverpb.Lease/LeaseTimeToLive", &member::EtcdServer::LeaseTimeToLive);
  t.AddUnary<LeaseLeasesRequest, LeaseLeasesResponse>(
      s, "/etcdserverpb.Lease/LeaseLeases",
      [&s](const LeaseLeasesRequest&, member::Reply<LeaseLeasesResponse> done) {
        if (s.IsLearner()) return done(errors::NotSupportedForLearner());
        done(s.LeaseLeases());
      });
  t.AddStream(s, "/etcdserverpb.Lease/LeaseKeepAlive", MethodTable::StreamKind::kBidi,
              [&s](std::shared_ptr<StreamSink> sink) {
                return std::make_unique<KeepAliveCall>(s, std::move(sink));
              });
}

namespace {

// A stream registered with the member's NoLeaderMonitor until it is gone.
class LeaderRequiredCall final : public StreamCall {
 public:
  LeaderRequiredCall(member::NoLeaderMonitor& monitor, std::unique_ptr<StreamCall> inner,
                     const std::shared_ptr<StreamSink>& sink)
      : monitor_(monitor), inner_(std::move(inner)) {
    // The monitor ends the stream from the ticker thread; the sink hands the end to the
    // stream's event loop, which then tells the call it is gone (OnGone).
    id_ = monitor_.Register([weak = std::weak_ptr<StreamSink>(sink)] {
      if (auto s = weak.lock()) s->Finish(errors::NoLeader());
    });
  }
  ~LeaderRequiredCall() override { monitor_.Unregister(id_); }
  void OnMessage(std::string_view payload) override { inner_->OnMessage(payload); }
  void OnHalfClose() override { inner_->OnHalfClose(); }
  void OnGone() override {
    monitor_.Unregister(id_);
    inner_->OnGone();
  }

 private:
  member::NoLeaderMonitor& monitor_;
  std::unique_ptr<StreamCall> inner_;
  member::NoLeaderMonitor::Id id_ = 0;
};

}  // namespace

std::unique_ptr<StreamCall> CancelOnLeaderLoss(member::EtcdServer& server,
                                               std::unique_ptr<StreamCall> call,
                                               const std::shared_ptr<StreamSink>& sink) {
  return std::make_unique<LeaderRequiredCall>(server.no_leader_monitor(), std::move(call), sink);
}

std::optional<Status> RefuseStream(member::EtcdServer& s, const CallContext& ctx) {
  if (s.IsLearner()) return errors::NotSupportedForLearner();
  if (ctx.require_leader && s.node().Leader() == 0) return errors::NoLeader();
  return std::nullopt;
}

}  // namespace etcdw::client_api
