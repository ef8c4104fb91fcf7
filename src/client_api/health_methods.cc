// grpc.health.v1.Health on the client API server, as etcd registers gRPC's health service:
// the server as a whole (service "") is SERVING for as long as it serves; any other service is
// unknown. Like every other call, refused on a learner (etcd's interceptors refuse what a
// learner does not serve).
#include "etcdw/common/etcd_errors.h"
#include "grpc/health/v1/health.pb.h"
#include "method_table.h"

namespace etcdw::client_api {

namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// Watch: the status once (SERVING, or SERVICE_UNKNOWN for a service not reported), then
// nothing, since it never changes, until the client goes away.
class HealthWatchCall final : public StreamCall {
 public:
  explicit HealthWatchCall(std::shared_ptr<StreamSink> sink) : sink_(std::move(sink)) {}

  void OnMessage(std::string_view payload) override {
    if (started_) return;
    started_ = true;
    HealthCheckRequest req;
    if (Status st = ParseStreamMessage(payload, &req); !st.ok()) return sink_->Finish(st);
    HealthCheckResponse resp;
    resp.set_status(req.service().empty() ? HealthCheckResponse::SERVING
                                          : HealthCheckResponse::SERVICE_UNKNOWN);
    sink_->Send(FrameMessage(resp));
  }
  void OnHalfClose() override {
    if (!started_) {
      sink_->Finish(Status(Code::kInternal, "grpc: the client sent no request message"));
    }
  }

 private:
  std::shared_ptr<StreamSink> sink_;
  bool started_ = false;
};

}  // namespace

void AddHealthMethods(MethodTable& t, member::EtcdServer& s) {
  t.AddUnary<HealthCheckRequest, HealthCheckResponse>(
      s, "/grpc.health.v1.Health/Check",
      [&s](const HealthCheckRequest& r, member::Reply<HealthCheckResponse> done) {
        if (s.IsLearner()) return done(errors::NotSupportedForLearner());
        // grpc-go's health server: only the services given a status are known.
        if (!r.service().empty()) return done(Status(Code::kNotFound, "unknown service"));
        HealthCheckResponse resp;
        resp.set_status(HealthCheckResponse::SERVING);
        done(std::move(resp));
      });
  t.AddStream(s, "/grpc.health.v1.Health/Watch", MethodTable::StreamKind::kServer,
              [](std::shared_ptr<StreamSink> sink) {
                return std::make_unique<HealthWatchCall>(std::move(sink));
              });
}

}  // namespace etcdw::client_api
