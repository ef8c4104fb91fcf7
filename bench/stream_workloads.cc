// Streaming workloads: watch fan-out (put-to-delivery latency) and lease grant + keepalive churn.
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "workloads.h"

namespace etcdw::bench {

namespace {

using etcdserverpb::LeaseKeepAliveRequest;
using etcdserverpb::LeaseKeepAliveResponse;
using etcdserverpb::WatchRequest;
using etcdserverpb::WatchResponse;

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Waits for a reactor's OnDone.
class DoneLatch {
 public:
  void Set() {
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  bool Wait(std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

// One watch stream with one watch on a prefix. Every event's value starts with the put's send
// time (steady clock nanoseconds); while `measuring`, the delivery latency of each is recorded.
class Watcher : public grpc::ClientBidiReactor<WatchRequest, WatchResponse> {
 public:
  Watcher(etcdserverpb::Watch::Stub* stub, const std::string& prefix,
          const std::atomic<bool>* measuring)
      : measuring_(measuring) {
    auto* create = create_.mutable_create_request();
    create->set_key(prefix);
    std::string end = prefix;
    end.back()++;
    create->set_range_end(end);
    stub->async()->Watch(&ctx_, this);
    StartWrite(&create_);
    StartRead(&resp_);
    StartCall();
  }
  bool created() const { return created_.load(); }
  // Cancels the stream and waits for it to end. Safe to read the samples afterwards.
  void Stop() {
    ctx_.TryCancel();
    done_.Wait(std::chrono::seconds(30));
  }
  std::vector<uint32_t>& micros() { return micros_; }
  uint64_t events() const { return events_; }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (resp_.created()) created_ = true;
    if (measuring_->load(std::memory_order_relaxed)) {
      int64_t now = NowNanos();
      for (const auto& ev : resp_.events()) {
        int64_t sent = 0;
        if (ev.kv().value().size() >= sizeof sent) {
          std::memcpy(&sent, ev.kv().value().data(), sizeof sent);
          micros_.push_back(static_cast<uint32_t>((now - sent) / 1000));
        }
        ++events_;
      }
    }
    StartRead(&resp_);
  }
  void OnDone(const grpc::Status&) override { done_.Set(); }

 private:
  const std::atomic<bool>* measuring_;
  grpc::ClientContext ctx_;
  WatchRequest create_;
  WatchResponse resp_;
  std::atomic<bool> created_{false};
  std::vector<uint32_t> micros_;
  uint64_t events_ = 0;
  DoneLatch done_;
};

// One put per `interval` on average: a single closed loop (it sleeps on the client's loop thread,
// which serves nothing else) paced to a fixed rate. A slow put is made up for by the next ones,
// up to kPacedBehind intervals.
constexpr int kPacedBehind = 50;
StartOp Paced(StartOp put, std::chrono::microseconds interval) {
  auto next = std::make_shared<Clock::time_point>(Clock::now());
  return [put = std::move(put), interval, next](int client, Done done) {
    *next = std::max(*next + interval, Clock::now() - kPacedBehind * interval);
    std::this_thread::sleep_until(*next);
    put(client, std::move(done));
  };
}

// 100 watchers (10 connections) on one prefix; putters put 256-byte values under it: 16 closed
// loops as fast as the server goes (puts_per_sec 0), or one loop paced to puts_per_sec, so that
// both servers deliver the same events and their latencies compare at equal load. The figures
// are the watchers': events delivered per second, put-to-delivery latency, server CPU time per
// delivered event.
Outcome WatchFanOut(Target& target, const BenchOptions& opts, int puts_per_sec) {
  constexpr int kWatchers = 100, kWatchConnections = 10;
  const int kPutters = puts_per_sec > 0 ? 1 : 16, kPutConnections = puts_per_sec > 0 ? 1 : 4;
  const std::string prefix = "/watch/";
  std::atomic<bool> measuring{false};
  auto watch_stubs = Stubs<etcdserverpb::Watch>(target.Channels(kWatchConnections));
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kWatchers; ++i) {
    watchers.push_back(std::make_unique<Watcher>(
        watch_stubs[static_cast<size_t>(i % kWatchConnections)].get(), prefix, &measuring));
  }
  auto stop_all = [&] {
    for (auto& w : watchers) w->Stop();
  };
  if (!testing::WaitUntil([&] {
        for (auto& w : watchers) {
          if (!w->created()) return false;
        }
        return true;
      })) {
    stop_all();
    return Outcome{.error = "watches were not created"};
  }
  // Each value starts with the time it was sent: the watchers measure delivery latency from it.
  std::string error;
  StartOp start = RandomPuts(
      target, kPutters, kPutConnections, 11, [&](uint64_t r) { return KeyName(prefix, r % 1000); },
      [] {
        std::string value(256, 'w');
        const int64_t sent = NowNanos();
        std::memcpy(value.data(), &sent, sizeof sent);
        return value;
      },
      &error);
  if (!start) {
    stop_all();
    return Outcome{.error = error};
  }
  if (puts_per_sec > 0)
    start = Paced(std::move(start), std::chrono::microseconds(1000000 / puts_per_sec));
  // The putters' window is the watchers' window; the figures are the watchers'.
  Outcome out = MeasureLoad(target, kPutters, start, opts,
                            {[&] { measuring = true; }, [&] { measuring = false; }});
  stop_all();
  if (!out.ok) return out;
  const double puts = out.load.load.ops_per_sec();
  LoadResult delivered;
  delivered.seconds = out.load.load.seconds;
  for (auto& w : watchers) {
    delivered.ops += w->events();
    auto& m = w->micros();
    delivered.latency.micros.insert(delivered.latency.micros.end(), m.begin(), m.end());
  }
  out.load.load = std::move(delivered);
  if (out.load.load.ops == 0) {
    out.ok = false;
    out.error = "no event delivered";
  }
  out.scalars.push_back(
      {puts_per_sec > 0 ? "puts/s during watch latency (paced)" : "puts/s during watch fan-out",
       "ops/s", puts, true});
  return out;
}

// A LeaseKeepAlive stream used for one request/response at a time.
class KeepAliveStream
    : public grpc::ClientBidiReactor<LeaseKeepAliveRequest, LeaseKeepAliveResponse> {
 public:
  explicit KeepAliveStream(etcdserverpb::Lease::Stub* stub) {
    stub->async()->LeaseKeepAlive(&ctx_, this);
    StartCall();
  }
  // Sends one keepalive for `id`; `done` gets whether the lease was renewed.
  void Ping(int64_t id, Done done) {
    done_cb_ = std::move(done);
    req_.set_id(id);
    StartWrite(&req_);  // the read starts once the write is done: one operation at a time
  }
  void Stop() {
    ctx_.TryCancel();
    finished_.Wait(std::chrono::seconds(30));
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Done cb = std::move(done_cb_);  // the callback may start the next Ping
      return cb(false, "keepalive stream closed");
    }
    StartRead(&resp_);
  }
  void OnReadDone(bool ok) override {
    Done cb = std::move(done_cb_);
    if (!ok) return cb(false, "keepalive stream ended");
    if (resp_.ttl() <= 0) return cb(false, "lease not renewed");
    cb(true, "");
  }
  void OnDone(const grpc::Status&) override { finished_.Set(); }

