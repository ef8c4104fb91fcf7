// The state machine: applies committed log entries, in order and exactly once, to the MVCC
// store, the lease table and the alarms, with one engine write per call that also records the
// applied (consistent) index. After the write it informs the lessor, the compactor and the
// watch hub, then delivers each result to the member that proposed it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "etcdw/cluster/membership.h"
#include "etcdw/internal.pb.h"
#include "etcdw/member/alarm_store.h"
#include "etcdw/member/apply_result.h"
#include "etcdw/member/auth_store.h"
#include "etcdw/member/auth_tokens.h"
#include "etcdw/member/lessor.h"
#include "etcdw/member/quota.h"
#include "etcdw/member/server_metrics.h"
#include "etcdw/member/watch_hub.h"
#include "etcdw/mvcc/compactor.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/raft.pb.h"

namespace etcdw::member {

struct ApplierDeps {
  mvcc::KvStore* kv = nullptr;
  mvcc::Compactor* compactor = nullptr;
  Lessor* lessor = nullptr;
  AlarmStore* alarms = nullptr;
  AuthStore* auth = nullptr;
  TokenProvider* tokens = nullptr;
  WatchHub* hub = nullptr;
  WaitRegistry* waits = nullptr;
  Quota* quota = nullptr;
  int64_t min_lease_ttl = 2;  // seconds
  cluster::Membership* membership = nullptr;
  ServerMetrics* metrics = nullptr;  // required: requests applied, slow applies
  // Called when an applied request exceeded the space quota. The alarm must be raised through
  // the log (a proposal), never by the apply itself: sizes differ between members.
  std::function<void()> on_quota_exceeded;
  // Called after the batch is committed, for each conf-change entry in order. A change the
  // membership refused has node_id 0 (Raft must not change its configuration for it).
  std::function<void(const raftpb::ConfChange&)> on_conf_change;
  // Called after the batch is committed (and its lease grants and revocations handed to the
  // lessor), with the term of each empty entry in it: the entry a leader appends when its term
  // starts. Once it is applied, so is every entry of the terms before (etcd promotes its lessor
  // there, so that a renewal cannot revive a lease whose revocation an earlier leader committed).
  std::function<void(uint64_t term)> on_term_entry;
};

class Applier {
 public:
  explicit Applier(ApplierDeps deps) : d_(deps) {}

  // Applies `entries` (ascending, contiguous); entries at or below the consistent index are
  // skipped, so replay after a crash is idempotent. A storage failure is returned and must
  // stop the member: the state machine cannot continue past an entry it failed to apply.
  Status Apply(const std::vector<raftpb::Entry>& entries);
  // The index of the last applied entry (published before results are delivered).
  uint64_t AppliedIndex() const { return d_.kv->ConsistentIndex(); }

 private:
  struct Effects {
    std::vector<std::pair<int64_t, int64_t>> granted;  // lease id, ttl
    std::vector<int64_t> revoked;
  };
  // `index`: the entry's (Authenticate names its token after it).
  ApplyResult ApplyRequest(mvcc::ApplyBatch& batch, const internalpb::Request& req, uint64_t index,
                           Effects& fx);
  // The permission a client's request needs (etcd's authApplierV3), judged against the auth
  // state as applied so far; OK for the member's own requests (no auth header).
  Status CheckPermission(mvcc::ApplyBatch& batch, const internalpb::Request& req);
  // User and role management, and Authenticate.
  ApplyResult ApplyAuthRequest(mvcc::ApplyBatch& batch, const internalpb::Request& req,
                               uint64_t index);
  // Validates a membership change against the current members and stages it; clears the
  // change's node_id when it is refused.
  ApplyResult ApplyConfChange(mvcc::ApplyBatch& batch, raftpb::ConfChange& cc);
  // The request was applied but exceeded the quota: etcd answers NoSpace.
  ApplyResult QuotaExceeded();

  ApplierDeps d_;
};

}  // namespace etcdw::member
