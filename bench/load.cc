#include "load.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace etcdw::bench {

double Latencies::QuantileMs(double q) {
  if (micros.empty()) return 0;
  size_t idx = static_cast<size_t>(q * static_cast<double>(micros.size() - 1));
  std::nth_element(micros.begin(), micros.begin() + static_cast<std::ptrdiff_t>(idx), micros.end());
  return micros[idx] / 1000.0;
}

namespace {

// Shared by the loops of one run; outlives every callback (the runner waits for all loops).
struct LoopState {
  const StartOp* start = nullptr;
  std::atomic<bool> measuring{false};
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;  // loops not yet finished, under mu
  struct PerClient {
    Clock::time_point began;
    std::vector<uint32_t> micros;
    uint64_t errors = 0;
    std::string first_error;
  };
  std::vector<PerClient> clients;
};

void Next(const std::shared_ptr<LoopState>& s, int client) {
  if (s->stopping.load(std::memory_order_relaxed)) {
    std::lock_guard lock(s->mu);
    if (--s->running == 0) s->cv.notify_all();
    return;
  }
  s->clients[static_cast<size_t>(client)].began = Clock::now();
  (*s->start)(client, [s, client](bool ok, const std::string& error) {
    auto& c = s->clients[static_cast<size_t>(client)];
    if (s->measuring.load(std::memory_order_relaxed)) {
      if (ok) {
        auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - c.began);
        c.micros.push_back(static_cast<uint32_t>(us.count()));
      } else {
        if (c.errors++ == 0) c.first_error = error;
      }
    }
    Next(s, client);
  });
}

}  // namespace

LoadResult RunClosedLoop(int clients, const StartOp& start, const LoadWindow& window) {
  auto s = std::make_shared<LoopState>();
  s->start = &start;
  s->clients.resize(static_cast<size_t>(clients));
  s->running = clients;
  for (int i = 0; i < clients; ++i) Next(s, i);
  std::this_thread::sleep_for(window.warmup);
  if (window.on_window_start) window.on_window_start();
  auto t0 = Clock::now();
  s->measuring = true;
  std::this_thread::sleep_for(window.measure);
  s->measuring = false;
  auto t1 = Clock::now();
  if (window.on_window_end) window.on_window_end();
  s->stopping = true;
  {
    std::unique_lock lock(s->mu);
    s->cv.wait_for(lock, std::chrono::seconds(60), [&] { return s->running == 0; });
  }
  LoadResult r;
  r.seconds = std::chrono::duration<double>(t1 - t0).count();
  std::lock_guard lock(s->mu);  // a loop still running after 60 s keeps writing its own slot
  for (auto& c : s->clients) {
    r.ops += c.micros.size();
    r.errors += c.errors;
    if (r.first_error.empty()) r.first_error = c.first_error;
    r.latency.micros.insert(r.latency.micros.end(), c.micros.begin(), c.micros.end());
  }
  return r;
}

namespace {

// Shared by the loops of one RunAll; outlives every callback (RunAll waits for all loops).
struct AllState {
  const IndexedOp* fn = nullptr;
  uint64_t count = 0;
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> failed{0};
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;          // under mu
  std::string first_error;  // under mu
};

void NextIndex(const std::shared_ptr<AllState>& s, int client) {
  uint64_t i = s->next.fetch_add(1);
  if (i >= s->count) {
    std::lock_guard lock(s->mu);
    if (--s->running == 0) s->cv.notify_all();
    return;
  }
  (*s->fn)(client, i, [s, client](bool ok, const std::string& error) {
    if (!ok && s->failed.fetch_add(1) == 0) {
      std::lock_guard lock(s->mu);
      s->first_error = error;
    }
    NextIndex(s, client);
  });
}

}  // namespace

uint64_t RunAll(int clients, uint64_t count, const IndexedOp& fn, std::string* first_error) {
  auto s = std::make_shared<AllState>();
  s->fn = &fn;
  s->count = count;
  s->running = clients;
  for (int c = 0; c < clients; ++c) NextIndex(s, c);
  std::unique_lock lock(s->mu);
  s->cv.wait(lock, [&] { return s->running == 0; });
  if (first_error) *first_error = s->first_error;
  return s->failed.load();
}

}  // namespace etcdw::bench
