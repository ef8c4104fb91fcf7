// The member in-process (no gRPC): durability across restarts, lease expiry driven by an
// injected clock, quota and alarms, request limits.
#include "etcdw/member/etcd_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/member/quota.h"
#include "etcdw/member/watch_hub.h"
#include "support/await.h"
#include "support/local_member.h"
#include "support/scratch_dir.h"

namespace etcdw::member {
namespace {

using testsupport::Await;

class EtcdServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<testsupport::ScratchDir>("server");
    dir_ = scratch_->path();
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    server_.reset();
    scratch_.reset();
  }

  void Open(const std::string& extra_yaml = "") {
    server_.reset();
    auto s = testsupport::StartLocalMember(dir_, extra_yaml, clock_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }

  Result<etcdserverpb::PutResponse> Put(const std::string& k, const std::string& v,
                                        int64_t lease = 0) {
    etcdserverpb::PutRequest r;
    r.set_key(k);
    r.set_value(v);
    r.set_lease(lease);
    return Await<etcdserverpb::PutResponse>([&](auto cb) { server_->Put(r, cb); });
  }

  Result<etcdserverpb::RangeResponse> Get(const std::string& k) {
    etcdserverpb::RangeRequest r;
    r.set_key(k);
    return Await<etcdserverpb::RangeResponse>([&](auto cb) { server_->Range(r, cb); });
  }

  common::ManualClock clock_;
  std::unique_ptr<testsupport::ScratchDir> scratch_;  // removed by TearDown
  std::string dir_;
  std::unique_ptr<EtcdServer> server_;
};

// Collects what a watch stream of the member writes, completing each write at once.
class ClockedWatchSink : public WatchSink {
 public:
  void StartWrite(std::string wire) override {
    etcdserverpb::WatchResponse r;
    EXPECT_TRUE(r.ParseFromString(wire));
    std::lock_guard lock(mu_);
    written_.push_back(std::move(r));
    pending_ = true;
  }
  void Finish() override {}
  // Completes the writes started so far (each completion may start the next).
  void Complete(WatchStream& s) {
    while (true) {
      {
        std::lock_guard lock(mu_);
        if (!pending_) return;
        pending_ = false;
      }
      s.WriteDone(true);
    }
  }
  std::vector<etcdserverpb::WatchResponse> written() {
    std::lock_guard lock(mu_);
    return written_;
  }

 private:
  std::mutex mu_;
  std::vector<etcdserverpb::WatchResponse> written_;
  bool pending_ = false;
};

// experimental-watch-progress-notify-interval: every interval of the member's clock, each
// synced watcher created with progress_notify that got no event since the last notification
// gets an empty response with its own watch ID and the current revision (etcd's sendLoop
// ticker); watchers without progress_notify never do.
TEST_F(EtcdServerTest, ProgressNotificationsFollowTheMembersClock) {
  Open("experimental-watch-progress-notify-interval: 5s\n");
  ClockedWatchSink sink;
  auto s = server_->watch_hub().NewStream(&sink);
  etcdserverpb::WatchCreateRequest notify;
  notify.set_key("/registry/pods/");
  notify.set_range_end("/registry/pods0");
  notify.set_progress_notify(true);
  notify.set_watch_id(7);
  s->Create(notify);
  etcdserverpb::WatchCreateRequest plain;
  plain.set_key("/registry/nodes/");
  plain.set_range_end("/registry/nodes0");
  plain.set_watch_id(8);
  s->Create(plain);
  auto count = [&](size_t n) {
    testsupport::WaitUntil([&] {
      sink.Complete(*s);
      return sink.written().size() >= n;
    });
    return sink.written();
  };
  ASSERT_EQ(count(2).size(), 2u);
  ASSERT_TRUE(Put("/registry/services/s", "v").ok());  // revision 2, not watched
  // Just before the interval: the ticker looks at the clock and sends nothing.
  clock_.Advance(std::chrono::milliseconds(4900));
  const uint64_t looks = clock_.Looks();
  testsupport::WaitUntil([&] { return clock_.Looks() > looks + 50; });
  sink.Complete(*s);
  EXPECT_EQ(sink.written().size(), 2u);
  clock_.Advance(std::chrono::milliseconds(100));
  auto w = count(3);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[2].watch_id(), 7);
  EXPECT_EQ(w[2].header().revision(), 2);
  EXPECT_EQ(w[2].events_size(), 0);
  EXPECT_FALSE(w[2].created() || w[2].canceled());
  // An event in the interval: the next tick skips the watcher, the one after reports again.
  ASSERT_TRUE(Put("/registry/pods/p", "v").ok());  // revision 3
  w = count(4);
  ASSERT_EQ(w[3].events_size(), 1);
  clock_.Advance(std::chrono::seconds(5));
  const uint64_t looks2 = clock_.Looks();
  testsupport::WaitUntil([&] { return clock_.Looks() > looks2 + 50; });
  sink.Complete(*s);
  EXPECT_EQ(sink.written().size(), 4u);
  clock_.Advance(std::chrono::seconds(5));
  w = count(5);
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[4].watch_id(), 7);
  EXPECT_EQ(w[4].header().revision(), 3);
  EXPECT_EQ(w[4].events_size(), 0);
  s->Close();
}

