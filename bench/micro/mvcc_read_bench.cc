// MVCC reads as the KV service serves them: a read view per request (the snapshot and revision
// a serializable Range pins), then ExecuteRange over the loaded key space.
#include <benchmark/benchmark.h>

#include <algorithm>
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

etcdserverpb::RangeRequest RangeOf(int first, int span, int64_t limit) {
  etcdserverpb::RangeRequest r;
  r.set_key(KeyName(first));
  if (span > 1) r.set_range_end(first + span >= kKeySpace ? KeySpaceEnd() : KeyName(first + span));
  r.set_limit(limit);
  return r;
}

// Range of one existing key, chosen at random.
void BM_MvccRangeOneKey(benchmark::State& state) {
  LoadedStore* s = ReadStore(state);
  if (s == nullptr) return;
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> pick(0, kKeySpace - 1);
  std::vector<etcdserverpb::RangeRequest> reqs;
  for (size_t i = 0; i < kRequestRing; ++i) reqs.push_back(RangeOf(pick(rng), 1, 0));
  size_t next = 0;
  for (auto _ : state) {
    auto view = s->kv().NewReadView();
    auto r = mvcc::ExecuteRange(*view, reqs[next++ % kRequestRing]);
    if (!Check(state, r.status())) break;
    if (r->kvs_size() != 1 || r->kvs(0).value().size() != kValueBytes) {
      state.SkipWithError("range of one key did not return it");
      break;
    }
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MvccRangeOneKey)->UseRealTime();

// Range of `span` consecutive keys starting at a random key, with a limit. etcd semantics: the
// response counts every key of the range, so the whole span is read even when `limit` cuts the
// keys returned (a paginated list pays for the rest of the range on every page).
void BM_MvccRangeLimit(benchmark::State& state) {
  LoadedStore* s = ReadStore(state);
  if (s == nullptr) return;
  const int span = static_cast<int>(state.range(0));
  const int64_t limit = state.range(1);
  const int want = static_cast<int>(std::min<int64_t>(span, limit));
  std::mt19937_64 rng(2);
  std::uniform_int_distribution<int> pick(0, kKeySpace - span);
  std::vector<etcdserverpb::RangeRequest> reqs;
  for (size_t i = 0; i < kRequestRing; ++i) reqs.push_back(RangeOf(pick(rng), span, limit));
  size_t next = 0;
  for (auto _ : state) {
    auto view = s->kv().NewReadView();
    auto r = mvcc::ExecuteRange(*view, reqs[next++ % kRequestRing]);
    if (!Check(state, r.status())) break;
    if (r->kvs_size() != want || r->count() != span || r->more() != (span > limit)) {
      state.SkipWithError("range returned the wrong number of keys");
      break;
    }
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * want);
}
BENCHMARK(BM_MvccRangeLimit)
    ->ArgNames({"span", "limit"})
    ->Args({1000, 1000})
    ->Args({1000, 100})
    // The first page of a list of the whole key space (kube-apiserver pages by 500).
    ->Args({kKeySpace, 500})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace etcdw::bench
