// The requests a member sends to the leader over the peer transport's calls (PeerTransport::
// Call), for what only the leader can answer: lease renewals and remaining TTLs (the leader runs
// lease expiry) and learner promotion (the leader knows how far a learner has caught up). etcd
// forwards the same requests over HTTP on its peer port.
//
// Each request and answer is the etcd API message of the same name, serialized; errors travel
// as the call's status, so etcd's error strings reach the client unchanged.
#pragma once

#include <cstdint>

namespace etcdw::member {

enum class PeerMethod : uint32_t {
  kLeaseRenew = 1,       // LeaseKeepAliveRequest -> LeaseKeepAliveResponse (ttl 0: not found)
  kLeaseTimeToLive = 2,  // LeaseTimeToLiveRequest -> LeaseTimeToLiveResponse
  kMemberPromote = 3,    // MemberPromoteRequest -> MemberPromoteResponse
};

}  // namespace etcdw::member
