// Differential tests of gRPC's health service on the client port, which etcd registers with
// the server's overall status ("") SERVING.
#include "diff_fixture.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace etcdw::testing {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

std::string Check(Member& m, const std::string& service) {
  auto stub = Health::NewStub(m.NewChannel());
  HealthCheckRequest req;
  req.set_service(service);
  HealthCheckResponse resp;
  grpc::Status st = stub->Check(Ctx().get(), req, &resp);
  return std::to_string(st.error_code()) + " " + st.error_message() + " " + resp.ShortDebugString();
}

// The first status a Watch stream sends.
std::string WatchFirst(Member& m, const std::string& service) {
  auto stub = Health::NewStub(m.NewChannel());
  HealthCheckRequest req;
  req.set_service(service);
  auto ctx = Ctx();
  auto reader = stub->Watch(ctx.get(), req);
  HealthCheckResponse resp;
  if (!reader->Read(&resp)) return "no message: " + reader->Finish().error_message();
  ctx->TryCancel();
  reader->Finish();
  return resp.ShortDebugString();
}

TEST_F(DiffTest, HealthServiceAnswersAsEtcds) {
  StartBoth();
  for (const std::string& service : {std::string(""), std::string("etcdserverpb.KV")}) {
    EXPECT_EQ(Check(etcd(), service), Check(ours(), service)) << "Check " << service;
    EXPECT_EQ(WatchFirst(etcd(), service), WatchFirst(ours(), service)) << "Watch " << service;
  }
  EXPECT_EQ(Check(ours(), ""), "0  status: SERVING");
}

}  // namespace
}  // namespace etcdw::testing
