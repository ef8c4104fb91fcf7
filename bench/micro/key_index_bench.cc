// Loading the key index at an open: rebuilt from the newest version of every key (a start after
// an unclean stop) against loaded from the copy a clean stop saves, and the save itself.
#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "etcdw/mvcc/key_index.h"
#include "etcdw/storage/engine.h"
#include "loaded_store.h"

namespace etcdw::bench {
namespace {

// Saves the store's key index (what a member does at a clean stop).
void BM_KeyIndexSave(benchmark::State& state) {
  LoadedStore* s = WriteStore(state);
  if (s == nullptr) return;
  for (auto _ : state) {
    if (!Check(state, s->kv().SaveKeyIndex())) break;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s->kv().key_index().size()));
}
BENCHMARK(BM_KeyIndexSave)->Unit(benchmark::kMillisecond)->UseRealTime();

// Loads the index of the key space: arg 0 rebuilds it from the keys, arg 1 loads the saved copy.
void BM_KeyIndexLoad(benchmark::State& state) {
  LoadedStore* s = WriteStore(state);
  if (s == nullptr) return;
  const bool saved = state.range(0) == 1;
  if (saved && !Check(state, s->kv().SaveKeyIndex())) return;
  const storage::Engine& engine = s->kv().engine();
  const int64_t rev = s->kv().Rev();
  for (auto _ : state) {
    mvcc::KeyIndex index;
    if (saved) {
      auto r = index.LoadSaved(engine, rev);
      if (!Check(state, r.status())) break;
      if (*r != mvcc::KeyIndex::Saved::kLoaded) {
        state.SkipWithError("the saved copy was not loaded");
        break;
      }
    } else if (!Check(state, index.Load(engine, rev))) {
      break;
    }
    if (index.size() != static_cast<size_t>(kKeySpace)) {
      state.SkipWithError("the index does not hold the key space");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * kKeySpace);
}
BENCHMARK(BM_KeyIndexLoad)
    ->ArgName("saved")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace etcdw::bench
