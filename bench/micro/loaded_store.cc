#include "loaded_store.h"

#include <cstdio>

#include "etcdw/mvcc/key_range.h"
#include "etcdw/mvcc/txn.h"

namespace etcdw::bench {

namespace {
constexpr char kPrefix[] = "/registry/bench/";
constexpr int kLoadBatch = 1000;

LoadedStore* Shared(benchmark::State& state, const Result<std::unique_ptr<LoadedStore>>& store) {
  if (!store.ok()) {
    state.SkipWithError(("loading the store: " + store.status().ToString()).c_str());
    return nullptr;
  }
  return store.value().get();
}
}  // namespace

std::string KeyName(int i) {
  char buf[sizeof(kPrefix) + 16];
  std::snprintf(buf, sizeof(buf), "%s%06d", kPrefix, i);
  return buf;
}

std::string KeySpaceEnd() { return mvcc::PrefixRangeEnd(kPrefix); }

Result<std::unique_ptr<LoadedStore>> LoadedStore::Create(const std::string& tag) {
  std::unique_ptr<LoadedStore> s(new LoadedStore());
  ETCDW_ASSIGN_OR_RETURN(s->disk_, OpenDiskEngine(tag));
  ETCDW_ASSIGN_OR_RETURN(s->kv_, mvcc::KvStore::Open(*s->disk_.engine));
  etcdserverpb::PutRequest put;
  for (int first = 0; first < kKeySpace; first += kLoadBatch) {
    auto batch = s->kv_->BeginApply();
    for (int i = first; i < first + kLoadBatch && i < kKeySpace; ++i) {
      put.set_key(KeyName(i));
      put.set_value(MakeValue(kValueBytes, static_cast<uint64_t>(i)));
      auto txn = batch->Begin();
      auto r = mvcc::ExecutePut(*txn, put);
      if (!r.ok()) return r.status();
      batch->End(std::move(txn));
    }
    ETCDW_RETURN_IF_ERROR(s->Commit(*batch));
  }
  ETCDW_RETURN_IF_ERROR(s->disk_.engine->CompactAll());
  return s;
}

LoadedStore* ReadStore(benchmark::State& state) {
  static const Result<std::unique_ptr<LoadedStore>> store = LoadedStore::Create("read");
  return Shared(state, store);
}

LoadedStore* WriteStore(benchmark::State& state) {
  static const Result<std::unique_ptr<LoadedStore>> store = LoadedStore::Create("write");
  return Shared(state, store);
}

}  // namespace etcdw::bench
