// The snapshotter against a real in-process member (EtcdServer + its gRPC server on a loopback
// port picked by the kernel) and a Local store in a temporary directory.
#include "etcdw/sidecar/snapshotter.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <sstream>
#include <thread>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcdw/client_api/native_rpc_server.h"
#include "etcdw/common/config.h"
#include "etcdw/member/etcd_server.h"
#include "etcdw/sidecar/compression.h"
#include "etcdw/sidecar/delta.h"
#include "etcdw/sidecar/initializer.h"
#include "etcdw/sidecar/local_store.h"
#include "etcdw/sidecar/metrics.h"
#include "etcdw/sidecar/restorer.h"
#include "etcdw/sidecar/snapshot_verify.h"
#include "support/await.h"
#include "support/files.h"
#include "support/local_member.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using testsupport::ReadFile;
using testsupport::WaitUntil;
using testsupport::WriteFile;

CronSchedule Schedule(const std::string& spec) {
  auto s = CronSchedule::Parse(spec);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

// A Snapshotter::Run on a thread of its own.
class Running {
 public:
  explicit Running(Snapshotter& s) : s_(s) {
    result_ = done_.get_future();
    thread_ = std::thread([this] { done_.set_value(s_.Run()); });
  }
  ~Running() { (void)Finish(); }
  bool WaitActive(std::chrono::milliseconds timeout = 10s) {
    return WaitUntil([&] { return s_.active() || Ended(); }, timeout) && s_.active();
  }
  bool Ended() { return result_.wait_for(0s) == std::future_status::ready; }
  // Waits (bounded) for Run to return by itself.
  std::optional<Status> WaitEnd(std::chrono::milliseconds timeout = 10s) {
    if (result_.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    return Join();
  }
  // Stops the snapshotter and returns Run's status.
  Status Finish() {
    if (thread_.joinable()) {
      s_.Stop();
      thread_.join();
      status_ = result_.get();
    }
    return status_;
  }

 private:
  Status Join() {
    if (thread_.joinable()) {
      thread_.join();
      status_ = result_.get();
    }
    return status_;
  }
  Snapshotter& s_;
  std::promise<Status> done_;
  std::future<Status> result_;
  std::thread thread_;
  Status status_;
};

class SnapshotterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<testsupport::ScratchDir>("snapshotter");
    root_ = scratch_->path();
    ASSERT_FALSE(root_.empty());
    temp_dir_ = root_ + "/tmp";
    fs::create_directories(temp_dir_);
    fs::create_directories(root_ + "/scratch");
    StartMember();
    auto store = NewLocalStore(root_ + "/store", "prefix");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  void TearDown() override {
    client_.reset();
    kv_.reset();
    if (native_) native_->Shutdown(1s);
    if (server_) server_->Stop();
    native_.reset();
    server_.reset();
    scratch_.reset();
  }

  void StartMember() {
    auto s = testsupport::StartLocalMember(root_ + "/data");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    client_api::NativeRpcOptions o;
    o.urls = server_->config().listen_client_urls;
    auto n = client_api::NativeRpcServer::Start(*server_, o);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    native_ = std::move(n).value();
    const std::string endpoint = "127.0.0.1:" + std::to_string(native_->ports().at(0));
    auto c = EtcdClient::Connect(EtcdConnectionOptions(), "http://" + endpoint);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    kv_ = etcdserverpb::KV::NewStub(
        grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
  }

  SnapshotterOptions Options() {
    SnapshotterOptions o;
    o.schedule = Schedule("@every 1h");  // window 24 h: a fresh full is recent enough
    o.delta_period = 60s;
    o.gc_period = 0s;
    o.temp_dir = temp_dir_;
    o.connection_timeout = 5s;
    o.snapshot_timeout = 10s;
    return o;
  }

  // Writes through gRPC; returns the revision of the write.
  int64_t Put(const std::string& k, const std::string& v) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    etcdserverpb::PutRequest r;
    r.set_key(k);
    r.set_value(v);
    etcdserverpb::PutResponse resp;
    grpc::Status st = kv_->Put(&ctx, r, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.header().revision();
  }
  int64_t Delete(const std::string& k) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    etcdserverpb::DeleteRangeRequest r;
    r.set_key(k);
    etcdserverpb::DeleteRangeResponse resp;
    grpc::Status st = kv_->DeleteRange(&ctx, r, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.deleted(), 1);
    return resp.header().revision();
  }
  void Compact(int64_t rev) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    etcdserverpb::CompactionRequest r;
    r.set_revision(rev);
    r.set_physical(true);
    etcdserverpb::CompactionResponse resp;
    grpc::Status st = kv_->Compact(&ctx, r, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }

  std::vector<SnapshotInfo> List() {
    auto l = store_->List();
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? *l : std::vector<SnapshotInfo>();
  }
  std::vector<SnapshotInfo> ListKind(SnapshotKind kind) {
    std::vector<SnapshotInfo> out;
    for (auto& s : List()) {
      if (s.kind == kind && !s.is_chunk) out.push_back(s);
    }
    return out;
  }

  // Downloads and decompresses a snapshot; returns the local path of its payload.
  std::string FetchPayload(const SnapshotInfo& s) {
    const std::string raw = root_ + "/scratch/" + s.snap_name + ".fetched";
    const std::string out = root_ + "/scratch/" + s.snap_name + ".payload";
    Status st = store_->Fetch(s, raw);
    EXPECT_TRUE(st.ok()) << st.ToString();
    auto c = CompressionFromSuffix(s.compression_suffix);
    EXPECT_TRUE(c.ok());
    st = DecompressFile(raw, out, c.ok() ? *c : Compression::kNone);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }
  std::vector<DeltaEvent> DeltaEvents(const SnapshotInfo& s) {
    auto events = ParseDelta(ReadFile(FetchPayload(s)));
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    return events.ok() ? *events : std::vector<DeltaEvent>();
  }

  bool TempDirEmpty() { return fs::is_empty(temp_dir_); }

  // An object in the store with arbitrary content (GC looks only at names).
  void SaveFake(SnapshotKind kind, int64_t start, int64_t last,
                std::chrono::system_clock::time_point created) {
    SnapshotInfo s = NewSnapshot(kind, start, last, created, ".gz", false);
    const std::string src = root_ + "/scratch/fake";
    WriteFile(src, "fake");
    ASSERT_TRUE(store_->Save(s, src).ok());
  }

  std::unique_ptr<testsupport::ScratchDir> scratch_;  // removed by TearDown
  std::string root_;
  std::string temp_dir_;
  std::unique_ptr<member::EtcdServer> server_;
  std::unique_ptr<client_api::NativeRpcServer> native_;
  std::unique_ptr<EtcdClient> client_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<SnapStore> store_;
};

TEST_F(SnapshotterTest, StartupTakesFullSnapshotWhenStoreIsEmpty) {
  Put("a", "1");
  Put("b", "2");
  int64_t rev = Put("c", "3");
  Snapshotter s(*store_, *client_, Options());
  EXPECT_FALSE(s.active());
  EXPECT_EQ(s.TriggerFull(false).status().code(), Code::kFailedPrecondition);
  Running run(s);
  ASSERT_TRUE(run.WaitActive());

  auto all = List();
  ASSERT_EQ(all.size(), 1u);
  const SnapshotInfo& full = all[0];
  EXPECT_EQ(full.kind, SnapshotKind::kFull);
  EXPECT_EQ(full.start_revision, 0);
  EXPECT_EQ(full.last_revision, rev);
  EXPECT_FALSE(full.is_final);
  char want[64];
  snprintf(want, sizeof want, "^Full-00000000-%08lld-[0-9]+\\.gz$", static_cast<long long>(rev));
  EXPECT_TRUE(std::regex_match(full.snap_name, std::regex(want))) << full.snap_name;
  auto age = std::chrono::system_clock::now() - full.created_on;
  EXPECT_LT(age, 60s);
  EXPECT_GT(age, -60s);

  const std::string db = FetchPayload(full);
  EXPECT_TRUE(VerifyFullSnapshotFile(db).ok()) << VerifyFullSnapshotFile(db).ToString();
  EXPECT_TRUE(TempDirEmpty());

  EXPECT_TRUE(run.Finish().ok());
  EXPECT_FALSE(s.active());
  EXPECT_EQ(s.TriggerDelta().status().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(TempDirEmpty());
}

TEST_F(SnapshotterTest, ATriggerDuringTheStartupSnapshotIsServedAfterIt) {
  const int64_t before = Put("a", "1");
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> verified{0};
  auto o = Options();
  o.before_verify = [&](const std::string&) {
    if (verified++ == 0) released.wait_for(10s);  // holds the start-up snapshot
  };
  Snapshotter s(*store_, *client_, o);
  Running run(s);
  ASSERT_TRUE(WaitUntil([&] { return verified.load() == 1; }));
  EXPECT_FALSE(s.active());
  auto triggered = std::async(std::launch::async, [&] { return s.TriggerFull(false); });
  // Queued while the start-up snapshot is held, and not answered.
  ASSERT_TRUE(WaitUntil([&] { return s.queued_triggers() == 1; }));
  EXPECT_EQ(triggered.wait_for(0s), std::future_status::timeout) << "answered before start-up";
  EXPECT_FALSE(s.active());
  const int64_t rev = Put("b", "2");
  release.set_value();
  auto f = triggered.get();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->kind, SnapshotKind::kFull);
  EXPECT_EQ(rev, before + 1);
  EXPECT_EQ(f->last_revision, rev);
  EXPECT_EQ(ListKind(SnapshotKind::kFull).size(), 2u);  // the start-up one, then the triggered
  EXPECT_TRUE(run.Finish().ok());
}

TEST_F(SnapshotterTest, TriggeredDeltaHoldsExactlyTheWrites) {
  Snapshotter s(*store_, *client_, Options());
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  auto fulls = ListKind(SnapshotKind::kFull);
  ASSERT_EQ(fulls.size(), 1u);
  const int64_t base = fulls[0].last_revision;

  int64_t r1 = Put("a", "1");
  int64_t r2 = Put("a", "2");
  int64_t r3 = Put("b", std::string("\0\xff", 2));
  int64_t r4 = Delete("a");
  ASSERT_EQ(r1, base + 1);

  auto d = s.TriggerDelta();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(d->has_value());
  const SnapshotInfo& incr = **d;
  EXPECT_EQ(incr.kind, SnapshotKind::kIncr);
  EXPECT_EQ(incr.start_revision, base + 1);
  EXPECT_EQ(incr.last_revision, r4);
  char want[64];
  snprintf(want, sizeof want, "^Incr-%08lld-%08lld-[0-9]+\\.gz$", static_cast<long long>(base + 1),
           static_cast<long long>(r4));
  EXPECT_TRUE(std::regex_match(incr.snap_name, std::regex(want))) << incr.snap_name;

  auto listed = ListKind(SnapshotKind::kIncr);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].snap_name, incr.snap_name);
  auto ev = DeltaEvents(listed[0]);
  ASSERT_EQ(ev.size(), 4u);

  EXPECT_EQ(ev[0].event.type(), mvccpb::Event::PUT);
  EXPECT_EQ(ev[0].event.kv().key(), "a");
  EXPECT_EQ(ev[0].event.kv().value(), "1");
  EXPECT_EQ(ev[0].event.kv().mod_revision(), r1);
  EXPECT_EQ(ev[0].event.kv().create_revision(), r1);
  EXPECT_EQ(ev[0].event.kv().version(), 1);
  EXPECT_FALSE(ev[0].event.has_prev_kv());

  EXPECT_EQ(ev[1].event.type(), mvccpb::Event::PUT);
  EXPECT_EQ(ev[1].event.kv().value(), "2");
  EXPECT_EQ(ev[1].event.kv().mod_revision(), r2);
  EXPECT_EQ(ev[1].event.kv().create_revision(), r1);
  EXPECT_EQ(ev[1].event.kv().version(), 2);
  ASSERT_TRUE(ev[1].event.has_prev_kv());
  EXPECT_EQ(ev[1].event.prev_kv().value(), "1");
  EXPECT_EQ(ev[1].event.prev_kv().mod_revision(), r1);

  EXPECT_EQ(ev[2].event.kv().key(), "b");
  EXPECT_EQ(ev[2].event.kv().value(), std::string("\0\xff", 2));
  EXPECT_EQ(ev[2].event.kv().mod_revision(), r3);

  EXPECT_EQ(ev[3].event.type(), mvccpb::Event::DELETE);
  EXPECT_EQ(ev[3].event.kv().key(), "a");
  EXPECT_EQ(ev[3].event.kv().mod_revision(), r4);
  ASSERT_TRUE(ev[3].event.has_prev_kv());
  EXPECT_EQ(ev[3].event.prev_kv().value(), "2");
  EXPECT_EQ(ev[3].event.prev_kv().mod_revision(), r2);

  // The next delta continues where this one ended.
  int64_t r5 = Put("c", "3");
  auto d2 = s.TriggerDelta();
  ASSERT_TRUE(d2.ok() && d2->has_value()) << d2.status().ToString();
  EXPECT_EQ((*d2)->start_revision, r4 + 1);
  EXPECT_EQ((*d2)->last_revision, r5);
  auto ev2 = DeltaEvents(**d2);
  ASSERT_EQ(ev2.size(), 1u);
  EXPECT_EQ(ev2[0].event.kv().key(), "c");
  EXPECT_TRUE(TempDirEmpty());
  EXPECT_TRUE(run.Finish().ok());
}

