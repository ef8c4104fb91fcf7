// EtcdServer's Lease API (etcd_server.h) that any member answers by proposing; renewals and
// remaining TTLs, which only the leader answers, are in etcd_server_leader_calls.cc.
#include "etcdw/member/etcd_server.h"

namespace etcdw::member {

void EtcdServer::LeaseGrant(const etcdserverpb::LeaseGrantRequest& r,
                            Reply<etcdserverpb::LeaseGrantResponse> reply) {
  if (OverQuota(Quota::Cost(r), [reply](Status st) { reply(std::move(st)); })) return;
  internalpb::Request req;
  *req.mutable_lease_grant() = r;
  while (req.lease_grant().id() == 0) {
    // The server picks a positive ID.
    req.mutable_lease_grant()->set_id(
        static_cast<int64_t>(++next_request_id_ & ((uint64_t{1} << 63) - 1)));
  }
  ProposeFor(std::move(req), std::move(reply));
}

void EtcdServer::LeaseRevoke(const etcdserverpb::LeaseRevokeRequest& r,
                             Reply<etcdserverpb::LeaseRevokeResponse> reply, Who who) {
  internalpb::Request req;
  *req.mutable_lease_revoke() = r;
  ProposeAs(std::move(req), who, std::move(reply));
}

etcdserverpb::LeaseLeasesResponse EtcdServer::LeaseLeases() {
  etcdserverpb::LeaseLeasesResponse resp;
  for (int64_t id : lessor_->IdsByExpiry()) resp.add_leases()->set_id(id);
  FillHeader(resp.mutable_header());
  return resp;
}

}  // namespace etcdw::member
