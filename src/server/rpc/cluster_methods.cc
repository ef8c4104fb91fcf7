// etcdserverpb.Cluster on the native server: the same checks as the gRPC library's service
// (grpc/cluster_service.cc), the work done by EtcdServer; headers without a revision.
#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/etcd_errors.h"
#include "method_table.h"

namespace etcdw::server::rpc {

namespace {

// Adds Cluster method `name`, served by `call` unless this member is a learner.
template <typename Req, typename Resp>
void AddMember(MethodTable& t, EtcdServer& s, const char* name,
               void (EtcdServer::*call)(const Req&, Reply<Resp>)) {
  t.AddUnary<Req, Resp>(
      s, std::string("/etcdserverpb.Cluster/") + name,
      [&s, call](const Req& r, Reply<Resp> done) {
        if (s.IsLearner()) return done(errors::NotSupportedForLearner());
        (s.*call)(r, std::move(done));
      },
      MethodTable::Header::kCluster);
}

}  // namespace

void AddClusterMethods(MethodTable& t, EtcdServer& s) {
  using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)
  AddMember<MemberAddRequest, MemberAddResponse>(t, s, "MemberAdd", &EtcdServer::MemberAdd);
  AddMember<MemberRemoveRequest, MemberRemoveResponse>(t, s, "MemberRemove",
                                                       &EtcdServer::MemberRemove);
  AddMember<MemberUpdateRequest, MemberUpdateResponse>(t, s, "MemberUpdate",
                                                       &EtcdServer::MemberUpdate);
  AddMember<MemberListRequest, MemberListResponse>(t, s, "MemberList", &EtcdServer::MemberList);
  AddMember<MemberPromoteRequest, MemberPromoteResponse>(t, s, "MemberPromote",
                                                         &EtcdServer::MemberPromote);
}

}  // namespace etcdw::server::rpc