// The member's ticker feeds its NoLeaderMonitor from the member's clock: a member of a
// two-member cluster whose other member never starts has no leader, and the streams that
// asked for one are cancelled 2 election timeouts (2 x 1 s here) after the ticker first saw it
// without one; a member with a leader cancels nothing however long the clock runs.
TEST_F(EtcdServerTest, RequireLeaderStreamsAreCancelledByTheTickerWithoutALeader) {
  auto cfg = common::ParseConfig(
      "name: t\ninitial-cluster: t=http://127.0.0.1:1,u=http://127.0.0.1:2\n"
      "initial-advertise-peer-urls: http://127.0.0.1:1\ndata-dir: " +
          dir_ +
          "/alone\nlisten-peer-urls: http://127.0.0.1:0\n"
          "listen-client-urls: http://127.0.0.1:0\n",
      "test");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  ASSERT_TRUE(common::PrepareDataDir(*cfg).ok());
  auto opened = EtcdServer::Open(*cfg, clock_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  server_ = std::move(opened).value();
  ASSERT_TRUE(server_->Start().ok());
  std::atomic<int> cancelled{0};
  server_->no_leader_monitor().Register([&] { ++cancelled; });
  EXPECT_EQ(server_->no_leader_monitor().cancel_after(), std::chrono::seconds(2));
  // The ticker's first look at the member without a leader starts the count.
  clock_.Advance(std::chrono::milliseconds(100));
  uint64_t looks = clock_.Looks();
  testsupport::WaitUntil([&] { return clock_.Looks() > looks + 50; });
  for (int i = 0; i < 18; ++i) {
    clock_.Advance(std::chrono::milliseconds(100));
    looks = clock_.Looks();
    testsupport::WaitUntil([&] { return clock_.Looks() > looks + 50; });
  }
  EXPECT_EQ(server_->node().Leader(), 0u);
  EXPECT_EQ(cancelled.load(), 0) << "cancelled before 2 s without a leader";
  clock_.Advance(std::chrono::milliseconds(300));
  ASSERT_TRUE(testsupport::WaitUntil([&] { return cancelled.load() == 1; }));
  EXPECT_EQ(server_->no_leader_monitor().Registered(), 0u);
  server_->Stop();
  server_.reset();

  Open();  // a single member: its own leader
  std::atomic<int> kept{0};
  server_->no_leader_monitor().Register([&] { ++kept; });
  for (int i = 0; i < 50; ++i) {
    clock_.Advance(std::chrono::milliseconds(100));
    looks = clock_.Looks();
    testsupport::WaitUntil([&] { return clock_.Looks() > looks + 20; });
  }
  EXPECT_EQ(kept.load(), 0);
  EXPECT_EQ(server_->no_leader_monitor().Registered(), 1u);
}

TEST_F(EtcdServerTest, WritesSurviveRestart) {
  Open();
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(Put("k" + std::to_string(i), "v" + std::to_string(i)).ok());
  auto before = Get("k49");
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->header().revision(), 51);
  uint64_t term = server_->node().Term();
  EXPECT_FALSE(server_->kv().loaded_saved_index()) << "a first start has no saved key index";
  server_->Stop();
  Open();
  EXPECT_TRUE(server_->kv().loaded_saved_index()) << "a clean stop saves the key index";
  auto after = Get("k49");
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->kvs_size(), 1);
  EXPECT_EQ(after->kvs(0).value(), "v49");
  EXPECT_EQ(after->header().revision(), 51);
  EXPECT_EQ(server_->node().Term(), term + 1);  // each start is a new term, as in etcd
}

