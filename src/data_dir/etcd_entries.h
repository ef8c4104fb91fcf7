// etcd 3.4's log entries and member records translated into ours, for the takeover of an etcd
// data directory (takeover.cc). Not a public interface.
//
// Normal entries (etcd's applyEntryNormal):
//   empty                               a leader's no-op -> ours, empty
//   InternalRaftRequest put, delete_range, txn, compaction, lease_grant, lease_revoke, alarm,
//                       lease_checkpoint -> internalpb.Request with the same operation and ID
//   InternalRaftRequest auth_enable, auth_disable, auth_user_add, auth_user_delete,
//                       auth_user_change_password, auth_user_grant_role, auth_user_revoke_role,
//                       auth_role_add, auth_role_delete, auth_role_grant_permission,
//                       auth_role_revoke_permission -> internalpb.Request's auth operation of
//                       the same meaning; a password etcd 3.4 logged in plain is hashed here
//                       (bcrypt, as etcd hashed it when applying), etcd 3.5's hashedPassword is
//                       kept. Names that are not UTF-8 are refused (FailedPrecondition).
//   InternalRaftRequest range, authenticate, auth_user_get, auth_user_list, auth_role_get,
//                       auth_role_list: change nothing stored -> an empty entry (the index
//                       stays; simple tokens are not persisted, clients authenticate again)
//   etcd 3.5's cluster_member_attr_set  -> MemberAttributes
//   a v2 etcdserverpb.Request (the whole data, or InternalRaftRequest.v2): etcd 3.4's member
//       publication, a PUT of /0/members/<hex id>/attributes -> MemberAttributes; anything else
//       (the cluster version, the v2 API's keys, which our store does not keep) -> an empty
//       entry, counted
// Every request translated from an InternalRaftRequest carries its RequestHeader's user and auth
// revision as internalpb.Request.auth (an empty user, revision 0, without a header), so that our
// applier refuses what etcd 3.4's authApplierV3 refused.
// etcd tells a v2 request from an InternalRaftRequest by trying the latter first; so do we.
// Conf changes: raftpb.ConfChange -> ours, the member JSON of its context into our member
// record; a promotion (context with "isPromote") into an ADD_NODE without a record, as ours.
#pragma once

#include <cstdint>
#include <string_view>

#include "etcd_wal.h"
#include "etcdw/cluster/membership.h"
#include "etcdw/common/password_hash.h"
#include "etcdw/common/status.h"
#include "etcdw/raft.pb.h"

namespace etcdw::data_dir::internal {

// What the translation found, for the takeover's log line and tests.
struct EtcdEntryStats {
  uint64_t requests = 0;           // translated into a request of ours
  uint64_t auth_requests = 0;      // auth changes among them
  uint64_t member_attributes = 0;  // member publications among them
  uint64_t conf_changes = 0;
  uint64_t empty = 0;          // no-ops of a new leader, reads and tokens
  uint64_t skipped_v2 = 0;     // v2 requests other than member publications
  uint64_t skipped_other = 0;  // cluster version and downgrade records (etcd 3.5)
};

// One entry of etcd's log as an entry of ours, with the same index and term. Plain passwords are
// hashed at `bcrypt_cost` (tens of milliseconds each at etcd's default). DataLoss naming the
// index when the data does not decode; FailedPrecondition naming it for what our requests cannot
// hold (a name that is not UTF-8, a password with a NUL byte).
Result<raftpb::Entry> TranslateEtcdEntry(const EtcdEntry& e, EtcdEntryStats& stats,
                                         int bcrypt_cost = common::kDefaultBcryptCost);

// etcd's membership.Member as JSON ({"id":…,"peerURLs":[…],"name":…,"clientURLs":[…],
// "isLearner":…}), as its backend's members bucket and conf changes hold it. DataLoss when it
// does not parse or has no ID.
Result<cluster::Member> ParseEtcdMemberJson(std::string_view json);

}  // namespace etcdw::data_dir::internal
