// Leases as replicated state: which leases exist, their granted TTL, and which keys are attached
// to them. The records live in the Leases column (written through the apply batch); an
// in-memory index of lease records serves lookups from any thread. Expiry timing is not state
// machine data and lives in the server's lessor.
//
// Column layout: 'L' + be64(id) -> internalpb.LeaseRecord
//                'A' + be64(id) + key -> "" (key attached to lease)
#pragma once

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/storage/engine.h"

namespace etcdw::mvcc {

// etcd's upper bound on a lease TTL, in seconds.
inline constexpr int64_t kMaxLeaseTtl = 9'000'000'000;

struct LeaseInfo {
  int64_t id = 0;
  int64_t ttl = 0;            // granted TTL (seconds)
  int64_t remaining_ttl = 0;  // last checkpoint; 0 when none
};

class LeaseTable {
 public:
  // Loads every lease record from the engine.
  Status Load(const storage::Engine& engine);

  std::optional<LeaseInfo> Get(int64_t id) const;
  bool Exists(int64_t id) const;
  std::vector<LeaseInfo> List() const;
  size_t Size() const;

  // Keys attached to a lease, in key order, as of `batch` (or the database).
  static Result<std::vector<std::string>> AttachedKeys(const storage::Engine& engine, int64_t id,
                                                       storage::Batch* batch = nullptr);

  // Apply-thread mutations: update the in-memory index and stage the records.
  void StageGrant(storage::Batch& batch, const LeaseInfo& info);
  void StageRevoke(storage::Batch& batch, int64_t id, const std::vector<std::string>& keys);
  void StageCheckpoint(storage::Batch& batch, int64_t id, int64_t remaining_ttl);
  static void StageAttach(storage::Batch& batch, int64_t id, std::string_view key);
  static void StageDetach(storage::Batch& batch, int64_t id, std::string_view key);

  static std::string RecordKey(int64_t id);
  static std::string AttachmentPrefix(int64_t id);

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<int64_t, LeaseInfo> leases_ ABSL_GUARDED_BY(mu_);
};

}  // namespace etcdw::mvcc
