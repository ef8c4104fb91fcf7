// Request checks etcd performs in its gRPC layer before proposing (v3rpc/key.go).
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/mvcc/lease_table.h"
#include "etcdw/mvcc/txn.h"

namespace etcdw::mvcc {

using etcdserverpb::RequestOp;

Status CheckRangeRequest(const etcdserverpb::RangeRequest& r) {
  if (r.key().empty()) return errors::EmptyKey();
  return Status::Ok();
}

Status CheckPutRequest(const etcdserverpb::PutRequest& r) {
  if (r.key().empty()) return errors::EmptyKey();
  if (r.ignore_value() && !r.value().empty()) return errors::ValueProvided();
  if (r.ignore_lease() && r.lease() != 0) return errors::LeaseProvided();
  return Status::Ok();
}

Status CheckDeleteRequest(const etcdserverpb::DeleteRangeRequest& r) {
  if (r.key().empty()) return errors::EmptyKey();
  return Status::Ok();
}

namespace {

Status CheckTxnOps(const etcdserverpb::TxnRequest& r, int64_t max_txn_ops);

Status CheckRequestOp(const RequestOp& op, int64_t max_txn_ops) {
  switch (op.request_case()) {
    case RequestOp::kRequestRange:
      return CheckRangeRequest(op.request_range());
    case RequestOp::kRequestPut:
      return CheckPutRequest(op.request_put());
    case RequestOp::kRequestDeleteRange:
      return CheckDeleteRequest(op.request_delete_range());
    case RequestOp::kRequestTxn:
      return CheckTxnOps(op.request_txn(), max_txn_ops);
    case RequestOp::REQUEST_NOT_SET:
      break;
  }
  return errors::KeyNotFound();  // an empty operation
}

Status CheckTxnOps(const etcdserverpb::TxnRequest& r, int64_t max_txn_ops) {
  int64_t opc = std::max<int64_t>({r.compare_size(), r.success_size(), r.failure_size()});
  if (opc > max_txn_ops) return errors::TooManyOps();
  for (const auto& c : r.compare()) {
    if (c.key().empty()) return errors::EmptyKey();
  }
  for (const auto& op : r.success()) ETCDW_RETURN_IF_ERROR(CheckRequestOp(op, max_txn_ops - opc));
  for (const auto& op : r.failure()) ETCDW_RETURN_IF_ERROR(CheckRequestOp(op, max_txn_ops - opc));
  return Status::Ok();
}

// Half-open key interval [begin, end) for deletes; a single key k is [k, k+"\0").
struct Interval {
  std::string begin, end;
  bool ContainsPoint(const std::string& k) const { return begin <= k && k < end; }
};

struct IntervalSet {
  std::vector<Interval> ivs;
  bool Intersects(const std::string& k) const {
    return std::any_of(ivs.begin(), ivs.end(), [&](auto& iv) { return iv.ContainsPoint(k); });
  }
  void Union(const IntervalSet& o) { ivs.insert(ivs.end(), o.ivs.begin(), o.ivs.end()); }
};

// Puts and deletes of one level (and the levels below it) must not overlap; the two branches
// of a nested transaction may write the same key since only one of them runs.
Status CheckIntervals(const google::protobuf::RepeatedPtrField<RequestOp>& reqs,
                      std::set<std::string>* puts_out, IntervalSet* dels_out) {
  IntervalSet dels;
  for (const auto& req : reqs) {
    if (req.request_case() != RequestOp::kRequestDeleteRange) continue;
    const auto& d = req.request_delete_range();
    if (!d.range_end().empty()) {
      dels.ivs.push_back({d.key(), d.range_end()});
    } else {
      dels.ivs.push_back({d.key(), d.key() + std::string(1, '\0')});
    }
  }
  std::set<std::string> puts;
  for (const auto& req : reqs) {
    if (req.request_case() != RequestOp::kRequestTxn) continue;
    std::set<std::string> puts_then, puts_else;
    IntervalSet dels_then, dels_else;
    ETCDW_RETURN_IF_ERROR(CheckIntervals(req.request_txn().success(), &puts_then, &dels_then));
    ETCDW_RETURN_IF_ERROR(CheckIntervals(req.request_txn().failure(), &puts_else, &dels_else));
    for (const auto& k : puts_then) {
      if (puts.count(k) || dels.Intersects(k)) return errors::DuplicateKey();
      puts.insert(k);
    }
    for (const auto& k : puts_else) {
      if (puts.count(k) && !puts_then.count(k)) return errors::DuplicateKey();
      if (dels.Intersects(k)) return errors::DuplicateKey();
      puts.insert(k);
    }
    dels.Union(dels_then);
    dels.Union(dels_else);
  }
  for (const auto& req : reqs) {
    if (req.request_case() != RequestOp::kRequestPut) continue;
    const std::string& k = req.request_put().key();
    if (puts.count(k) || dels.Intersects(k)) return errors::DuplicateKey();
    puts.insert(k);
  }
  if (puts_out) *puts_out = std::move(puts);
  if (dels_out) *dels_out = std::move(dels);
  return Status::Ok();
}

}  // namespace

Status CheckTxnRequest(const etcdserverpb::TxnRequest& r, int64_t max_txn_ops) {
  ETCDW_RETURN_IF_ERROR(CheckTxnOps(r, max_txn_ops));
  // Overlaps are checked after the cheap checks to avoid quadratic work on invalid requests.
  ETCDW_RETURN_IF_ERROR(CheckIntervals(r.success(), nullptr, nullptr));
  ETCDW_RETURN_IF_ERROR(CheckIntervals(r.failure(), nullptr, nullptr));
  return Status::Ok();
}

Result<int64_t> CheckLeaseGrant(const etcdserverpb::LeaseGrantRequest& r, int64_t min_ttl) {
  if (r.id() == 0) return errors::LeaseNotFound();
  if (r.ttl() > kMaxLeaseTtl) return errors::LeaseTTLTooLarge();
  return std::max(r.ttl(), min_ttl);
}

Status CheckCompaction(int64_t rev, int64_t compacted_rev, int64_t current_rev) {
  if (rev <= compacted_rev) return errors::Compacted();
  if (rev > current_rev) return errors::FutureRev();
  return Status::Ok();
}

bool IsTxnReadOnly(const etcdserverpb::TxnRequest& r) {
  auto is_range = [](const RequestOp& op) { return op.request_case() == RequestOp::kRequestRange; };
  return std::all_of(r.success().begin(), r.success().end(), is_range) &&
         std::all_of(r.failure().begin(), r.failure().end(), is_range);
}

bool IsTxnSerializable(const etcdserverpb::TxnRequest& r) {
  auto ser = [](const RequestOp& op) {
    return op.request_case() == RequestOp::kRequestRange && op.request_range().serializable();
  };
  return std::all_of(r.success().begin(), r.success().end(), ser) &&
         std::all_of(r.failure().begin(), r.failure().end(), ser);
}

}  // namespace etcdw::mvcc
