// etcdserverpb.Cluster on the client API server: etcd's checks, the work done by EtcdServer;
// headers without a revision, as etcd's.
#include "etcd/etcdserverpb/rpc.pb.h"
#include "method_table.h"

namespace etcdw::client_api {

void AddClusterMethods(MethodTable& t, member::EtcdServer& s) {
  using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)
  constexpr auto kCluster = MethodTable::Header::kCluster;
  t.AddRefusedOnLearner<MemberAddRequest, MemberAddResponse>(s, "/etcdserverpb.Cluster/MemberAdd",
                                                             &member::EtcdServer::MemberAdd,
                                                             kCluster, Identity::kAdmin);
  t.AddRefusedOnLearner<MemberRemoveRequest, MemberRemoveResponse>(
      s, "/etcdserverpb.Cluster/MemberRemove", &member::EtcdServer::MemberRemove, kCluster,
      Identity::kAdmin);
  t.AddRefusedOnLearner<MemberUpdateRequest, MemberUpdateResponse>(
      s, "/etcdserverpb.Cluster/MemberUpdate", &member::EtcdServer::MemberUpdate, kCluster,
      Identity::kAdmin);
  t.AddRefusedOnLearner<MemberListRequest, MemberListResponse>(
      s, "/etcdserverpb.Cluster/MemberList", &member::EtcdServer::MemberList, kCluster);
  t.AddRefusedOnLearner<MemberPromoteRequest, MemberPromoteResponse>(
      s, "/etcdserverpb.Cluster/MemberPromote", &member::EtcdServer::MemberPromote, kCluster,
      Identity::kAdmin);
}

}  // namespace etcdw::client_api