// Large entries fill the Raft log's segments long before snapshot-count entries: the log is
// compacted by size too, so a start does not read hundreds of MiB of it.
TEST_F(EtcdServerTest, ALogOfLargeEntriesIsCompactedBySize) {
  Open();
  const std::string value(1 << 20, 'x');
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(Put("big" + std::to_string(i), value).ok()) << i;
  auto segments = [&] {
    std::vector<std::string> names;
    for (const auto& f : std::filesystem::directory_iterator(dir_ + "/member/wal")) {
      if (f.path().extension() == ".wal") names.push_back(f.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  // 200 MiB of entries in 16 MiB segments, compacted past 128 MiB to half the entries.
  auto names = segments();
  ASSERT_FALSE(names.empty());
  EXPECT_LE(names.size(), 10u);
  EXPECT_NE(names.front().substr(17), "0000000000000001.wal") << "the first segment was kept";
  server_->Stop();
  Open();
  auto last = Get("big199");
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->kvs_size(), 1);
  EXPECT_EQ(last->kvs(0).value(), value);
  EXPECT_EQ(last->header().revision(), 201);
}

TEST_F(EtcdServerTest, ProposalsArrivingDuringASyncShareTheNextOne) {
  Open();
  auto& node = server_->node();
  uint64_t before = node.SyncedWrites();
  // 100 proposals issued without waiting: all but the first few queue behind an fsync.
  std::vector<etcdserverpb::PutRequest> reqs(100);
  std::vector<std::future<Result<etcdserverpb::PutResponse>>> done;
  for (int i = 0; i < 100; ++i) {
    reqs[i].set_key("g" + std::to_string(i));
    reqs[i].set_value("v");
    auto p = std::make_shared<std::promise<Result<etcdserverpb::PutResponse>>>();
    done.push_back(p->get_future());
    server_->Put(reqs[i], [p](Result<etcdserverpb::PutResponse> r) { p->set_value(std::move(r)); });
  }
  for (auto& f : done) ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(server_->kv().Rev(), 101);
  EXPECT_LT(node.SyncedWrites() - before, 50u);
}

TEST_F(EtcdServerTest, ConcurrentProposalsAreAllApplied) {
  Open();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        if (Put("t" + std::to_string(t) + "/" + std::to_string(i), "x").ok()) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
  EXPECT_EQ(server_->kv().Rev(), 201);
  // A result is delivered only after its entry is applied.
  EXPECT_EQ(server_->node().AppliedIndex(), server_->node().CommitIndex());
}

// Puts made under a CallerStep, each awaited; returns how many were applied (their results
// delivered) on the calling thread. `may_step` is passed to Finish.
int PutsAppliedOnTheCaller(EtcdServer& server, int puts, bool may_step) {
  int here = 0;
  for (int i = 0; i < puts; ++i) {
    etcdserverpb::PutRequest r;
    r.set_key("c" + std::to_string(i));
    r.set_value("v");
    auto p = std::make_shared<std::promise<std::thread::id>>();
    auto applied_on = p->get_future();
    {
      RaftNode::CallerStep step(server.node());
      {
        RaftNode::CallerStep nested(server.node());  // no effect: the outer one steps
        server.Put(r, [p](Result<etcdserverpb::PutResponse> res) {
          EXPECT_TRUE(res.ok()) << res.status().ToString();
          p->set_value(std::this_thread::get_id());
        });
        EXPECT_FALSE(nested.Finish());
      }
      step.Finish(may_step);
    }
    if (applied_on.get() == std::this_thread::get_id()) ++here;
  }
  return here;
}

// A single member's lone write runs its Raft step on the proposer's thread (no hand-off to the
// Raft thread and back) unless the proposer says it has other work; either way it is applied.
TEST_F(EtcdServerTest, ACallerStepAppliesALoneWriteOnTheCallersThread) {
  Open();
  // Nearly every put steps here; but on a loaded machine the Raft thread, preempted while it
  // steps (a tick, or a write it was woken for), keeps the turn for many puts in a row (a CI
  // run saw 20 in a row): batches of 20 until one is applied here, at most 10.
  int puts = 0;
  int here = 0;
  while (here == 0 && puts < 200) {
    here += PutsAppliedOnTheCaller(*server_, 20, /*may_step=*/true);
    puts += 20;
  }
  EXPECT_GE(here, 1);
  EXPECT_EQ(server_->kv().Rev(), 1 + puts);
  EXPECT_EQ(PutsAppliedOnTheCaller(*server_, 20, /*may_step=*/false), 0);
  EXPECT_EQ(server_->kv().Rev(), 21 + puts);
  // Durable like any write: the step synced the log.
  Open();
  auto got = Get("c19");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->kvs_size(), 1);
  EXPECT_EQ(got->kvs(0).mod_revision(), 21 + puts);
}

// Operators and profiles tell the member's threads apart by name (ps -L, top -H, perf).
TEST_F(EtcdServerTest, TheMembersThreadsAreNamed) {
  Open();
  std::set<std::string> names;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(t.path() / "comm");
    std::string name;
    std::getline(in, name);
    names.insert(name);
  }
  for (const char* want : {"raft-loop", "member-ticker", "member-tasks", "member-reads",
                           "mvcc-compactor", "peer-transport"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
}

TEST_F(EtcdServerTest, ExpiredLeaseRevokesItsKeysByTheInjectedClock) {
  Open();
  etcdserverpb::LeaseGrantRequest g;
  g.set_ttl(5);
  auto lease =
      Await<etcdserverpb::LeaseGrantResponse>([&](auto cb) { server_->LeaseGrant(g, cb); });
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(Put("leased", "v", lease->id()).ok());
  clock_.Advance(std::chrono::seconds(4));
  server_->RunPeriodicDuties();
  EXPECT_EQ(Get("leased")->kvs_size(), 1);
  clock_.Advance(std::chrono::seconds(2));
  server_->RunPeriodicDuties();
  // The revocation is proposed; it is applied soon after.
  EXPECT_TRUE(testsupport::WaitUntil([&] { return Get("leased")->kvs_size() == 0; }));
  etcdserverpb::LeaseTimeToLiveRequest ttl;
  ttl.set_id(lease->id());
  auto info = Await<etcdserverpb::LeaseTimeToLiveResponse>(
      [&](auto cb) { server_->LeaseTimeToLive(ttl, cb); });
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->ttl(), -1);
}

// Lease expiry is the member's own request: no user's permission limits it once authentication
// is enabled (etcd 3.4 revokes as root). Clients' requests are checked: a client without a token
// may no longer write.
TEST_F(EtcdServerTest, ExpiredLeasesAreRevokedWhileAuthenticationIsEnabled) {
  Open();
  etcdserverpb::LeaseGrantRequest g;
  g.set_ttl(5);
  auto lease =
      Await<etcdserverpb::LeaseGrantResponse>([&](auto cb) { server_->LeaseGrant(g, cb); });
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(Put("leased", "v", lease->id()).ok());
  etcdserverpb::AuthUserAddRequest root;
  root.set_name("root");
  root.mutable_options()->set_no_password(true);
  ASSERT_TRUE(
      Await<etcdserverpb::AuthUserAddResponse>([&](auto cb) { server_->UserAdd(root, cb); }).ok());
  etcdserverpb::AuthUserGrantRoleRequest grant;
  grant.set_user("root");
  grant.set_role("root");
  ASSERT_TRUE(Await<etcdserverpb::AuthUserGrantRoleResponse>([&](auto cb) {
                server_->UserGrantRole(grant, cb);
              }).ok());
  ASSERT_TRUE(
      Await<etcdserverpb::AuthEnableResponse>([&](auto cb) { server_->AuthEnable(cb); }).ok());
  etcdserverpb::PutRequest anonymous;
  anonymous.set_key("k");
  auto refused = Await<etcdserverpb::PutResponse>(
      [&](auto cb) { server_->Put(anonymous, cb, member::AuthInfo{}); });
  EXPECT_EQ(refused.status(), errors::UserEmpty());
  clock_.Advance(std::chrono::seconds(6));
  server_->RunPeriodicDuties();
  EXPECT_TRUE(testsupport::WaitUntil([&] { return Get("leased")->kvs_size() == 0; }));
}

TEST_F(EtcdServerTest, LeasesSurviveRestartWithFullTtl) {
  Open();
  etcdserverpb::LeaseGrantRequest g;
  g.set_id(77);
  g.set_ttl(10);
  ASSERT_TRUE(
      Await<etcdserverpb::LeaseGrantResponse>([&](auto cb) { server_->LeaseGrant(g, cb); }).ok());
  ASSERT_TRUE(Put("l", "v", 77).ok());
  clock_.Advance(std::chrono::seconds(8));
  server_->Stop();
  Open();
  // Refreshed to the full TTL (plus an election timeout) at start, as etcd does.
  clock_.Advance(std::chrono::seconds(9));
  server_->RunPeriodicDuties();
  EXPECT_EQ(Get("l")->kvs_size(), 1);
  etcdserverpb::LeaseTimeToLiveRequest ttl;
  ttl.set_id(77);
  ttl.set_keys(true);
  auto info = Await<etcdserverpb::LeaseTimeToLiveResponse>(
      [&](auto cb) { server_->LeaseTimeToLive(ttl, cb); });
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->grantedttl(), 10);
  ASSERT_EQ(info->keys_size(), 1);
  EXPECT_EQ(info->keys(0), "l");
}