TEST_F(SnapshotterTest, TriggeredDeltaWithoutEventsUploadsNothing) {
  Snapshotter s(*store_, *client_, Options());
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  auto before = List();
  auto d = s.TriggerDelta();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->has_value());
  EXPECT_EQ(List().size(), before.size());
  EXPECT_TRUE(ListKind(SnapshotKind::kIncr).empty());
  EXPECT_TRUE(run.Finish().ok());
}

TEST_F(SnapshotterTest, DeltasOffRefuseTriggeredDelta) {
  auto o = Options();
  o.delta_period = 500ms;
  Snapshotter s(*store_, *client_, o);
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  Put("a", "1");
  EXPECT_EQ(s.TriggerDelta().status().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(ListKind(SnapshotKind::kIncr).empty());
  EXPECT_TRUE(run.Finish().ok());
}

TEST_F(SnapshotterTest, TriggeredFinalFullSnapshotIsNamedFinalAndNotRepeated) {
  Snapshotter s(*store_, *client_, Options());
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  int64_t rev = Put("k", "v");
  auto f = s.TriggerFull(true);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->is_final);
  EXPECT_EQ(f->last_revision, rev);
  EXPECT_TRUE(f->snap_name.ends_with(".gz.final")) << f->snap_name;
  auto fulls = ListKind(SnapshotKind::kFull);
  ASSERT_EQ(fulls.size(), 2u);
  EXPECT_TRUE(fulls[1].is_final);
  EXPECT_EQ(fulls[1].snap_name, f->snap_name);
  EXPECT_TRUE(VerifyFullSnapshotFile(FetchPayload(fulls[1])).ok());

  // Nothing changed since: the final snapshot is not taken again.
  auto again = s.TriggerFull(true);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->snap_name, f->snap_name);
  EXPECT_EQ(ListKind(SnapshotKind::kFull).size(), 2u);
  EXPECT_TRUE(run.Finish().ok());
}

