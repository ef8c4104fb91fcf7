// Cluster membership: members, and the member and cluster IDs etcd derives deterministically
// from peer URLs and the cluster token (so a member keeps its ID across restarts and an
// etcd member and ours configured alike get the same IDs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/config.h"
#include "etcdw/common/status.h"
#include "etcdw/storage/engine.h"

namespace etcdw::server {

struct Member {
  uint64_t id = 0;
  std::string name;
  std::vector<std::string> peer_urls;
  std::vector<std::string> client_urls;
  bool is_learner = false;

  void ToProto(etcdserverpb::Member* out) const;
};

// etcd's NewMember ID: the first 8 bytes (big-endian) of SHA-1 over the sorted peer URLs
// concatenated, followed by the cluster token.
uint64_t ComputeMemberId(std::vector<std::string> peer_urls, const std::string& token);
// etcd's cluster ID: the first 8 bytes of SHA-1 over the sorted member IDs (8 bytes each).
uint64_t ComputeClusterId(std::vector<uint64_t> member_ids);

// Identity and membership as persisted in the Meta column at bootstrap.
struct ClusterState {
  uint64_t cluster_id = 0;
  uint64_t local_id = 0;
  std::vector<Member> members;

  const Member* Find(uint64_t id) const;
};

// Loads the persisted state, or bootstraps it from the configuration (initial-cluster,
// initial-cluster-token) on a fresh data directory and persists it.
Result<ClusterState> LoadOrBootstrapCluster(storage::Engine& engine, const common::EtcdConfig& cfg);

// The 16-hex-digit form etcd prints IDs in.
std::string IdToHex(uint64_t id);

}  // namespace etcdw::server