TEST_F(EtcdServerTest, RequestLargerThanMaxRequestBytesIsRejected) {
  Open("max-request-bytes: 1024\n");
  auto r = Put("big", std::string(2000, 'x'));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), errors::RequestTooLarge());
  EXPECT_TRUE(Put("small", std::string(100, 'x')).ok());
}

TEST_F(EtcdServerTest, QuotaRaisesNoSpaceAlarmReadsContinueDisarmRestoresWrites) {
  Open("quota-backend-bytes: 300000\n");
  std::string value(4096, 'q');
  Status last;
  for (int i = 0; i < 500; ++i) {
    auto r = Put("q" + std::to_string(i), value);
    if (!r.ok()) {
      last = r.status();
      break;
    }
  }
  ASSERT_EQ(last, errors::NoSpace());
  // The alarm is raised through the log; wait for it to be applied.
  etcdserverpb::AlarmRequest get;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  etcdserverpb::AlarmResponse alarms;
  while (std::chrono::steady_clock::now() < deadline) {
    auto a = Await<etcdserverpb::AlarmResponse>([&](auto cb) { server_->Alarm(get, cb); });
    ASSERT_TRUE(a.ok());
    alarms = *a;
    if (alarms.alarms_size() == 1) break;
  }
  ASSERT_EQ(alarms.alarms_size(), 1);
  EXPECT_EQ(alarms.alarms(0).alarm(), etcdserverpb::NOSPACE);
  EXPECT_EQ(alarms.alarms(0).memberid(), server_->member_id());
  EXPECT_TRUE(Get("q0").ok());
  EXPECT_EQ(Put("tiny", "x").status(), errors::NoSpace());  // even small writes while armed
  // The alarm survives a restart.
  server_->Stop();
  Open("quota-backend-bytes: 300000\n");
  EXPECT_EQ(Put("tiny", "x").status(), errors::NoSpace());
  EXPECT_EQ(server_->StatusInfo().errors_size(), 1);
  // Raise the quota, disarm: writes work again.
  server_->Stop();
  Open("quota-backend-bytes: 100000000\n");
  etcdserverpb::AlarmRequest disarm;
  disarm.set_action(etcdserverpb::AlarmRequest::DEACTIVATE);
  disarm.set_memberid(server_->member_id());
  disarm.set_alarm(etcdserverpb::NOSPACE);
  auto d = Await<etcdserverpb::AlarmResponse>([&](auto cb) { server_->Alarm(disarm, cb); });
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->alarms_size(), 1);
  EXPECT_TRUE(Put("tiny", "x").ok());
}