// The delta timer runs on the snapshotter's clock: with no request and no real time to wait
// for, moving the clock by delta_period cuts the delta, stamped with the clock's time.
TEST_F(SnapshotterTest, DeltaTimerFiresByItself) {
  common::ManualClock clock;
  const auto o = Options();  // delta_period 60 s
  Snapshotter s(*store_, *client_, o, clock);
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  const SnapshotInfo full = ListKind(SnapshotKind::kFull).at(0);
  EXPECT_EQ(full.created_on, clock.WallNow());
  const int64_t rev = Put("timer", "x");
  // Every period fires the timer; one that fires before the watch has delivered the write finds
  // nothing to save and re-arms.
  ASSERT_TRUE(WaitUntil([&] {
    if (!ListKind(SnapshotKind::kIncr).empty()) return true;
    clock.Advance(o.delta_period);
    return false;
  }));
  auto incr = ListKind(SnapshotKind::kIncr);
  ASSERT_EQ(incr.size(), 1u);
  EXPECT_EQ(incr[0].start_revision, full.last_revision + 1);
  EXPECT_EQ(incr[0].last_revision, rev);
  const auto taken_after = incr[0].created_on - full.created_on;
  EXPECT_GT(taken_after, 0s);
  EXPECT_EQ(taken_after % o.delta_period, 0s) << "taken when a period ended";
  auto ev = DeltaEvents(incr[0]);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event.kv().key(), "timer");
  EXPECT_TRUE(run.Finish().ok());
}

