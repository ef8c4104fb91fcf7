// Cluster membership as stored. The members are replicated state: they change only by applying
// Raft conf-change entries (and member-attribute requests), so every member derives the same
// list from the log. The Raft configuration is derived from it (voters and learners). This
// member's own identity (member ID, cluster ID) is local state, written once at bootstrap or
// join. Member and cluster IDs are derived as etcd derives them.
//
// The library (src/cluster/, include/etcdw/cluster/) owns these records and their meaning; the
// running member (member/) and the offline data-directory tools (data_dir/) both read them. It
// uses storage, common and proto only. Membership is thread-safe: the apply thread changes it,
// any thread reads it.
//
// Meta column records (storage/meta_records.h): kClusterId, kClusterMembers, kRemovedMembers
// (replicated); kLocalMemberId, kJoinMembers, kRestoredIdentity (this member's own).
#pragma once

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/config.h"
#include "etcdw/common/status.h"
#include "etcdw/raft.pb.h"
#include "etcdw/storage/engine.h"

namespace etcdw::cluster {

struct Member {
  uint64_t id = 0;
  std::string name;  // empty until the member has started and published it
  std::vector<std::string> peer_urls;
  std::vector<std::string> client_urls;
  bool is_learner = false;

  void ToProto(etcdserverpb::Member* out) const;
  static Member FromProto(const etcdserverpb::Member& m);
  std::string Serialize() const;  // as an internalpb.MemberRecord
  static std::optional<Member> Parse(std::string_view bytes);
};

// etcd's member ID: the first 8 bytes (big-endian) of SHA-1 over the sorted peer URLs
// concatenated, the cluster token, and for members added at runtime the Unix time.
uint64_t ComputeMemberId(std::vector<std::string> peer_urls, const std::string& token,
                         std::optional<int64_t> unix_time = std::nullopt);
// etcd's cluster ID: the first 8 bytes of SHA-1 over the sorted member IDs (8 bytes each).
uint64_t ComputeClusterId(std::vector<uint64_t> member_ids);
// The 16-hex-digit form etcd prints IDs in.
std::string IdToHex(uint64_t id);
// `urls` sorted: members are told apart by their set of peer URLs, in any order.
std::vector<std::string> SortedUrls(std::vector<std::string> urls);

// The members of a new cluster as initial-cluster describes them (IDs as etcd computes them);
// only this member's own client URLs are known.
std::vector<Member> InitialMembers(const common::EtcdConfig& cfg);

class Membership {
 public:
  Status Load(const storage::Engine& engine);

  uint64_t cluster_id() const;
  std::vector<Member> List() const;  // by ID
  std::optional<Member> Get(uint64_t id) const;
  bool IsRemoved(uint64_t id) const;
  std::vector<uint64_t> RemovedIds() const;  // ascending
  // The member whose peer URLs are exactly `urls` (any order).
  std::optional<Member> FindByPeerUrls(const std::vector<std::string>& urls) const;
  // The member (other than `except`) using any of `urls`.
  std::optional<Member> FindUsingAnyPeerUrl(const std::vector<std::string>& urls,
                                            uint64_t except = 0) const;
  raftpb::ConfState ConfState() const;
  size_t VoterCount() const;
  size_t LearnerCount() const;
  // Voters that have published their attributes (started).
  size_t StartedVoterCount() const;

  // Apply-thread changes, staged into the batch and visible at once to readers of this object.
  void StageClusterId(storage::Batch& b, uint64_t cluster_id);
  void StageAdd(storage::Batch& b, const Member& m);
  void StageRemove(storage::Batch& b, uint64_t id);
  void StageUpdate(storage::Batch& b, const Member& m);

  void Fill(etcdserverpb::MemberListResponse* resp) const;

 private:
  mutable std::mutex mu_;
  uint64_t cluster_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Member> members_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> removed_ ABSL_GUARDED_BY(mu_);
};

// This member's ID in the data directory, if it has one.
Result<std::optional<uint64_t>> LoadLocalMemberId(const storage::Engine& engine);
void StageLocalMemberId(storage::Batch& b, uint64_t id);
// The identity a data directory restored from a snapshot (RestoreDataDir) was made for. Its
// first start must bootstrap exactly this member of this cluster (EtcdServer::Open checks it
// and then removes the record): started otherwise, the restored state would be bootstrapped
// into another cluster or, joining one, have that cluster's log applied over it. Local record
// (meta::kRestoredIdentity), absent after the first start.
struct RestoredIdentity {
  uint64_t member_id = 0;
  uint64_t cluster_id = 0;
};
Result<std::optional<RestoredIdentity>> LoadRestoredIdentity(const storage::Engine& engine);
void StageRestoredIdentity(storage::Batch& b, const RestoredIdentity& id);
void StageClearRestoredIdentity(storage::Batch& b);

// The members a joining member learnt from the cluster (DiscoverCluster), kept until the log
// brings the replicated membership: the transport needs their URLs to answer the leader, also
// after a restart before the member has caught up. Empty for a member that bootstrapped.
Result<std::vector<Member>> LoadJoinMembers(const storage::Engine& engine);
void StageJoinMembers(storage::Batch& b, const std::vector<Member>& members);

}  // namespace etcdw::cluster
