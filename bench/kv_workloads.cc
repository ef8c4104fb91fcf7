// Request/response workloads on the KV service: puts, ranges, compare-and-swap Txns, and puts
// on a 3-member cluster.
#include <random>

#include "workloads.h"

namespace etcdw::bench {

namespace {

constexpr uint64_t kKeySpace = 100000;
const std::string kValue(256, 'v');

// Puts of 256-byte values on random keys of a 100k key space.
Outcome Puts(Target& target, int clients, int connections, const BenchOptions& opts) {
  std::string error;
  StartOp start = RandomPuts(
      target, clients, connections, 1, [](uint64_t r) { return KeyName("/put/", r % kKeySpace); },
      [] { return kValue; }, &error);
  if (!start) return Outcome{.error = error};
  return MeasureLoad(target, clients, start, opts);
}

// `clients` closed loops of the same Range over 16 connections; `check` names what is wrong
// with an answer (empty when it is right).
Outcome RangeLoad(Target& target, int clients, const etcdserverpb::RangeRequest& req,
                  const std::function<std::string(const etcdserverpb::RangeResponse&)>& check,
                  const BenchOptions& opts) {
  std::string error;
  auto client = target.UnaryClient(16, &error);
  if (!client) return Outcome{.error = error};
  std::vector<etcdserverpb::RangeResponse> responses(static_cast<size_t>(clients));
  StartOp start = [&](int c, Done done) {
    auto* resp = &responses[static_cast<size_t>(c)];
    client->Call(static_cast<size_t>(c), kRangePath, req, resp,
                 [resp, &check, done](bool ok, const std::string& error) {
                   if (!ok) return done(false, error);
                   std::string wrong = check(*resp);
                   done(wrong.empty(), wrong);
                 });
  };
  return MeasureLoad(target, clients, start, opts);
}

// Single-key ranges of a present key, linearizable or serializable, 64 clients.
Outcome Ranges(Target& target, bool serializable, const BenchOptions& opts) {
  std::string error;
  if (!BulkLoad(
          target, 1, [](uint64_t) { return std::string("/range/one"); }, kValue, 1, &error)) {
    return Outcome{.error = "preload: " + error};
  }
  etcdserverpb::RangeRequest req;
  req.set_key("/range/one");
  req.set_serializable(serializable);
  return RangeLoad(
      target, 64, req,
      [](const etcdserverpb::RangeResponse& r) {
        return r.kvs_size() == 1 ? std::string() : std::string("key not found");
      },
      opts);
}

// Ranges of 1000 keys (limit 1000) over 10k keys of 256 B, 16 clients.
Outcome LimitedRanges(Target& target, const BenchOptions& opts) {
  std::string error;
  if (!BulkLoad(
          target, 10000, [](uint64_t i) { return KeyName("/many/", i); }, kValue, 8, &error)) {
    return Outcome{.error = "preload: " + error};
  }
  etcdserverpb::RangeRequest req;
  req.set_key("/many/");
  req.set_range_end("/many0");  // the prefix's end: '/' + 1
  req.set_limit(1000);
  return RangeLoad(
      target, 16, req,
      [](const etcdserverpb::RangeResponse& r) {
        if (r.kvs_size() == 1000 && r.more()) return std::string();
        return "expected 1000 keys and more=true, got " + std::to_string(r.kvs_size());
      },
      opts);
}

// kube-apiserver's counts (`count_only` over a resource's prefix, e.g. for its object-count
// metric) against the full range of the same prefix: 100k keys of 256 B (10k with --quick),
// 4 clients. Each answer is checked: the count, and every key for the full range.
Outcome PrefixRanges(Target& target, bool count_only, const BenchOptions& opts) {
  const uint64_t keys = opts.quick ? 10000 : 100000;
  std::string error;
  if (!BulkLoad(
          target, keys, [](uint64_t i) { return KeyName("/registry/pods/", i); }, kValue, 8,
          &error)) {
    return Outcome{.error = "preload: " + error};
  }
  etcdserverpb::RangeRequest req;
  req.set_key("/registry/pods/");
  req.set_range_end("/registry/pods0");
  req.set_count_only(count_only);
  const auto want = static_cast<int64_t>(keys);
  return RangeLoad(
      target, 4, req,
      [count_only, want](const etcdserverpb::RangeResponse& r) {
        if (r.count() != want) return "count " + std::to_string(r.count());
        if (r.kvs_size() != (count_only ? 0 : want)) {
          return "got " + std::to_string(r.kvs_size()) + " keys";
        }
        return std::string();
      },
      opts);
}

// Compare-and-swap: read a random key of 10k, then a Txn that puts it only if its mod_revision
// is still the one read. One operation = the read and the Txn.
Outcome CompareAndSwap(Target& target, const BenchOptions& opts) {
  constexpr int kClients = 64, kConnections = 16;
  constexpr uint64_t kKeys = 10000;
  std::string error;
  if (!BulkLoad(
          target, kKeys, [](uint64_t i) { return KeyName("/cas/", i); }, kValue, 8, &error)) {
    return Outcome{.error = "preload: " + error};
  }
  auto client = target.UnaryClient(kConnections, &error);
  if (!client) return Outcome{.error = error};
  struct Slot {
    etcdserverpb::RangeRequest range;
    etcdserverpb::RangeResponse range_resp;
    etcdserverpb::TxnRequest txn;
    etcdserverpb::TxnResponse txn_resp;
    std::mt19937_64 rng;
  };
  std::vector<Slot> slots(kClients);
  for (size_t i = 0; i < slots.size(); ++i) slots[i].rng.seed(i + 7);
  StartOp start = [&](int c, Done done) {
    Slot& s = slots[static_cast<size_t>(c)];
    const auto conn = static_cast<size_t>(c);
    s.range.set_key(KeyName("/cas/", s.rng() % kKeys));
    client->Call(conn, kRangePath, s.range, &s.range_resp,
                 [&s, &client, conn, done](bool ok, const std::string& error) {
                   if (!ok) return done(false, error);
                   if (s.range_resp.kvs_size() != 1) return done(false, "key not found");
                   s.txn.Clear();
                   auto* cmp = s.txn.add_compare();
                   cmp->set_key(s.range.key());
                   cmp->set_target(etcdserverpb::Compare::MOD);
                   cmp->set_result(etcdserverpb::Compare::EQUAL);
                   cmp->set_mod_revision(s.range_resp.kvs(0).mod_revision());
                   auto* put = s.txn.add_success()->mutable_request_put();
                   put->set_key(s.range.key());
                   put->set_value(kValue);
                   client->Call(conn, kTxnPath, s.txn, &s.txn_resp, done);
                 });
  };
  return MeasureLoad(target, kClients, start, opts);
}

}  // namespace

std::vector<Workload> KvWorkloads() {
  return {
      {"put-1", "puts, 1 client", 1,
       [](Target& t, const BenchOptions& o) { return Puts(t, 1, 1, o); }},
      {"put-256", "puts, 256 clients over 16 connections", 1,
       [](Target& t, const BenchOptions& o) { return Puts(t, 256, 16, o); }},
      {"range-lin", "linearizable single-key ranges, 64 clients", 1,
       [](Target& t, const BenchOptions& o) { return Ranges(t, false, o); }},
      {"range-ser", "serializable single-key ranges, 64 clients", 1,
       [](Target& t, const BenchOptions& o) { return Ranges(t, true, o); }},
      {"cas-txn", "read + Txn on mod_revision, 64 clients", 1, CompareAndSwap},
      {"range-1000", "ranges of 1000 keys (limit) over 10k keys, 16 clients", 1, LimitedRanges},
      {"count-100k", "count_only ranges of a 100k-key prefix, 4 clients", 1,
       [](Target& t, const BenchOptions& o) { return PrefixRanges(t, true, o); }},
      {"range-all-100k", "full ranges of the same 100k keys (256 B values), 4 clients", 1,
       [](Target& t, const BenchOptions& o) { return PrefixRanges(t, false, o); }},
      {"cluster3-put", "puts, 256 clients over 16 connections to 3 members", 3,
       [](Target& t, const BenchOptions& o) { return Puts(t, 256, 16, o); }},
  };
}

}  // namespace etcdw::bench