TEST_F(SnapshotterTest, MemoryLimitCutsDeltaEarly) {
  auto o = Options();
  o.delta_memory_limit = 2000;
  common::ManualClock clock;  // never moved: the delta timer cannot fire
  Snapshotter s(*store_, *client_, o, clock);
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  const int64_t base = ListKind(SnapshotKind::kFull).at(0).last_revision;
  const int kWrites = 20;
  // About 370 bytes of JSON per event: the first ten cross the limit.
  auto put = [&](int i) { return Put("key" + std::to_string(i), std::string(200, 'v')); };
  for (int i = 0; i < kWrites / 2; ++i) put(i);
  // Only the memory limit cuts deltas: the delta timer's clock stands still.
  ASSERT_TRUE(WaitUntil([&] { return !ListKind(SnapshotKind::kIncr).empty(); }, 5s));
  int64_t last = 0;
  for (int i = kWrites / 2; i < kWrites; ++i) last = put(i);
  auto first = ListKind(SnapshotKind::kIncr).at(0);
  EXPECT_EQ(first.start_revision, base + 1);
  EXPECT_LT(first.last_revision, last);
  auto d = s.TriggerDelta();
  ASSERT_TRUE(d.ok()) << d.status().ToString();

  // Together the deltas hold every write once, in order, without gaps.
  auto incr = ListKind(SnapshotKind::kIncr);
  ASSERT_GE(incr.size(), 2u);
  int64_t next = base + 1;
  int n = 0;
  for (const auto& i : incr) {
    EXPECT_EQ(i.start_revision, next);
    auto ev = DeltaEvents(i);
    ASSERT_FALSE(ev.empty());
    for (const auto& e : ev) {
      EXPECT_EQ(e.event.kv().mod_revision(), base + 1 + n);
      EXPECT_EQ(e.event.kv().key(), "key" + std::to_string(n));
      ++n;
    }
    EXPECT_EQ(ev.back().event.kv().mod_revision(), i.last_revision);
    next = i.last_revision + 1;
  }
  EXPECT_EQ(n, kWrites);
  EXPECT_TRUE(run.Finish().ok());
}

// Full snapshots follow the schedule on the snapshotter's clock: each is taken when the clock
// reaches the next cron time, is named with that time and covers the writes before it.
TEST_F(SnapshotterTest, ScheduledFullSnapshotsAreTakenAtTheCronTimes) {
  common::ManualClock clock;
  auto o = Options();
  o.schedule = Schedule("*/30 * * * *");
  Snapshotter s(*store_, *client_, o, clock);
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  ASSERT_EQ(ListKind(SnapshotKind::kFull).size(), 1u);
  EXPECT_EQ(ListKind(SnapshotKind::kFull)[0].created_on, clock.WallNow());
  for (size_t taken = 2; taken <= 3; ++taken) {
    SCOPED_TRACE(taken);
    const auto next = o.schedule.Next(clock.WallNow());
    ASSERT_TRUE(next.has_value());
    const int64_t rev = Put("x", std::to_string(taken));
    clock.Advance(*next - clock.WallNow());
    ASSERT_TRUE(WaitUntil([&] { return ListKind(SnapshotKind::kFull).size() == taken; }));
    const SnapshotInfo f = ListKind(SnapshotKind::kFull).back();
    EXPECT_EQ(f.created_on, *next);
    EXPECT_EQ(f.last_revision, rev);
  }
  EXPECT_TRUE(run.Finish().ok());
}