// The disk counts as quota: a request is refused once the filesystem would keep less free than
// the reserve (the e2e FullDiskTest fills a real small filesystem).
TEST(QuotaTest, TheDisksFreeSpaceBelowTheReserveRefusesRequests) {
  testsupport::ScratchDir dir("quota");
  ASSERT_FALSE(dir.path().empty());
  auto engine = storage::Engine::Open(dir.path() + "/store", {});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  Quota roomy(**engine, 0, dir.path(), /*disk_reserve=*/0);
  EXPECT_TRUE(roomy.Available(4096));
  EXPECT_GT(roomy.DiskFree(), 4096u);
  Quota full(**engine, -1, dir.path(), /*disk_reserve=*/UINT64_MAX / 2);
  EXPECT_FALSE(full.Available(4096)) << "even with an unlimited quota";
  EXPECT_TRUE(full.Available(0)) << "requests that do not grow the store pass";
  Quota unchecked(**engine, -1, "", UINT64_MAX / 2);
  EXPECT_TRUE(unchecked.Available(4096));
}

}  // namespace
}  // namespace etcdw::member

namespace etcdw::member {
namespace {

TEST_F(EtcdServerTest, RestartIgnoresInitialClusterSettingsLikeEtcd) {
  Open();
  ASSERT_TRUE(Put("k", "v").ok());
  uint64_t id = server_->member_id();
  server_->Stop();
  // The sidecar renders initial-cluster-state: existing for restarts; it must not matter now.
  Open("initial-cluster-state: existing\ninitial-cluster-token: another\n");
  EXPECT_EQ(server_->member_id(), id);
  auto r = Get("k");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kvs_size(), 1);
}

TEST_F(EtcdServerTest, JoiningWithoutOtherMembersIsRefusedClearly) {
  auto cfg = common::ParseConfig(
      "name: t\ndata-dir: " + dir_ + "\ninitial-cluster-state: existing\n", "test");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto s = EtcdServer::Open(*cfg, clock_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("joining an existing cluster needs the peer URLs of its "
                                      "other members"),
            std::string::npos)
      << s.status().ToString();
}

}  // namespace
}  // namespace etcdw::member
