// Closed-loop load generation: N logical clients, each with one operation in flight, for a
// measured window after a warm-up. Operations are asynchronous (gRPC's callback API), so 256
// clients cost the benchmark process a few threads, not 256.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace etcdw::bench {

using Clock = std::chrono::steady_clock;

// Called when one operation completes: ok, or the error text (the first one is reported).
using Done = std::function<void(bool ok, const std::string& error)>;
// Starts one operation of client `client` (0 <= client < clients) and calls done exactly once.
// Never called again for the same client before that client's done ran.
using StartOp = std::function<void(int client, Done done)>;

// Latency samples in microseconds, and the summary the report prints.
struct Latencies {
  std::vector<uint32_t> micros;
  // The q-quantile (0..1) in milliseconds; 0 without samples.
  double QuantileMs(double q);
};

struct LoadResult {
  uint64_t ops = 0;     // completed in the measured window
  uint64_t errors = 0;  // failed in the measured window
  std::string first_error;
  double seconds = 0;  // length of the measured window
  Latencies latency;
  double ops_per_sec() const { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
};

// The window: warm-up (not measured), then `measure`. on_window_start / on_window_end run on the
// calling thread at the window's edges (the caller samples server CPU time there).
struct LoadWindow {
  std::chrono::milliseconds warmup{500};
  std::chrono::milliseconds measure{5000};
  std::function<void()> on_window_start;
  std::function<void()> on_window_end;
};

// Runs `clients` closed loops of `start` until the window ends, then waits (bounded) for the
// operations in flight. Returns the measured window's figures.
LoadResult RunClosedLoop(int clients, const StartOp& start, const LoadWindow& window);

// Operation number `index`, run by loop `client` (one at a time per client, as StartOp).
using IndexedOp = std::function<void(int client, uint64_t index, Done done)>;

// Runs `fn` for every index in [0, count) across `clients` closed loops until all are done (no
// window: used to load data). Returns the number that failed and the first error.
uint64_t RunAll(int clients, uint64_t count, const IndexedOp& fn, std::string* first_error);

}  // namespace etcdw::bench