TEST_F(SnapshotterTest, RestartWithRecentFullTakesDeltaOfEventsSince) {
  int64_t full_rev = 0;
  {
    Snapshotter s(*store_, *client_, Options());
    Running run(s);
    ASSERT_TRUE(run.WaitActive());
    full_rev = ListKind(SnapshotKind::kFull).at(0).last_revision;
    EXPECT_TRUE(run.Finish().ok());
  }
  int64_t r1 = Put("after", "1");
  int64_t r2 = Delete("after");
  {
    Snapshotter s(*store_, *client_, Options());
    Running run(s);
    ASSERT_TRUE(run.WaitActive());
    auto fulls = ListKind(SnapshotKind::kFull);
    ASSERT_EQ(fulls.size(), 1u);  // no new full
    EXPECT_EQ(fulls[0].last_revision, full_rev);
    auto incr = ListKind(SnapshotKind::kIncr);
    ASSERT_EQ(incr.size(), 1u);
    EXPECT_EQ(incr[0].start_revision, full_rev + 1);
    EXPECT_EQ(incr[0].last_revision, r2);
    auto ev = DeltaEvents(incr[0]);
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[0].event.kv().mod_revision(), r1);
    EXPECT_EQ(ev[1].event.type(), mvccpb::Event::DELETE);
    EXPECT_EQ(ev[1].event.kv().mod_revision(), r2);

    // The watch goes on from there.
    int64_t r3 = Put("later", "1");
    auto d = s.TriggerDelta();
    ASSERT_TRUE(d.ok() && d->has_value()) << d.status().ToString();
    EXPECT_EQ((*d)->start_revision, r2 + 1);
    EXPECT_EQ((*d)->last_revision, r3);
    EXPECT_TRUE(run.Finish().ok());
  }
  // Nothing new since the last delta: a restart takes no snapshot at all.
  {
    const size_t before = List().size();
    Snapshotter s(*store_, *client_, Options());
    Running run(s);
    ASSERT_TRUE(run.WaitActive());
    EXPECT_EQ(List().size(), before);
    EXPECT_TRUE(run.Finish().ok());
  }
}

TEST_F(SnapshotterTest, RestartAfterFinalFullTakesFull) {
  {
    Snapshotter s(*store_, *client_, Options());
    Running run(s);
    ASSERT_TRUE(run.WaitActive());
    Put("k", "v");
    ASSERT_TRUE(s.TriggerFull(true).ok());
    EXPECT_TRUE(run.Finish().ok());
  }
  int64_t rev = Put("k", "w");
  Snapshotter s(*store_, *client_, Options());
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  auto fulls = ListKind(SnapshotKind::kFull);
  ASSERT_EQ(fulls.size(), 3u);
  EXPECT_FALSE(fulls.back().is_final);
  EXPECT_EQ(fulls.back().last_revision, rev);
  EXPECT_TRUE(ListKind(SnapshotKind::kIncr).empty());
  EXPECT_TRUE(run.Finish().ok());
}

TEST_F(SnapshotterTest, RestartAfterCompactionFallsBackToFull) {
  {
    Snapshotter s(*store_, *client_, Options());
    Running run(s);
    ASSERT_TRUE(run.WaitActive());
    EXPECT_TRUE(run.Finish().ok());
  }
  Put("a", "1");
  int64_t rev = Put("a", "2");
  Compact(rev);  // the events since the full snapshot are gone
  Snapshotter s(*store_, *client_, Options());
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  auto fulls = ListKind(SnapshotKind::kFull);
  ASSERT_EQ(fulls.size(), 2u);
  EXPECT_EQ(fulls.back().last_revision, rev);
  EXPECT_TRUE(ListKind(SnapshotKind::kIncr).empty());
  EXPECT_TRUE(run.Finish().ok());
}

TEST_F(SnapshotterTest, StopEndsRunAndIsFinal) {
  Snapshotter s(*store_, *client_, Options());
  {
    Running run(s);
    ASSERT_TRUE(run.WaitActive());
    EXPECT_TRUE(run.Finish().ok());
  }
  // A stopped snapshotter does not start again.
  const size_t before = List().size();
  Running again(s);
  auto st = again.WaitEnd(5s);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->ok());
  EXPECT_FALSE(s.active());
  EXPECT_EQ(List().size(), before);
}

