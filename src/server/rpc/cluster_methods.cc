// etcdserverpb.Cluster on the client API server: etcd's checks, the work done by EtcdServer;
// headers without a revision, as etcd's.
#include "etcd/etcdserverpb/rpc.pb.h"
#include "method_table.h"

namespace etcdw::server::rpc {

void AddClusterMethods(MethodTable& t, EtcdServer& s) {
  using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)
  constexpr auto kCluster = MethodTable::Header::kCluster;
  t.AddRefusedOnLearner<MemberAddRequest, MemberAddResponse>(s, "/etcdserverpb.Cluster/MemberAdd",
                                                             &EtcdServer::MemberAdd, kCluster);
  t.AddRefusedOnLearner<MemberRemoveRequest, MemberRemoveResponse>(
      s, "/etcdserverpb.Cluster/MemberRemove", &EtcdServer::MemberRemove, kCluster);
  t.AddRefusedOnLearner<MemberUpdateRequest, MemberUpdateResponse>(
      s, "/etcdserverpb.Cluster/MemberUpdate", &EtcdServer::MemberUpdate, kCluster);
  t.AddRefusedOnLearner<MemberListRequest, MemberListResponse>(
      s, "/etcdserverpb.Cluster/MemberList", &EtcdServer::MemberList, kCluster);
  t.AddRefusedOnLearner<MemberPromoteRequest, MemberPromoteResponse>(
      s, "/etcdserverpb.Cluster/MemberPromote", &EtcdServer::MemberPromote, kCluster);
}

}  // namespace etcdw::server::rpc