 private:
  grpc::ClientContext ctx_;
  LeaseKeepAliveRequest req_;
  LeaseKeepAliveResponse resp_;
  Done done_cb_;
  DoneLatch finished_;
};

// Lease churn: grant (TTL 60 s), one keepalive on the client's stream, revoke. One operation =
// the three.
Outcome LeaseChurn(Target& target, const BenchOptions& opts) {
  constexpr int kClients = 32, kConnections = 8;
  auto stubs = Stubs<etcdserverpb::Lease>(target.Channels(kConnections));
  struct Slot {
    std::unique_ptr<grpc::ClientContext> ctx;
    etcdserverpb::LeaseGrantRequest grant;
    etcdserverpb::LeaseGrantResponse grant_resp;
    etcdserverpb::LeaseRevokeRequest revoke;
    etcdserverpb::LeaseRevokeResponse revoke_resp;
    std::unique_ptr<KeepAliveStream> keepalive;
  };
  std::vector<Slot> slots(kClients);
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i].grant.set_ttl(60);
    slots[i].keepalive = std::make_unique<KeepAliveStream>(stubs[i % stubs.size()].get());
  }
  StartOp start = [&](int c, Done done) {
    Slot& s = slots[static_cast<size_t>(c)];
    auto* stub = stubs[static_cast<size_t>(c) % stubs.size()].get();
    s.ctx = NewContext();
    stub->async()->LeaseGrant(
        s.ctx.get(), &s.grant, &s.grant_resp, [&s, stub, done](grpc::Status st) {
          if (!st.ok()) return done(false, st.error_message());
          s.keepalive->Ping(s.grant_resp.id(), [&s, stub, done](bool ok, const std::string& error) {
            if (!ok) return done(false, error);
            s.revoke.set_id(s.grant_resp.id());
            s.ctx = NewContext();
            stub->async()->LeaseRevoke(s.ctx.get(), &s.revoke, &s.revoke_resp, OnStatus(done));
          });
        });
  };
  Outcome out = MeasureLoad(target, kClients, start, opts);
  for (auto& s : slots) s.keepalive->Stop();
  return out;
}

}  // namespace

std::vector<Workload> StreamWorkloads() {
  return {
      {"watch-fanout", "100 watchers on a prefix, 16 clients putting (events delivered)", 1,
       [](Target& t, const BenchOptions& o) { return WatchFanOut(t, o, 0); }},
      {"watch-latency", "100 watchers on a prefix, one client putting 500/s (equal load)", 1,
       [](Target& t, const BenchOptions& o) { return WatchFanOut(t, o, 500); }},
      {"lease-churn", "grant + keepalive + revoke, 32 clients", 1, LeaseChurn},
  };
}

}  // namespace etcdw::bench
