// An MVCC store on a real engine, loaded with a key space the size of a busy cluster's, shared by
// the MVCC benchmarks of one process (loading takes about a second).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>

#include "bench_util.h"
#include "etcdw/common/status.h"
#include "etcdw/mvcc/kv_store.h"

namespace etcdw::bench {

// Keys "/registry/bench/000000" .. "/registry/bench/099999": fixed width, so key order is
// numeric order and KeyName(kKeySpace) is above every key.
inline constexpr int kKeySpace = 100000;
inline constexpr size_t kValueBytes = 256;
std::string KeyName(int i);
// The range_end that selects every key of the key space.
std::string KeySpaceEnd();

class LoadedStore {
 public:
  // Creates a store in a new scratch directory and puts every key of the key space once, with a
  // kValueBytes value, one transaction (revision) per key in apply batches of 1000, then
  // compacts the database (Engine::CompactAll, as after a defragmentation): reads go through
  // table files and the block cache, and no background compaction of the load competes with
  // the measurements, which makes them repeatable.
  static Result<std::unique_ptr<LoadedStore>> Create(const std::string& tag);

  mvcc::KvStore& kv() { return *kv_; }
  // Commits `batch` with the next consistent index, as the applier does for one log entry.
  Status Commit(mvcc::ApplyBatch& batch) { return kv_->Commit(batch, ++index_); }

 private:
  LoadedStore() = default;
  DiskEngine disk_;
  std::unique_ptr<mvcc::KvStore> kv_;  // destroyed before disk_ (declared after it)
  uint64_t index_ = 0;
};

// The process's store for read benchmarks (never written after loading) and the one for write
// benchmarks (which add versions to it), created on first use. Null, with the benchmark marked
// as failed, when the store could not be created.
LoadedStore* ReadStore(benchmark::State& state);
LoadedStore* WriteStore(benchmark::State& state);

}  // namespace etcdw::bench
