// Watch dispatch: the cost of handing one applied put to every synced watcher of its key
// (WatchHub::Notify on the apply thread, the hub's sender thread starting the writes), plus the
// completion of the resulting stream writes (WatchStream::WriteDone, which gRPC calls when a
// response has been sent). The hub runs its
// catch-up thread, as in the server.
#include <benchmark/benchmark.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "etcdw/member/watch_hub.h"
#include "etcdw/mvcc/key_range.h"
#include "etcdw/mvcc/kv_store.h"

namespace etcdw::bench {
namespace {

using member::WatchStream;

constexpr char kWatchedPrefix[] = "/registry/pods/";
constexpr char kIdlePrefix[] = "/registry/events/";
constexpr size_t kValueBytes = 256;
constexpr int kIdleWatchersPerStream = 100;

// The `events` fields of a serialized WatchResponse, counted without parsing them (a client's
// parsing is not part of the dispatch measured here); -1 if the bytes are not a message.
int64_t CountEvents(const std::string& wire) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  int64_t n = 0;
  while (uint32_t tag = in.ReadTag()) {
    if (tag == ((11 << 3) | 2)) ++n;  // WatchResponse.events
    if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) return -1;
  }
  return n;
}

// A stream's sink that takes every write at once: it counts the events and leaves the write in
// flight until Complete() reports it done, as a client reading promptly would.
class CountingSink final : public member::WatchSink {
 public:
  void StartWrite(std::string wire) override {
    events_.fetch_add(CountEvents(wire), std::memory_order_relaxed);
    in_flight_.store(true, std::memory_order_release);
  }
  void Finish() override {}

  // Completes writes until the stream has nothing more to send.
  void Complete(WatchStream& stream) {
    while (in_flight_.exchange(false, std::memory_order_acq_rel)) stream.WriteDone(true);
  }
  int64_t events() const { return events_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> in_flight_{false};
  std::atomic<int64_t> events_{0};
};

struct Client {
  CountingSink sink;  // outlives the stream, which writes to it until closed
  std::shared_ptr<WatchStream> stream;
};

// Completes the stream's writes until its sink has seen `want` events in all (the hub's sender
// thread starts the writes, so they arrive a little after Notify returns); false when they do
// not within a second.
bool Drain(Client& c, int64_t want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (c.sink.events() < want) {
    c.sink.Complete(*c.stream);
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  c.sink.Complete(*c.stream);
  return true;
}

etcdserverpb::WatchCreateRequest WatchPrefix(const std::string& prefix, bool prev_kv) {
  etcdserverpb::WatchCreateRequest c;
  c.set_key(prefix);
  c.set_range_end(mvcc::PrefixRangeEnd(prefix));
  c.set_prev_kv(prev_kv);
  return c;
}

// An update of a pod: the event carries the version it replaced, as the applier's do.
std::vector<mvcc::RevisionEvents> PodUpdate() {
  std::vector<mvcc::RevisionEvents> changes(1);
  mvccpb::Event& ev = changes[0].events.emplace_back();
  ev.set_type(mvccpb::Event::PUT);
  mvccpb::KeyValue* kv = ev.mutable_kv();
  kv->set_key(std::string(kWatchedPrefix) + "default/web-7d4b9c-x2x7q");
  kv->set_value(MakeValue(kValueBytes, 1));
  kv->set_create_revision(2);
  kv->set_version(2);
  *ev.mutable_prev_kv() = *kv;
  ev.mutable_prev_kv()->set_value(MakeValue(kValueBytes, 2));
  ev.mutable_prev_kv()->set_version(1);
  return changes;
}

// Arguments: streams, watchers of the prefix per stream, whether they asked for prev_kv, and
// streams of idle watchers (kIdleWatchersPerStream each, on another prefix) that Notify must
// pass over.
void BM_WatchNotify(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  const int per_stream = static_cast<int>(state.range(1));
  const bool prev_kv = state.range(2) != 0;
  const int idle_streams = static_cast<int>(state.range(3));

  auto disk = OpenDiskEngine("watch");
  if (!Check(state, disk.status())) return;
  auto kv = mvcc::KvStore::Open(*disk->engine);
  if (!Check(state, kv.status())) return;
  member::WatchHubOptions opts;
  opts.fill_header = [](etcdserverpb::ResponseHeader* h) {
    h->set_cluster_id(0x1c2a3b4d5e6f7081);
    h->set_member_id(0x8a9b0c1d2e3f4051);
    h->set_raft_term(2);
  };
  member::WatchHub hub(**kv, opts);
  hub.Start();

  std::vector<std::unique_ptr<Client>> clients;
  auto open = [&](int watchers, const char* prefix) {
    auto& c = clients.emplace_back(std::make_unique<Client>());
    c->stream = hub.NewStream(&c->sink);
    for (int i = 0; i < watchers; ++i) c->stream->Create(WatchPrefix(prefix, prev_kv));
    c->sink.Complete(*c->stream);  // the "created" responses
  };
  for (int i = 0; i < streams; ++i) open(per_stream, kWatchedPrefix);
  for (int i = 0; i < idle_streams; ++i) open(kIdleWatchersPerStream, kIdlePrefix);
  std::vector<int64_t> events_before;
  for (const auto& c : clients) events_before.push_back(c->sink.events());

  std::vector<mvcc::RevisionEvents> changes = PodUpdate();
  mvccpb::Event& ev = changes[0].events[0];
  int64_t rev = (*kv)->Rev();
  int64_t notified = 0;
  for (auto _ : state) {
    changes[0].rev = ++rev;
    ev.mutable_kv()->set_mod_revision(rev);
    ev.mutable_prev_kv()->set_mod_revision(rev - 1);
    hub.Notify(changes, rev);
    ++notified;
    for (int i = 0; i < streams; ++i) {
      if (!Drain(*clients[i], events_before[i] + notified * per_stream)) break;
    }
  }

  // Every watcher of the prefix got every event, the others none, and nobody fell behind.
  const int64_t n = state.iterations();
  bool delivered = hub.UnsyncedCount() == 0;
  for (size_t i = 0; i < clients.size(); ++i) {
    const int64_t want = i < static_cast<size_t>(streams) ? n * per_stream : 0;
    delivered = delivered && clients[i]->sink.events() - events_before[i] == want;
  }
  if (!delivered) state.SkipWithError("events were not delivered to exactly their watchers");

  for (auto& c : clients) c->stream->Close();
  hub.Stop();
  state.SetItemsProcessed(n);
  state.counters["per_delivery"] =
      benchmark::Counter(static_cast<double>(n * streams * per_stream),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_WatchNotify)
    ->ArgNames({"streams", "per_stream", "prev_kv", "idle_streams"})
    ->Args({100, 1, 0, 0})
    ->Args({100, 1, 1, 0})
    ->Args({1, 100, 0, 0})
    ->Args({100, 1, 0, 10})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace etcdw::bench
