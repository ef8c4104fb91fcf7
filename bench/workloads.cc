#include "workloads.h"

#include <cstdio>
#include <memory>
#include <random>

#include "proc_stats.h"

namespace etcdw::bench {

std::vector<Workload> AllWorkloads() {
  std::vector<Workload> all;
  for (auto part : {KvWorkloads, StreamWorkloads, DataWorkloads}) {
    for (auto& w : part()) all.push_back(std::move(w));
  }
  return all;
}

std::function<void(grpc::Status)> OnStatus(Done done) {
  return [done = std::move(done)](grpc::Status st) { done(st.ok(), st.error_message()); };
}

StartOp RandomPuts(Target& target, int clients, int connections, uint64_t seed,
                   std::function<std::string(uint64_t)> key, std::function<std::string()> value,
                   std::string* error) {
  struct Slot {
    etcdserverpb::PutRequest req;
    etcdserverpb::PutResponse resp;
    std::mt19937_64 rng;
  };
  struct State {
    std::shared_ptr<GrpcUnaryClient> client;
    std::vector<Slot> slots;
    std::function<std::string(uint64_t)> key;
    std::function<std::string()> value;
  };
  auto st = std::make_shared<State>();
  st->client = target.UnaryClient(connections, error);
  if (!st->client) return StartOp();
  st->slots.resize(static_cast<size_t>(clients));
  for (size_t i = 0; i < st->slots.size(); ++i) st->slots[i].rng.seed(seed + i);
  st->key = std::move(key);
  st->value = std::move(value);
  return [st](int c, Done done) {
    Slot& s = st->slots[static_cast<size_t>(c)];
    s.req.set_key(st->key(s.rng()));
    s.req.set_value(st->value());
    st->client->Call(static_cast<size_t>(c), kPutPath, s.req, &s.resp, std::move(done));
  };
}

std::unique_ptr<grpc::ClientContext> NewContext(std::chrono::seconds timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

std::string KeyName(const std::string& prefix, uint64_t i) {
  char digits[24];
  std::snprintf(digits, sizeof digits, "%010llu", static_cast<unsigned long long>(i));
  return prefix + digits;
}

Outcome MeasureLoad(Target& target, int clients, const StartOp& start, const BenchOptions& opts,
                    const WindowHooks& hooks) {
  Outcome out;
  auto pids = target.pids();
  double cpu0 = 0, cpu1 = 0, self0 = 0, self1 = 0;
  LoadWindow window;
  window.warmup = opts.warmup;
  window.measure = opts.measure;
  window.on_window_start = [&] {
    ResetPeakRss(pids);
    cpu0 = CpuSeconds(pids);
    self0 = SelfCpuSeconds();
    if (hooks.on_start) hooks.on_start();
  };
  window.on_window_end = [&] {
    if (hooks.on_end) hooks.on_end();
    cpu1 = CpuSeconds(pids);
    self1 = SelfCpuSeconds();
    out.load.peak_rss_bytes = PeakRssBytes(pids);
  };
  out.load.load = RunClosedLoop(clients, start, window);
  out.load.server_cpu_seconds = cpu1 - cpu0;
  out.load.client_cpu_seconds = self1 - self0;
  out.has_load = true;
  if (out.load.load.errors > 0) {
    out.error = std::to_string(out.load.load.errors) +
                " requests failed, first: " + out.load.load.first_error;
  } else if (out.load.load.ops == 0) {
    out.error = "no request completed in the window";
  } else {
    out.ok = true;
  }
  return out;
}

bool BulkLoad(Target& target, uint64_t count, const std::function<std::string(uint64_t)>& key_fn,
              const std::string& value, int clients, std::string* error) {
  constexpr uint64_t kPerTxn = 100;
  auto channels = target.Channels(clients);
  auto stubs = Stubs<etcdserverpb::KV>(channels);
  struct Slot {
    std::unique_ptr<grpc::ClientContext> ctx;
    etcdserverpb::TxnRequest req;
    etcdserverpb::TxnResponse resp;
  };
  std::vector<Slot> slots(static_cast<size_t>(clients));
  uint64_t txns = (count + kPerTxn - 1) / kPerTxn;
  auto fn = [&](int client, uint64_t t, Done done) {
    Slot& s = slots[static_cast<size_t>(client)];
    s.ctx = NewContext();
    s.req.Clear();
    for (uint64_t i = t * kPerTxn; i < std::min(count, (t + 1) * kPerTxn); ++i) {
      auto* put = s.req.add_success()->mutable_request_put();
      put->set_key(key_fn(i));
      put->set_value(value);
    }
    stubs[static_cast<size_t>(client) % stubs.size()]->async()->Txn(s.ctx.get(), &s.req, &s.resp,
                                                                    OnStatus(std::move(done)));
  };
  uint64_t failed = RunAll(clients, txns, fn, error);
  if (failed > 0) *error = std::to_string(failed) + " load Txns failed, first: " + *error;
  return failed == 0;
}

}  // namespace etcdw::bench