TEST_F(SnapshotterTest, SnapshotFailingVerificationIsNotUploaded) {
  std::atomic<bool> damage{true};
  auto o = Options();
  o.before_verify = [&damage](const std::string& path) {
    if (!damage.load()) return;
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x01;
    f.seekp(100);
    f.write(&c, 1);
  };
  Snapshotter s(*store_, *client_, o);
  {
    // The start-up full snapshot is damaged: Run fails, nothing is uploaded.
    Running run(s);
    auto st = run.WaitEnd(10s);
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->code(), Code::kDataLoss) << st->ToString();
    EXPECT_TRUE(List().empty());
    EXPECT_TRUE(TempDirEmpty());
  }
  damage = false;
  {
    Running run(s);
    ASSERT_TRUE(run.WaitActive());
    ASSERT_EQ(ListKind(SnapshotKind::kFull).size(), 1u);
    Put("k", "v");
    damage = true;
    auto f = s.TriggerFull(false);
    EXPECT_EQ(f.status().code(), Code::kDataLoss) << f.status().ToString();
    // A failed full snapshot ends the snapshotter.
    auto st = run.WaitEnd(10s);
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->code(), Code::kDataLoss);
    EXPECT_EQ(ListKind(SnapshotKind::kFull).size(), 1u);
    EXPECT_TRUE(TempDirEmpty());
  }
  damage = false;
  {
    // The full snapshot failed last time: the next start takes one although the latest is
    // recent enough for a delta.
    Running run(s);
    ASSERT_TRUE(run.WaitActive());
    EXPECT_EQ(ListKind(SnapshotKind::kFull).size(), 2u);
    EXPECT_TRUE(ListKind(SnapshotKind::kIncr).empty());
    // A damaged delta is refused too.
    Put("k", "w");
    damage = true;
    auto d = s.TriggerDelta();
    EXPECT_EQ(d.status().code(), Code::kDataLoss) << d.status().ToString();
    EXPECT_TRUE(ListKind(SnapshotKind::kIncr).empty());
    auto st = run.WaitEnd(10s);
    ASSERT_TRUE(st.has_value());
    EXPECT_FALSE(st->ok());
  }
}

double UnixSeconds(std::chrono::system_clock::time_point t) {
  return static_cast<double>(std::chrono::system_clock::to_time_t(t));
}

uint64_t Count(const common::Histogram& h) { return h.Read().count; }

// gardener's snapshot metrics, moved as its snapshotter moves them: a full snapshot sets the
// latest revision and time and clears "required"; writes set it; a delta clears the delta's.
TEST_F(SnapshotterTest, SnapshotsMoveTheSnapshotMetrics) {
  int64_t rev = Put("a", "1");
  SidecarMetrics m;
  auto o = Options();
  o.metrics = &m;
  Snapshotter s(*store_, *client_, o);
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  auto fulls = ListKind(SnapshotKind::kFull);
  ASSERT_EQ(fulls.size(), 1u);
  EXPECT_EQ(Count(m.SnapshotDuration(MetricKind::kFull).succeeded), 1u);
  EXPECT_EQ(Count(m.SnapshotDuration(MetricKind::kFull).failed), 0u);
  EXPECT_EQ(m.LatestRevision(MetricKind::kFull).Value(), static_cast<double>(rev));
  EXPECT_EQ(m.LatestTimestamp(MetricKind::kFull).Value(), UnixSeconds(fulls[0].created_on));
  EXPECT_EQ(m.SnapshotRequired(MetricKind::kFull).Value(), 0);
  EXPECT_EQ(m.SnapshotRequired(MetricKind::kIncr).Value(), 0);
  EXPECT_NE(m.Text().find("\netcdbr_snapshot_latest_revision{kind=\"Full\"} " +
                          std::to_string(rev) + "\n"),
            std::string::npos);

  // A write the watch delivers: both kinds are required.
  Put("b", "2");
  rev = Put("c", "3");
  ASSERT_TRUE(WaitUntil([&] {
    return m.SnapshotRequired(MetricKind::kIncr).Value() == 1 &&
           m.SnapshotRequired(MetricKind::kFull).Value() == 1;
  }));
  auto d = s.TriggerDelta();
  ASSERT_TRUE(d.ok() && d->has_value()) << d.status().ToString();
  EXPECT_EQ(Count(m.SnapshotDuration(MetricKind::kIncr).succeeded), 1u);
  EXPECT_EQ(m.LatestRevision(MetricKind::kIncr).Value(), static_cast<double>(rev));
  EXPECT_EQ(m.LatestTimestamp(MetricKind::kIncr).Value(), UnixSeconds((*d)->created_on));
  EXPECT_EQ(m.SnapshotRequired(MetricKind::kIncr).Value(), 0);
  EXPECT_EQ(m.SnapshotRequired(MetricKind::kFull).Value(), 1);
  EXPECT_EQ(m.latest_deltas.Value(), 1);
  EXPECT_EQ(m.latest_deltas_revisions.Value(),
            static_cast<double>((*d)->last_revision - (*d)->start_revision));

  auto f = s.TriggerFull(false);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Count(m.SnapshotDuration(MetricKind::kFull).succeeded), 2u);
  EXPECT_EQ(m.SnapshotRequired(MetricKind::kFull).Value(), 0);
  EXPECT_EQ(m.latest_deltas.Value(), 0);
  EXPECT_EQ(m.latest_deltas_revisions.Value(), 0);
  EXPECT_TRUE(run.Finish().ok());
  EXPECT_EQ(m.SnapshotterFailures().size(), 1u);  // the pre-initialised error=""

  // A new term's snapshotter reads the latest set: a full without deltas dates both kinds.
  Snapshotter next(*store_, *client_, o);
  Running again(next);
  ASSERT_TRUE(again.WaitActive());
  EXPECT_EQ(m.LatestTimestamp(MetricKind::kIncr).Value(), UnixSeconds(f->created_on));
  EXPECT_EQ(Count(m.SnapshotDuration(MetricKind::kFull).succeeded), 2u);  // nothing new taken
  EXPECT_TRUE(again.Finish().ok());
}

