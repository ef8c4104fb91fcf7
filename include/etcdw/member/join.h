// Joining an existing cluster: a member started with initial-cluster-state "existing" and a fresh
// data directory learns the cluster's ID and members from the other members before it starts
// (etcd's GetClusterFromRemotePeers and ValidateClusterAndAssignIDs).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "etcdw/cluster/membership.h"
#include "etcdw/common/clock.h"
#include "etcdw/common/config.h"
#include "etcdw/common/status.h"

namespace etcdw::member {

struct JoinInfo {
  uint64_t cluster_id = 0;
  uint64_t local_id = 0;                 // the ID MemberAdd gave this member
  std::vector<cluster::Member> members;  // the cluster's members, this one included
};

// Asks the members of initial-cluster other than this one (cfg.name), at their peer URLs, for
// the cluster information; tries `attempts` rounds, `retry_delay` apart. As etcd, initial-cluster
// must list exactly the cluster's members (compared by peer URLs), and this member is the one
// whose peer URLs are initial-advertise-peer-urls. Errors say which check failed. The delays and
// each query's timeout (2 s) are measured on `clock`.
Result<JoinInfo> DiscoverCluster(const common::EtcdConfig& cfg, int attempts = 5,
                                 std::chrono::milliseconds retry_delay = std::chrono::seconds(1),
                                 const common::Clock& clock = common::SystemClock::Instance());

// The checks of DiscoverCluster on an answer (`remote`: the cluster's ID and members).
Result<JoinInfo> MatchClusterToConfig(const common::EtcdConfig& cfg, uint64_t cluster_id,
                                      std::vector<cluster::Member> remote);

}  // namespace etcdw::member
