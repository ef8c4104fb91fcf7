// Helpers for the MVCC tests: a store on an in-memory or on-disk engine, driven one request per
// apply batch the way the server's applier drives it, and request builders.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "etcdw/mvcc/kv_store.h"
#include "etcdw/mvcc/txn.h"
#include "etcdw/storage/engine.h"
#include "support/scratch_dir.h"

namespace etcdw::mvcc::testutil {

// A temporary directory for one test (support/scratch_dir.h).
class TempDir : public testsupport::ScratchDir {
 public:
  TempDir() : ScratchDir("mvcc-test") {}
};

inline etcdserverpb::PutRequest PutReq(const std::string& key, const std::string& value,
                                       int64_t lease = 0) {
  etcdserverpb::PutRequest p;
  p.set_key(key);
  p.set_value(value);
  p.set_lease(lease);
  return p;
}

inline etcdserverpb::RangeRequest RangeReq(const std::string& key, const std::string& end = "",
                                           int64_t rev = 0) {
  etcdserverpb::RangeRequest r;
  r.set_key(key);
  r.set_range_end(end);
  r.set_revision(rev);
  return r;
}

inline etcdserverpb::DeleteRangeRequest DeleteReq(const std::string& key,
                                                  const std::string& end = "") {
  etcdserverpb::DeleteRangeRequest d;
  d.set_key(key);
  d.set_range_end(end);
  return d;
}

inline etcdserverpb::RequestOp OpPut(const std::string& key, const std::string& value,
                                     int64_t lease = 0) {
  etcdserverpb::RequestOp op;
  *op.mutable_request_put() = PutReq(key, value, lease);
  return op;
}

inline etcdserverpb::RequestOp OpRange(const std::string& key, const std::string& end = "",
                                       int64_t rev = 0) {
  etcdserverpb::RequestOp op;
  *op.mutable_request_range() = RangeReq(key, end, rev);
  return op;
}

inline etcdserverpb::RequestOp OpDelete(const std::string& key, const std::string& end = "") {
  etcdserverpb::RequestOp op;
  *op.mutable_request_delete_range() = DeleteReq(key, end);
  return op;
}

inline etcdserverpb::RequestOp OpTxn(const etcdserverpb::TxnRequest& t) {
  etcdserverpb::RequestOp op;
  *op.mutable_request_txn() = t;
  return op;
}

// The keys of a range response, in response order.
inline std::vector<std::string> KeysOf(const etcdserverpb::RangeResponse& r) {
  std::vector<std::string> out;
  for (const auto& kv : r.kvs()) out.push_back(kv.key());
  return out;
}

// The version rc.events[i] replaced, as a prev_kv watcher gets it: its prev_kv, or the
// version at rc.unread_prev_rev(i) read from `store`; nullopt when the change created the key.
inline Result<std::optional<mvccpb::KeyValue>> ReplacedVersion(const KvStore& store,
                                                               const RevisionEvents& rc, size_t i) {
  const mvccpb::Event& ev = rc.events.at(i);
  if (ev.has_prev_kv()) return std::optional<mvccpb::KeyValue>(ev.prev_kv());
  const int64_t rev = rc.unread_prev_rev(i);
  if (rev == 0) return std::optional<mvccpb::KeyValue>();
  ETCDW_ASSIGN_OR_RETURN(mvccpb::KeyValue kv, store.ReadVersion(ev.kv().key(), rev));
  return std::optional<mvccpb::KeyValue>(std::move(kv));
}

// A store with helpers that apply one request per batch, as the server's applier does.
class Store {
 public:
  static std::unique_ptr<Store> InMemory() {
    storage::EngineOptions o;
    o.in_memory = true;
    return Open("/mem/mvcc", o);
  }
  static std::unique_ptr<Store> OnDisk(const std::string& path) { return Open(path, {}); }

  storage::Engine& engine() { return *engine_; }
  KvStore& kv() { return *kv_; }

  // Closes the store and the engine and opens them again (on-disk stores only).
  void Reopen() {
    kv_.reset();
    engine_.reset();
    auto e = storage::Engine::Open(path_, opts_);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
    auto kv = KvStore::Open(*engine_);
    ASSERT_TRUE(kv.ok()) << kv.status().ToString();
    kv_ = std::move(kv).value();
    index_ = kv_->ConsistentIndex();
  }

  // Runs `fn` in one write transaction of its own batch and commits the batch.
  template <typename Fn>
  auto Apply(Fn fn) {
    auto batch = kv_->BeginApply();
    auto txn = batch->Begin();
    auto r = fn(*txn);
    batch->End(std::move(txn));
    Status st = kv_->Commit(*batch, ++index_);
    EXPECT_TRUE(st.ok()) << st.ToString();
    last_events_ = batch->changes();
    return r;
  }