TEST_F(SnapshotterTest, AFailedSnapshotCountsASnapshotterFailure) {
  SidecarMetrics m;
  auto o = Options();
  o.metrics = &m;
  o.before_verify = [](const std::string& path) { WriteFile(path, "not a snapshot"); };
  Snapshotter s(*store_, *client_, o);
  Running run(s);
  auto st = run.WaitEnd(10s);
  ASSERT_TRUE(st.has_value());
  ASSERT_FALSE(st->ok());
  auto failures = m.SnapshotterFailures();
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[""], 0u);
  EXPECT_EQ(failures[st->message()], 1u) << st->message();
  // Refused before the upload: not timed (gardener times the upload's outcome).
  EXPECT_EQ(Count(m.SnapshotDuration(MetricKind::kFull).failed), 0u);
  EXPECT_EQ(m.SnapshotRequired(MetricKind::kFull).Value(), 1);
}

// GC runs on the snapshotter's clock, every gc_period, judging ages by the clock's time.
TEST_F(SnapshotterTest, GarbageCollectionKeepsNewestFullsLimitBased) {
  // Far from real time: the old deltas are garbage only by the clock's reading (by the real
  // clock they would not be created yet).
  common::ManualClock clock(std::chrono::system_clock::time_point(4102444800s));  // 2100-01-01
  for (int i = 0; i < 50; ++i) Put("fill" + std::to_string(i), "x");
  // Four old streams (a full and a delta each), older than a day: start-up takes a full.
  const auto now = clock.WallNow();
  for (int i = 1; i <= 4; ++i) {
    auto created = now - std::chrono::hours(100 - i);
    SaveFake(SnapshotKind::kFull, 0, i * 10, created);
    SaveFake(SnapshotKind::kIncr, i * 10 + 1, i * 10 + 5, created + 1min);
  }
  auto o = Options();
  o.gc.policy = GcPolicy::kLimitBased;
  o.gc.max_backups = 2;
  o.gc_period = 60s;
  SidecarMetrics m;
  o.metrics = &m;
  Snapshotter s(*store_, *client_, o, clock);
  Running run(s);
  ASSERT_TRUE(run.WaitActive());
  auto fulls = ListKind(SnapshotKind::kFull);
  ASSERT_EQ(fulls.size(), 5u);
  const std::string latest = fulls.back().snap_name;
  EXPECT_GT(fulls.back().last_revision, 50);
  // One period later the newest two fulls survive (the latest and the one at 40); older streams
  // lose their deltas; the latest stream keeps its own.
  clock.Advance(o.gc_period);
  ASSERT_TRUE(WaitUntil([&] { return List().size() == 2; })) << List().size();
  auto left = List();
  EXPECT_EQ(left[0].kind, SnapshotKind::kFull);
  EXPECT_EQ(left[0].last_revision, 40);
  EXPECT_EQ(left[1].snap_name, latest);
  Put("more", "1");
  auto d = s.TriggerDelta();
  ASSERT_TRUE(d.ok() && d->has_value());
  // Two more periods. Each run deletes a fresh delta of the older stream (so it did run), and
  // leaves the latest stream, now with a delta of its own, intact.
  for (int period = 2; period <= 3; ++period) {
    SCOPED_TRACE(period);
    SaveFake(SnapshotKind::kIncr, 41, 45, now - 99h);
    ASSERT_EQ(List().size(), 4u);
    clock.Advance(o.gc_period);
    ASSERT_TRUE(WaitUntil([&] { return List().size() == 3; })) << List().size();
    auto after = List();
    EXPECT_EQ(after[0].last_revision, 40);
    EXPECT_EQ(after[1].snap_name, latest);
    EXPECT_EQ(after[2].snap_name, (*d)->snap_name);
  }
  // Every deletion counted by kind: three fulls, four deltas, then one delta a period.
  EXPECT_TRUE(WaitUntil([&] { return m.Gc(MetricKind::kIncr).succeeded.Value() == 6; }))
      << m.Gc(MetricKind::kIncr).succeeded.Value();
  EXPECT_EQ(m.Gc(MetricKind::kFull).succeeded.Value(), 3u);
  EXPECT_EQ(m.Gc(MetricKind::kFull).failed.Value() + m.Gc(MetricKind::kIncr).failed.Value(), 0u);
  EXPECT_EQ(m.Gc(MetricKind::kChunk).succeeded.Value(), 0u);
  EXPECT_EQ(m.SnapshotterFailures().size(), 1u);
  EXPECT_TRUE(run.Finish().ok());
}

