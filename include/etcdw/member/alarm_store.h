// Active alarms (NOSPACE, CORRUPT), replicated through the log and persisted in the Meta
// column, so an alarm raised before a restart is still active after it. Thread-safe: the apply
// thread changes them, any thread reads them.
#pragma once

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/status.h"
#include "etcdw/storage/engine.h"

namespace etcdw::member {

class AlarmStore {
 public:
  Status Load(const storage::Engine& engine);

  // Alarms of type `type` (NONE: all), ordered by member then type.
  std::vector<etcdserverpb::AlarmMember> Get(etcdserverpb::AlarmType type) const;
  bool Active(etcdserverpb::AlarmType type) const;

  // Apply-thread mutations, staged into `batch`. Activate returns the alarm (new or existing);
  // Deactivate returns it if it was active.
  etcdserverpb::AlarmMember Activate(storage::Batch& batch, uint64_t member,
                                     etcdserverpb::AlarmType type);
  std::optional<etcdserverpb::AlarmMember> Deactivate(storage::Batch& batch, uint64_t member,
                                                      etcdserverpb::AlarmType type);

 private:
  static std::string Key(uint64_t member, int type);
  mutable std::mutex mu_;
  std::set<std::pair<uint64_t, int>> alarms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace etcdw::member
