// Helpers shared by the micro-benchmarks: scratch directories and on-disk engines.
//
// The benchmarks measure the code the server runs, on a real RocksDB engine in a directory
// under $TMPDIR (never the in-memory engine, whose costs differ), so a regression in our code or in
// how we drive RocksDB shows up here before the end-to-end benchmark.
#pragma once

#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "etcdw/common/status.h"
#include "etcdw/storage/engine.h"
#include "support/scratch_dir.h"

namespace etcdw::bench {

// An engine with the server's default options (etcd_server.cc opens it with {}) in its own
// scratch directory. Members are destroyed engine first, then the directory.
struct DiskEngine {
  std::unique_ptr<testsupport::ScratchDir> dir;
  std::unique_ptr<storage::Engine> engine;
};

// Opens a DiskEngine; on failure the status says why.
Result<DiskEngine> OpenDiskEngine(const std::string& tag);

// Reports `st` on `state` (which ends the benchmark's measurement) when it is an error; returns
// whether it was OK. Use as: if (!Check(state, st)) break;
bool Check(benchmark::State& state, const Status& st);

// A value of `size` bytes that differs with `seed` (so that RocksDB cannot share or compress it
// away).
std::string MakeValue(size_t size, uint64_t seed);

}  // namespace etcdw::bench
