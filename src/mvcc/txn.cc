#include "etcdw/mvcc/txn.h"

#include <algorithm>

#include "etcdw/common/etcd_errors.h"

namespace etcdw::mvcc {

using etcdserverpb::Compare;
using etcdserverpb::RangeRequest;
using etcdserverpb::RequestOp;
using etcdserverpb::TxnRequest;
using etcdserverpb::TxnResponse;

namespace {

template <typename Less>
void SortKvs(std::vector<mvccpb::KeyValue>& kvs, bool descend, Less less) {
  // Stable: equal elements keep key order, as etcd's sort does for small results.
  if (descend) {
    std::stable_sort(kvs.begin(), kvs.end(), [&](auto& a, auto& b) { return less(b, a); });
  } else {
    std::stable_sort(kvs.begin(), kvs.end(), less);
  }
}

}  // namespace

Result<etcdserverpb::RangeResponse> ExecuteRange(const ReadView& view, const RangeRequest& r) {
  RangeOptions ro;
  ro.limit = r.limit();
  ro.rev = r.revision();
  ro.count_only = r.count_only();
  // Values are dropped after sorting: etcd sorts keys_only results by their values too.
  const bool sort_by_value = r.sort_target() == RangeRequest::VALUE;
  ro.keys_only = r.keys_only() && !sort_by_value;
  const bool filtered = r.min_mod_revision() != 0 || r.max_mod_revision() != 0 ||
                        r.min_create_revision() != 0 || r.max_create_revision() != 0;
  if (r.sort_order() != RangeRequest::NONE || filtered) ro.limit = 0;  // sort/filter, then cut
  // One extra to learn whether there are more (INT64_MAX already means "all").
  if (ro.limit > 0 && ro.limit < INT64_MAX) ro.limit += 1;

  ETCDW_ASSIGN_OR_RETURN(RangeResult rr,
                         RangeKeys(view, KeyRange::FromRequest(r.key(), r.range_end()), ro));

  auto& kvs = rr.kvs;
  auto prune = [&kvs](auto drop) {
    kvs.erase(std::remove_if(kvs.begin(), kvs.end(), drop), kvs.end());
  };
  if (r.max_mod_revision() != 0)
    prune([&](auto& kv) { return kv.mod_revision() > r.max_mod_revision(); });
  if (r.min_mod_revision() != 0)
    prune([&](auto& kv) { return kv.mod_revision() < r.min_mod_revision(); });
  if (r.max_create_revision() != 0)
    prune([&](auto& kv) { return kv.create_revision() > r.max_create_revision(); });
  if (r.min_create_revision() != 0)
    prune([&](auto& kv) { return kv.create_revision() < r.min_create_revision(); });

  auto order = r.sort_order();
  if (r.sort_target() != RangeRequest::KEY && order == RangeRequest::NONE)
    order = RangeRequest::ASCEND;
  // An order etcd does not know (neither ASCEND nor DESCEND) fetches everything but sorts
  // nothing, as etcd does.
  if (order == RangeRequest::ASCEND || order == RangeRequest::DESCEND) {
    bool desc = order == RangeRequest::DESCEND;
    switch (r.sort_target()) {
      case RangeRequest::KEY:
        if (desc) std::reverse(kvs.begin(), kvs.end());  // results come in key order
        break;
      case RangeRequest::VERSION:
        SortKvs(kvs, desc, [](auto& a, auto& b) { return a.version() < b.version(); });
        break;
      case RangeRequest::CREATE:
        SortKvs(kvs, desc,
                [](auto& a, auto& b) { return a.create_revision() < b.create_revision(); });
        break;
      case RangeRequest::MOD:
        SortKvs(kvs, desc, [](auto& a, auto& b) { return a.mod_revision() < b.mod_revision(); });
        break;
      case RangeRequest::VALUE:
        SortKvs(kvs, desc, [](auto& a, auto& b) { return a.value() < b.value(); });
        break;
      default:
        break;
    }
  }

  etcdserverpb::RangeResponse resp;
  if (r.limit() > 0 && static_cast<int64_t>(kvs.size()) > r.limit()) {
    kvs.resize(static_cast<size_t>(r.limit()));
    resp.set_more(true);
  }
  resp.mutable_header()->set_revision(rr.rev);
  resp.set_count(rr.count);
  resp.mutable_kvs()->Reserve(static_cast<int>(kvs.size()));
  for (auto& kv : kvs) {
    if (r.keys_only()) kv.clear_value();
    *resp.add_kvs() = std::move(kv);
  }
  return resp;
}

// ---------------------------------------------------------------------------------------------
// Compares

namespace {

int CompareInt(int64_t a, int64_t b) { return a < b ? -1 : (a > b ? 1 : 0); }

bool CompareKv(const Compare& c, const mvccpb::KeyValue& kv) {
  int result = 0;
  switch (c.target()) {
    case Compare::VALUE: {
      const std::string& want =
          c.target_union_case() == Compare::kValue ? c.value() : std::string();
      int cmp = kv.value().compare(want);
      result = cmp < 0 ? -1 : (cmp > 0 ? 1 : 0);
      break;
    }
    case Compare::CREATE:
      result =
          CompareInt(kv.create_revision(),
                     c.target_union_case() == Compare::kCreateRevision ? c.create_revision() : 0);
      break;
    case Compare::MOD:
      result = CompareInt(kv.mod_revision(),
                          c.target_union_case() == Compare::kModRevision ? c.mod_revision() : 0);
      break;
    case Compare::VERSION:
      result =
          CompareInt(kv.version(), c.target_union_case() == Compare::kVersion ? c.version() : 0);
      break;
    case Compare::LEASE:
      result = CompareInt(kv.lease(), c.target_union_case() == Compare::kLease ? c.lease() : 0);
      break;
    default:
      break;
  }
  switch (c.result()) {
    case Compare::EQUAL:
      return result == 0;
    case Compare::NOT_EQUAL:
      return result != 0;
    case Compare::GREATER:
      return result > 0;
    case Compare::LESS:
      return result < 0;
    default:
      return true;
  }
}

}  // namespace

Result<bool> EvaluateCompare(const ReadView& view, const Compare& c) {
  auto rr = RangeKeys(view, KeyRange::FromRequest(c.key(), c.range_end()), {});
  if (!rr.ok()) {
    if (rr.status().code() == Code::kDataLoss) return rr.status();
    return false;  // etcd: a failing range makes the compare false
  }
  if (rr->kvs.empty()) {
    // A value cannot express "missing": comparing the value of an absent key always fails.
    if (c.target() == Compare::VALUE) return false;
    return CompareKv(c, mvccpb::KeyValue());
  }
  for (const auto& kv : rr->kvs) {
    if (!CompareKv(c, kv)) return false;
  }
  return true;
}

namespace {

// The branch taken at each transaction level, depth-first in execution order (etcd's txnPath).
Status CompareToPath(const ReadView& view, const TxnRequest& rt, std::vector<bool>& path) {
  bool ok = true;
  for (const auto& c : rt.compare()) {
    ETCDW_ASSIGN_OR_RETURN(bool r, EvaluateCompare(view, c));
    if (!r) {
      ok = false;
      break;
    }
  }
  path.push_back(ok);
  for (const auto& op : ok ? rt.success() : rt.failure()) {
    if (op.request_case() == RequestOp::kRequestTxn) {
      ETCDW_RETURN_IF_ERROR(CompareToPath(view, op.request_txn(), path));
    }
  }
  return Status::Ok();
}

// Validates the operations on the chosen path before anything is written (etcd's
// checkRequests): puts needing an existing key or lease, ranges at unservable revisions.
Status CheckPath(const ReadView& view, const TxnRequest& rt, const std::vector<bool>& path,
                 size_t& pos, bool check_puts) {
  bool ok = path[pos++];
  for (const auto& op : ok ? rt.success() : rt.failure()) {
    switch (op.request_case()) {
      case RequestOp::kRequestTxn:
        ETCDW_RETURN_IF_ERROR(CheckPath(view, op.request_txn(), path, pos, check_puts));
        break;
      case RequestOp::kRequestPut: {
        if (!check_puts) break;
        const auto& p = op.request_put();
        if (p.ignore_value() || p.ignore_lease()) {
          ETCDW_ASSIGN_OR_RETURN(RangeResult rr, RangeKeys(view, KeyRange::Single(p.key()), {}));
          if (rr.kvs.empty()) return errors::KeyNotFound();
        }
        if (p.lease() != 0 && !view.leases().Exists(p.lease())) return errors::LeaseNotFound();
        break;
      }
      case RequestOp::kRequestRange: {
        if (check_puts) break;
        int64_t rev = op.request_range().revision();
        if (rev == 0) break;
        if (rev > view.Rev()) return errors::FutureRev();
        if (rev < view.CompactRev()) return errors::Compacted();
        break;
      }
      default:
        break;
    }
  }
  return Status::Ok();
}

Status ApplyOps(WriteTxn* wtxn, const ReadView& view, const TxnRequest& rt,
                const std::vector<bool>& path, size_t& pos, TxnResponse& resp) {
  bool ok = path[pos++];
  resp.set_succeeded(ok);
  resp.mutable_header();  // nested responses carry an empty header, as etcd's do
  for (const auto& op : ok ? rt.success() : rt.failure()) {
    etcdserverpb::ResponseOp* out = resp.add_responses();
    switch (op.request_case()) {
      case RequestOp::kRequestRange: {
        ETCDW_ASSIGN_OR_RETURN(auto r, ExecuteRange(wtxn ? *wtxn : view, op.request_range()));
        *out->mutable_response_range() = std::move(r);
        break;
      }
      case RequestOp::kRequestPut: {
        ETCDW_ASSIGN_OR_RETURN(auto r, ExecutePut(*wtxn, op.request_put()));
        *out->mutable_response_put() = std::move(r);
        break;
      }
      case RequestOp::kRequestDeleteRange: {
        ETCDW_ASSIGN_OR_RETURN(auto r, ExecuteDeleteRange(*wtxn, op.request_delete_range()));
        *out->mutable_response_delete_range() = std::move(r);
        break;
      }
      case RequestOp::kRequestTxn:
        ETCDW_RETURN_IF_ERROR(
            ApplyOps(wtxn, view, op.request_txn(), path, pos, *out->mutable_response_txn()));
        break;
      case RequestOp::REQUEST_NOT_SET:
        break;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<TxnResponse> ExecuteReadTxn(const ReadView& view, const TxnRequest& rt) {
  std::vector<bool> path;
  ETCDW_RETURN_IF_ERROR(CompareToPath(view, rt, path));
  size_t pos = 0;
  ETCDW_RETURN_IF_ERROR(CheckPath(view, rt, path, pos, /*check_puts=*/false));
  TxnResponse resp;
  pos = 0;
  ETCDW_RETURN_IF_ERROR(ApplyOps(nullptr, view, rt, path, pos, resp));
  resp.mutable_header()->set_revision(view.Rev());
  return resp;
}

Result<TxnResponse> ExecuteTxn(WriteTxn& txn, const TxnRequest& rt) {
  std::vector<bool> path;
  ETCDW_RETURN_IF_ERROR(CompareToPath(txn, rt, path));
  size_t pos = 0;
  if (!IsTxnReadOnly(rt)) ETCDW_RETURN_IF_ERROR(CheckPath(txn, rt, path, pos, true));
  pos = 0;
  ETCDW_RETURN_IF_ERROR(CheckPath(txn, rt, path, pos, false));
  TxnResponse resp;
  pos = 0;
  ETCDW_RETURN_IF_ERROR(ApplyOps(&txn, txn, rt, path, pos, resp));
  resp.mutable_header()->set_revision(txn.Rev());
  return resp;
}

Result<etcdserverpb::PutResponse> ExecutePut(WriteTxn& txn, const etcdserverpb::PutRequest& p) {
  // Inside a transaction CheckPath has already checked the lease; a transaction cannot revoke
  // one, so checking again gives the same answer.
  if (p.lease() != 0 && !txn.leases().Exists(p.lease())) return errors::LeaseNotFound();
  // The index says what the put replaces; its value is read only when the request needs it
  // (watchers that want it read it when the event is sent).
  const std::optional<KeyMeta> prev = txn.Find(p.key());
  if ((p.ignore_value() || p.ignore_lease()) && !prev) return errors::KeyNotFound();
  std::optional<mvccpb::KeyValue> prev_kv;
  if (prev && (p.prev_kv() || p.ignore_value())) {
    ETCDW_ASSIGN_OR_RETURN(prev_kv, txn.Read(p.key(), *prev));
  }
  const int64_t lease = p.ignore_lease() ? prev->lease : p.lease();
  // ignore_value keeps the value: a copy, as prev_kv moves into the event.
  const std::string kept = p.ignore_value() ? prev_kv->value() : std::string();
  const std::string_view value = p.ignore_value() ? std::string_view(kept) : p.value();
  etcdserverpb::PutResponse resp;
  if (p.prev_kv() && prev_kv) *resp.mutable_prev_kv() = *prev_kv;
  txn.Put(p.key(), value, lease, prev, std::move(prev_kv));
  resp.mutable_header()->set_revision(txn.Rev());
  return resp;
}

Result<etcdserverpb::DeleteRangeResponse> ExecuteDeleteRange(
    WriteTxn& txn, const etcdserverpb::DeleteRangeRequest& r) {
  std::vector<mvccpb::KeyValue> deleted;
  ETCDW_ASSIGN_OR_RETURN(int64_t n, txn.DeleteRange(KeyRange::FromRequest(r.key(), r.range_end()),
                                                    r.prev_kv() ? &deleted : nullptr));
  etcdserverpb::DeleteRangeResponse resp;
  resp.set_deleted(n);
  for (auto& kv : deleted) *resp.add_prev_kvs() = std::move(kv);
  resp.mutable_header()->set_revision(txn.Rev());
  return resp;
}

Result<etcdserverpb::LeaseGrantResponse> ExecuteLeaseGrant(WriteTxn& txn,
                                                           const etcdserverpb::LeaseGrantRequest& r,
                                                           int64_t min_ttl) {
  ETCDW_ASSIGN_OR_RETURN(int64_t ttl, CheckLeaseGrant(r, min_ttl));
  if (txn.leases().Exists(r.id())) return errors::LeaseExist();
  LeaseInfo info{r.id(), ttl, 0};
  txn.mutable_leases().StageGrant(txn.batch(), info);
  etcdserverpb::LeaseGrantResponse resp;
  resp.set_id(info.id);
  resp.set_ttl(info.ttl);
  resp.mutable_header()->set_revision(txn.Rev());
  return resp;
}

Result<etcdserverpb::LeaseRevokeResponse> ExecuteLeaseRevoke(
    WriteTxn& txn, const etcdserverpb::LeaseRevokeRequest& r) {
  if (!txn.leases().Exists(r.id())) return errors::LeaseNotFound();
  ETCDW_ASSIGN_OR_RETURN(auto keys, LeaseTable::AttachedKeys(txn.engine(), r.id(), &txn.batch()));
  // Keys come in key order, so every member deletes them in the same order.
  for (const auto& k : keys) {
    ETCDW_RETURN_IF_ERROR(txn.DeleteRange(KeyRange::Single(k), nullptr).status());
  }
  txn.mutable_leases().StageRevoke(txn.batch(), r.id(), keys);
  etcdserverpb::LeaseRevokeResponse resp;
  resp.mutable_header()->set_revision(txn.Rev());
  return resp;
}

}  // namespace etcdw::mvcc
