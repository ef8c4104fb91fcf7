// The workloads of the benchmark. Each runs against a freshly started Target and returns either
// a load measurement (throughput, latency, server CPU and memory over a measured window) or
// scalar figures (memory after a bulk load, cold start time, snapshot throughput).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "load.h"
#include "target.h"

namespace etcdw::bench {

struct BenchOptions {
  bool quick = false;  // CI smoke: short windows, small data sets
  std::chrono::milliseconds warmup{1000};
  std::chrono::milliseconds measure{5000};
  uint64_t rss_keys = 1000000;           // keys of 256 B loaded for the memory figure
  uint64_t big_data_bytes = 1ULL << 30;  // data loaded for cold start and snapshot save
};

// A measured load window.
struct LoadFigures {
  LoadResult load;
  double server_cpu_seconds = 0;  // over the window, all members
  double peak_rss_bytes = 0;      // peak during the window, summed over members
  double client_cpu_seconds = 0;  // the benchmark process's own CPU time over the window
  double CpuMicrosPerOp() const {
    return load.ops ? server_cpu_seconds * 1e6 / static_cast<double>(load.ops) : 0;
  }
};

// One scalar figure; `higher_is_better` decides which way the ratio's goal points.
struct Scalar {
  std::string name;
  std::string unit;
  double value = 0;
  bool higher_is_better = true;
};

struct Outcome {
  bool ok = false;
  std::string error;  // why it failed (server start, failed requests)
  bool has_load = false;
  LoadFigures load;
  std::vector<Scalar> scalars;
};

struct Workload {
  std::string name;
  std::string description;
  int members = 1;
  std::function<Outcome(Target&, const BenchOptions&)> run;
};

// Every workload, in report order.
std::vector<Workload> AllWorkloads();

// Parts the workload files share.
std::vector<Workload> KvWorkloads();
std::vector<Workload> StreamWorkloads();
std::vector<Workload> DataWorkloads();

// Called when the measured window opens (after the samples) and closes (before them).
struct WindowHooks {
  std::function<void()> on_start;
  std::function<void()> on_end;
};

// Runs `clients` closed loops of `start` in a measured window, sampling the target's CPU time at
// the window's edges and its peak RSS over it.
Outcome MeasureLoad(Target& target, int clients, const StartOp& start, const BenchOptions& opts,
                    const WindowHooks& hooks = {});

// A gRPC completion callback that completes `done` with the call's status.
std::function<void(grpc::Status)> OnStatus(Done done);

// A client context with a deadline (a stuck server fails the workload instead of hanging it).
std::unique_ptr<grpc::ClientContext> NewContext(
    std::chrono::seconds timeout = std::chrono::seconds(30));

// gRPC method paths for the unary client.
inline constexpr const char* kPutPath = "/etcdserverpb.KV/Put";
inline constexpr const char* kRangePath = "/etcdserverpb.KV/Range";
inline constexpr const char* kTxnPath = "/etcdserverpb.KV/Txn";

// Closed-loop puts for `clients` loops over `connections`: each put goes to key(r), r a random
// number of the client's own generator (seeded from `seed`), with value() as its value. An
// empty StartOp with *error when the connections cannot be opened.
StartOp RandomPuts(Target& target, int clients, int connections, uint64_t seed,
                   std::function<std::string(uint64_t)> key, std::function<std::string()> value,
                   std::string* error);

// Puts `count` keys key_fn(i) with value_fn(i) in Txns of up to 100 puts (etcd's limit is 128)
// over `clients` loops; false with the first error.
bool BulkLoad(Target& target, uint64_t count, const std::function<std::string(uint64_t)>& key_fn,
              const std::string& value, int clients, std::string* error);

// "k0000000042": fixed-width keys so ranges over them sort numerically.
std::string KeyName(const std::string& prefix, uint64_t i);

}  // namespace etcdw::bench