// Backups written by the snapshotter, restored by the restorer (the sidecar's restore path
// without processes): a full snapshot, then a delta of puts, overwrites and deletes.
class RestoreTest : public SnapshotterTest {
 protected:
  // Takes the start-up full snapshot and one delta; returns the latest set.
  LatestSet BackUp() {
    Snapshotter s(*store_, *client_, Options());
    Running run(s);
    EXPECT_TRUE(run.WaitActive());
    for (int i = 0; i < 10; ++i) Put("k" + std::to_string(i), "v" + std::to_string(i));
    Put("k3", "changed");
    Delete("k4");
    auto d = s.TriggerDelta();
    EXPECT_TRUE(d.ok() && d->has_value()) << d.status().ToString();
    EXPECT_TRUE(run.Finish().ok());
    std::vector<SnapshotInfo> all = List();
    SortSnapshots(all);
    return FindLatestSet(all);
  }
  RestoreOptions RestoreOpts() {
    RestoreOptions o;
    o.target.name = "t";
    o.target.initial_cluster = "t=http://127.0.0.1:2380";
    o.target.initial_advertise_peer_urls = {"http://127.0.0.1:2380"};
    o.temp_dir = root_ + "/restore.tmp";
    return o;
  }
  // The stored object of `s` in the Local store.
  std::string ObjectPath(const SnapshotInfo& s) {
    for (const auto& e : fs::recursive_directory_iterator(root_ + "/store")) {
      if (e.path().filename() == s.snap_name) return e.path().string();
    }
    ADD_FAILURE() << "no object " << s.snap_name;
    return "";
  }
};

TEST_F(RestoreTest, FullAndDeltaRebuildTheBackedUpRevision) {
  LatestSet set = BackUp();
  ASSERT_TRUE(set.full.has_value());
  ASSERT_EQ(set.deltas.size(), 1u);
  const std::string dir = root_ + "/restored";
  Status st = RestoreFromBackup(*store_, set, dir, RestoreOpts());
  ASSERT_TRUE(st.ok()) << st.ToString();
  data_dir::DataDirCheck check = data_dir::CheckDataDir(dir, /*full=*/true);
  EXPECT_EQ(check.state, data_dir::DataDirState::kValid) << check.detail;
  EXPECT_EQ(check.revision, set.LastRevision());
  EXPECT_FALSE(fs::exists(dir + ".part"));
  EXPECT_FALSE(fs::exists(root_ + "/restore.tmp")) << "downloads left behind";
}

// gardener's initializer times the validation and the single-node restoration, each by outcome.
TEST_F(RestoreTest, InitializationTimesValidationAndRestoration) {
  ::unsetenv("POD_NAMESPACE");  // no safe-guard file written beside the directory
  LatestSet set = BackUp();
  ASSERT_TRUE(set.full.has_value());
  ServerOptions o;
  o.restoration.data_dir = root_ + "/member";
  o.restoration.temp_dir = root_ + "/restore.tmp";
  o.store.temp_dir = root_ + "/snapstore.tmp";
  SidecarMetrics m;
  InitializerContext ctx;
  ctx.options = &o;
  ctx.store = store_.get();
  ctx.member_name = "t";
  ctx.restore_target = RestoreOpts().target;
  ctx.metrics = &m;
  Status st = Initialize(ctx, ValidationMode::kSanity);  // no data directory: restored
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(m.cluster_size.Value(), 1);
  EXPECT_EQ(Count(m.validation.succeeded), 1u);
  EXPECT_EQ(Count(m.validation.failed), 0u);
  EXPECT_EQ(Count(m.restoration_single_node.succeeded), 1u);
  EXPECT_EQ(Count(m.restoration_single_node.failed), 0u);
  EXPECT_EQ(m.latest_deltas.Value(), 1);

  st = Initialize(ctx, ValidationMode::kFull);  // valid now: validated, nothing restored
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Count(m.validation.succeeded), 2u);
  EXPECT_EQ(Count(m.restoration_single_node.succeeded), 1u);

  // A damaged backup fails the restoration of a missing directory.
  fs::remove_all(o.restoration.data_dir);
  ASSERT_TRUE(testsupport::FlipByte(ObjectPath(*set.full), 100, 0x04));
  st = Initialize(ctx, ValidationMode::kSanity);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(Count(m.validation.succeeded), 3u);
  EXPECT_EQ(Count(m.restoration_single_node.failed), 1u);
  EXPECT_EQ(
      Count(m.restoration_single_member.succeeded) + Count(m.restoration_single_member.failed), 0u);
}

TEST_F(RestoreTest, ADamagedObjectFailsTheRestoreNamingItAndKeepsTheDataDirectory) {
  LatestSet set = BackUp();
  ASSERT_TRUE(set.full.has_value());
  ASSERT_EQ(set.deltas.size(), 1u);
  const std::string dir = root_ + "/existing";
  fs::create_directories(dir);
  WriteFile(dir + "/marker", "kept");
  for (const SnapshotInfo* damaged : {&*set.full, &set.deltas[0]}) {
    SCOPED_TRACE(damaged->snap_name);
    const std::string object = ObjectPath(*damaged);
    const std::string original = ReadFile(object);
    ASSERT_TRUE(testsupport::FlipByte(object, original.size() / 2, 0x04));
    Status st = RestoreFromBackup(*store_, set, dir, RestoreOpts());
    EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
    EXPECT_NE(st.ToString().find(damaged->snap_name), std::string::npos) << st.ToString();
    EXPECT_EQ(ReadFile(dir + "/marker"), "kept");
    EXPECT_FALSE(fs::exists(dir + ".part"));
    WriteFile(object, original);
  }
  // Undamaged again: the same call succeeds.
  Status st = RestoreFromBackup(*store_, set, dir, RestoreOpts());
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(fs::exists(dir + "/marker"));
}

}  // namespace
}  // namespace etcdw::sidecar