  Result<etcdserverpb::PutResponse> TryPut(const etcdserverpb::PutRequest& p) {
    return Apply([&](WriteTxn& t) { return ExecutePut(t, p); });
  }
  etcdserverpb::PutResponse Put(const std::string& key, const std::string& value,
                                int64_t lease = 0) {
    auto r = TryPut(PutReq(key, value, lease));
    EXPECT_TRUE(r.ok()) << key << ": " << r.status().ToString();
    return r.ok() ? r.value() : etcdserverpb::PutResponse();
  }
  etcdserverpb::DeleteRangeResponse Delete(const std::string& key, const std::string& end = "",
                                           bool prev_kv = false) {
    auto req = DeleteReq(key, end);
    req.set_prev_kv(prev_kv);
    auto r = Apply([&](WriteTxn& t) { return ExecuteDeleteRange(t, req); });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value() : etcdserverpb::DeleteRangeResponse();
  }
  Result<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& req) {
    return Apply([&](WriteTxn& t) { return ExecuteTxn(t, req); });
  }
  Result<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& req) {
    auto view = kv_->NewReadView();
    return ExecuteRange(*view, req);
  }
  // The keys a range answers with, or "error: <message>".
  std::vector<std::string> Keys(const std::string& key, const std::string& end = "",
                                int64_t rev = 0) {
    auto r = Range(RangeReq(key, end, rev));
    if (!r.ok()) return {"error: " + r.status().message()};
    return KeysOf(*r);
  }
  // The value of `key` at `rev`, "<none>" when missing, or "error: <message>".
  std::string Value(const std::string& key, int64_t rev = 0) {
    auto r = Range(RangeReq(key, "", rev));
    if (!r.ok()) return "error: " + r.status().message();
    return r->kvs_size() == 0 ? "<none>" : r->kvs(0).value();
  }
  Status Grant(int64_t id, int64_t ttl, int64_t min_ttl = 0) {
    etcdserverpb::LeaseGrantRequest g;
    g.set_id(id);
    g.set_ttl(ttl);
    return Apply([&](WriteTxn& t) { return ExecuteLeaseGrant(t, g, min_ttl); }).status();
  }
  Result<etcdserverpb::LeaseRevokeResponse> Revoke(int64_t id) {
    etcdserverpb::LeaseRevokeRequest r;
    r.set_id(id);
    return Apply([&](WriteTxn& t) { return ExecuteLeaseRevoke(t, r); });
  }
  // Applies a compaction request in its own batch (logical compaction only).
  Status Compact(int64_t rev) {
    auto batch = kv_->BeginApply();
    Status st = kv_->Compact(*batch, rev);
    Status c = kv_->Commit(*batch, ++index_);
    EXPECT_TRUE(c.ok()) << c.ToString();
    return st;
  }

  // The revision events of the last Apply.
  const std::vector<RevisionEvents>& last_events() const { return last_events_; }
  // Event `i` of the last Apply's revision `r` as a prev_kv watcher gets it: with the version
  // it replaced read back (ReplacedVersion) when the write did not read it.
  mvccpb::Event LastEventWithPrev(size_t r, size_t i) const {
    mvccpb::Event ev = last_events_.at(r).events.at(i);
    auto prev = ReplacedVersion(*kv_, last_events_[r], i);
    EXPECT_TRUE(prev.ok()) << prev.status().ToString();
    if (prev.ok() && *prev) *ev.mutable_prev_kv() = **prev;
    return ev;
  }
  uint64_t last_index() const { return index_; }

 private:
  static std::unique_ptr<Store> Open(const std::string& path, const storage::EngineOptions& o) {
    std::unique_ptr<Store> s(new Store());
    s->path_ = path;
    s->opts_ = o;
    auto e = storage::Engine::Open(path, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok()) return nullptr;
    s->engine_ = std::move(e).value();
    auto kv = KvStore::Open(*s->engine_);
    EXPECT_TRUE(kv.ok()) << kv.status().ToString();
    if (!kv.ok()) return nullptr;
    s->kv_ = std::move(kv).value();
    // Continue the consistent index where a reopened store left off.
    s->index_ = s->kv_->ConsistentIndex();
    return s;
  }
  Store() = default;

  std::string path_;
  storage::EngineOptions opts_;
  std::unique_ptr<storage::Engine> engine_;
  std::unique_ptr<KvStore> kv_;
  uint64_t index_ = 0;
  std::vector<RevisionEvents> last_events_;
};

}  // namespace etcdw::mvcc::testutil
