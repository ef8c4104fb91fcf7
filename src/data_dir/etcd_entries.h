// etcd 3.4's log entries and member records translated into ours, for the takeover of an etcd
// data directory (takeover.cc). Not a public interface.
//
// Normal entries (etcd's applyEntryNormal):
//   empty                               a leader's no-op -> ours, empty
//   InternalRaftRequest put, delete_range, txn, compaction, lease_grant, lease_revoke, alarm,
//                       lease_checkpoint -> internalpb.Request with the same operation and ID
//   InternalRaftRequest range           changes nothing -> an empty entry (the index stays)
//   etcd 3.5's cluster_member_attr_set  -> MemberAttributes
//   a v2 etcdserverpb.Request (the whole data, or InternalRaftRequest.v2): etcd 3.4's member
//       publication, a PUT of /0/members/<hex id>/attributes -> MemberAttributes; anything else
//       (the cluster version, the v2 API's keys, which our store does not keep) -> an empty
//       entry, counted
//   auth requests                       refused: FailedPrecondition (not replayed yet)
// etcd tells a v2 request from an InternalRaftRequest by trying the latter first; so do we.
// Conf changes: raftpb.ConfChange -> ours, the member JSON of its context into our member
// record; a promotion (context with "isPromote") into an ADD_NODE without a record, as ours.
#pragma once

#include <cstdint>
#include <string_view>

#include "etcd_wal.h"
#include "etcdw/cluster/membership.h"
#include "etcdw/common/status.h"
#include "etcdw/raft.pb.h"

namespace etcdw::data_dir::internal {

// What the translation found, for the takeover's log line and tests.
struct EtcdEntryStats {
  uint64_t requests = 0;           // translated into a request of ours
  uint64_t member_attributes = 0;  // member publications among them
  uint64_t conf_changes = 0;
  uint64_t empty = 0;          // no-ops of a new leader, and reads
  uint64_t skipped_v2 = 0;     // v2 requests other than member publications
  uint64_t skipped_other = 0;  // cluster version and downgrade records (etcd 3.5)
};

// One entry of etcd's log as an entry of ours, with the same index and term. DataLoss naming the
// index when the data does not decode; FailedPrecondition for an auth request.
Result<raftpb::Entry> TranslateEtcdEntry(const EtcdEntry& e, EtcdEntryStats& stats);

// etcd's membership.Member as JSON ({"id":…,"peerURLs":[…],"name":…,"clientURLs":[…],
// "isLearner":…}), as its backend's members bucket and conf changes hold it. DataLoss when it
// does not parse or has no ID.
Result<cluster::Member> ParseEtcdMemberJson(std::string_view json);

}  // namespace etcdw::data_dir::internal
