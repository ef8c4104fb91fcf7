// The etcd KV request semantics on top of the MVCC store: Range (sorting, filters, limits),
// Put (prev_kv, ignore_value, ignore_lease), DeleteRange, Txn (compares, nested transactions),
// lease grant and revoke, and the request checks etcd performs before proposing.
//
// Response headers carry only `revision` here; the server fills cluster, member and term.
#pragma once

#include <cstdint>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/status.h"
#include "etcdw/mvcc/kv_store.h"

namespace etcdw::mvcc {

// --- checks done before a request is proposed (etcd's v3rpc layer) ---------------------------
Status CheckRangeRequest(const etcdserverpb::RangeRequest& r);
Status CheckPutRequest(const etcdserverpb::PutRequest& r);
Status CheckDeleteRequest(const etcdserverpb::DeleteRangeRequest& r);
// Operation count (at most max_txn_ops at each level, the budget shrinking for nested
// transactions), empty keys, and overlapping writes ("duplicate key").
Status CheckTxnRequest(const etcdserverpb::TxnRequest& r, int64_t max_txn_ops);

// A lease grant's checks (etcd 3.4's lessor.Grant, made where the grant is applied): ID 0 is
// LeaseNotFound, then a TTL above kMaxLeaseTtl is LeaseTTLTooLarge; otherwise the TTL the lease
// gets, raised to min_ttl (so a TTL of 0 or below gets min_ttl). Whether the ID is taken
// (LeaseExist) depends on the store and is checked by ExecuteLeaseGrant.
Result<int64_t> CheckLeaseGrant(const etcdserverpb::LeaseGrantRequest& r, int64_t min_ttl);
// A compaction's checks (etcd 3.4's updateCompactRev) against the store's compaction revision
// (-1 before the first compaction, so that compacting at 0 is accepted once) and its current
// revision: a revision at or below the compaction revision is Compacted, one above the current
// revision FutureRev.
Status CheckCompaction(int64_t rev, int64_t compacted_rev, int64_t current_rev);

// True when every top-level operation is a Range (the transaction cannot write).
bool IsTxnReadOnly(const etcdserverpb::TxnRequest& r);
// True when every top-level operation is a serializable Range.
bool IsTxnSerializable(const etcdserverpb::TxnRequest& r);

// --- execution -------------------------------------------------------------------------------
Result<etcdserverpb::RangeResponse> ExecuteRange(const ReadView& view,
                                                 const etcdserverpb::RangeRequest& r);
// A read-only transaction (IsTxnReadOnly) on a view.
Result<etcdserverpb::TxnResponse> ExecuteReadTxn(const ReadView& view,
                                                 const etcdserverpb::TxnRequest& r);

Result<etcdserverpb::PutResponse> ExecutePut(WriteTxn& txn, const etcdserverpb::PutRequest& p);
Result<etcdserverpb::DeleteRangeResponse> ExecuteDeleteRange(
    WriteTxn& txn, const etcdserverpb::DeleteRangeRequest& r);
Result<etcdserverpb::TxnResponse> ExecuteTxn(WriteTxn& txn, const etcdserverpb::TxnRequest& r);

// Grants a lease (TTL raised to min_ttl); returns the response with the effective TTL.
Result<etcdserverpb::LeaseGrantResponse> ExecuteLeaseGrant(WriteTxn& txn,
                                                           const etcdserverpb::LeaseGrantRequest& r,
                                                           int64_t min_ttl);
// Revokes a lease, deleting its keys in this transaction (one revision).
Result<etcdserverpb::LeaseRevokeResponse> ExecuteLeaseRevoke(
    WriteTxn& txn, const etcdserverpb::LeaseRevokeRequest& r);

// Evaluates one compare against a view (etcd's applyCompare).
Result<bool> EvaluateCompare(const ReadView& view, const etcdserverpb::Compare& c);

}  // namespace etcdw::mvcc
