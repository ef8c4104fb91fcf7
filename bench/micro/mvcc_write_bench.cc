// MVCC writes as the applier performs them: an apply batch, one write transaction per request,
// and a commit (one unsynced engine write with the consistent index). The Raft log write that
// makes the request durable is measured separately (raft_log_bench.cc).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "etcdw/mvcc/txn.h"
#include "loaded_store.h"

namespace etcdw::bench {
namespace {

// Requests are built before timing and cycled through, so the loop measures only the store.
constexpr size_t kRequestRing = 4096;

// kRequestRing distinct keys of the key space in random order.
std::vector<int> DistinctRandomKeys(uint64_t seed) {
  std::vector<int> keys(kKeySpace);
  std::iota(keys.begin(), keys.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(keys.begin(), keys.end(), rng);
  keys.resize(kRequestRing);
  return keys;
}

// Puts of a 256-byte value on random existing keys, `per_batch` requests per apply batch (the
// applier puts every entry of one Ready into one batch: 1 when idle, more under load).
void BM_MvccPut(benchmark::State& state) {
  LoadedStore* s = WriteStore(state);
  if (s == nullptr) return;
  const int per_batch = static_cast<int>(state.range(0));
  std::vector<etcdserverpb::PutRequest> reqs;
  for (int k : DistinctRandomKeys(3)) {
    auto& p = reqs.emplace_back();
    p.set_key(KeyName(k));
    p.set_value(MakeValue(kValueBytes, static_cast<uint64_t>(k) + 7));
  }
  const int64_t rev_before = s->kv().Rev();
  size_t next = 0;
  for (auto _ : state) {
    auto batch = s->kv().BeginApply();
    bool ok = true;
    for (int i = 0; ok && i < per_batch; ++i) {
      auto txn = batch->Begin();
      auto r = mvcc::ExecutePut(*txn, reqs[next++ % kRequestRing]);
      ok = Check(state, r.status());
      batch->End(std::move(txn));
    }
    if (!ok || !Check(state, s->Commit(*batch))) break;
  }
  if (!state.error_occurred() && s->kv().Rev() != rev_before + state.iterations() * per_batch) {
    state.SkipWithError("the store's revision did not advance once per put");
  }
  state.SetItemsProcessed(state.iterations() * per_batch);
}
// Real time: RocksDB flushes and compacts on its own threads, and those costs count.
BENCHMARK(BM_MvccPut)->ArgName("per_batch")->Arg(1)->Arg(64)->UseRealTime();

// kube-apiserver's update: a transaction that compares the key's mod revision with the one it
// read, puts on success and reads the key on failure. Every compare here succeeds.
void BM_MvccTxnCompareAndPut(benchmark::State& state) {
  LoadedStore* s = WriteStore(state);
  if (s == nullptr) return;
  std::vector<etcdserverpb::TxnRequest> reqs;
  {
    auto view = s->kv().NewReadView();
    for (int k : DistinctRandomKeys(4)) {
      const std::string key = KeyName(k);
      etcdserverpb::RangeRequest get;
      get.set_key(key);
      auto cur = mvcc::ExecuteRange(*view, get);
      if (!Check(state, cur.status())) return;
      if (cur->kvs_size() != 1) {
        state.SkipWithError("a loaded key is missing");
        return;
      }
      auto& t = reqs.emplace_back();
      auto* c = t.add_compare();
      c->set_key(key);
      c->set_target(etcdserverpb::Compare::MOD);
      c->set_result(etcdserverpb::Compare::EQUAL);
      c->set_mod_revision(cur->kvs(0).mod_revision());
      auto* put = t.add_success()->mutable_request_put();
      put->set_key(key);
      put->set_value(MakeValue(kValueBytes, static_cast<uint64_t>(k) + 11));
      t.add_failure()->mutable_request_range()->set_key(key);
    }
  }
  size_t next = 0;
  for (auto _ : state) {
    etcdserverpb::TxnRequest& req = reqs[next++ % kRequestRing];
    auto batch = s->kv().BeginApply();
    auto txn = batch->Begin();
    auto r = mvcc::ExecuteTxn(*txn, req);
    batch->End(std::move(txn));
    if (!Check(state, r.status()) || !Check(state, s->Commit(*batch))) break;
    if (!r->succeeded()) {
      state.SkipWithError("the compare failed: the put was not measured");
      break;
    }
    // The next update of this key compares with the revision just written.
    req.mutable_compare(0)->set_mod_revision(r->header().revision());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MvccTxnCompareAndPut)->UseRealTime();

}  // namespace
}  // namespace etcdw::bench
