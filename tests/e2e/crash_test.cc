// Crash recovery: concurrent writers, SIGKILL at random moments, restart on the same data
// directory, and check that every acknowledged write survived with its value and revision,
// that nothing unwritten appeared, that revisions never go backwards and that the store opens
// every time. A lease and its key survive the restarts while the lease lives.
//
// The schedule (kill delays, values, operation mix) comes from a seed printed at the start;
// ETCDW_CRASH_SEED=<seed> replays it (thread interleavings still vary from run to run).
// ETCDW_CRASH_SECONDS bounds the run time (default 40).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "servers.h"

namespace etcdw::testing {
namespace {

using etcdserverpb::Compare;

// What the test knows about one key. Keys are unique per writer, so no two writers race on a
// key; a key is written by one Put or Txn and possibly deleted later by its own writer.
struct KeyState {
  enum Kind {
    kPresent,       // acknowledged put: must be there with this value and revision
    kAbsent,        // acknowledged delete (or a lost unacknowledged put seen after restart)
    kMaybePresent,  // put sent but not acknowledged: may be there, and then with this value
    kMaybeDeleted,  // acknowledged put, then a delete that was not acknowledged
  };
  Kind kind = kMaybePresent;
  std::string value;
  int64_t revision = 0;  // the acknowledged revision for kPresent / kMaybeDeleted
};

using KeyMap = std::map<std::string, KeyState>;

struct WriterStats {
  int acked = 0;
  int failed = 0;
  int64_t max_revision = 0;
};

class Writer {
 public:
  Writer(const Member& m, int id, int round, uint64_t seed)
      : id_(id), round_(round), rng_(seed), kv_(etcdserverpb::KV::NewStub(m.NewChannel())) {}

  // Writes until told to stop or until a write fails (the server is gone: further writes would
  // only fail too).
  void Run(const std::atomic<bool>& stop) {
    int64_t seq = 0;
    while (!stop.load() && stats_.failed == 0) {
      int op = static_cast<int>(rng_() % 10);
      if (op < 5) {
        Put(seq++);
      } else if (op < 8 || present_.empty()) {
        PutTwo(seq);
        seq += 2;
      } else {
        DeleteAndPut(seq++);
      }
    }
  }

  KeyMap& keys() { return keys_; }
  const WriterStats& stats() const { return stats_; }

 private:
  std::string Key(int64_t seq) const {
    return "crash/t" + std::to_string(id_) + "/r" + std::to_string(round_) + "/" +
           std::to_string(seq);
  }
  std::string Value(const std::string& key) {
    // Unique, checkable content with a random length (so batches have varied sizes).
    return key + "=" + std::string(rng_() % 300, static_cast<char>('a' + rng_() % 26));
  }
  std::unique_ptr<grpc::ClientContext> Context() { return Ctx(std::chrono::milliseconds(3000)); }
  void Acked(int64_t revision) {
    ++stats_.acked;
    stats_.max_revision = std::max(stats_.max_revision, revision);
  }

  void Put(int64_t seq) {
    std::string key = Key(seq), value = Value(key);
    keys_[key] = {KeyState::kMaybePresent, value, 0};
    etcdserverpb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    etcdserverpb::PutResponse resp;
    if (kv_->Put(Context().get(), req, &resp).ok()) {
      keys_[key] = {KeyState::kPresent, value, resp.header().revision()};
      present_.push_back(key);
      Acked(resp.header().revision());
    } else {
      ++stats_.failed;
    }
  }

  // A transaction creating two keys if the first does not exist yet.
  void PutTwo(int64_t seq) {
    std::string k1 = Key(seq), k2 = Key(seq + 1);
    std::string v1 = Value(k1), v2 = Value(k2);
    keys_[k1] = {KeyState::kMaybePresent, v1, 0};
    keys_[k2] = {KeyState::kMaybePresent, v2, 0};
    etcdserverpb::TxnRequest req;
    Compare* c = req.add_compare();
    c->set_result(Compare::EQUAL);
    c->set_target(Compare::CREATE);
    c->set_key(k1);
    c->set_create_revision(0);
    auto* p1 = req.add_success()->mutable_request_put();
    p1->set_key(k1);
    p1->set_value(v1);
    auto* p2 = req.add_success()->mutable_request_put();
    p2->set_key(k2);
    p2->set_value(v2);
    etcdserverpb::TxnResponse resp;
    if (kv_->Txn(Context().get(), req, &resp).ok()) {
      EXPECT_TRUE(resp.succeeded()) << k1;
      int64_t rev = resp.header().revision();
      keys_[k1] = {KeyState::kPresent, v1, rev};
      keys_[k2] = {KeyState::kPresent, v2, rev};
      present_.push_back(k1);
      present_.push_back(k2);
      Acked(rev);
    } else {
      ++stats_.failed;
    }
  }

  // A transaction deleting one of this writer's keys (compared by value) and creating another.
  void DeleteAndPut(int64_t seq) {
    size_t pick = rng_() % present_.size();
    std::string victim = present_[pick];
    present_.erase(present_.begin() + static_cast<long>(pick));
    KeyState before = keys_[victim];
    std::string key = Key(seq), value = Value(key);
    keys_[key] = {KeyState::kMaybePresent, value, 0};
    keys_[victim].kind = KeyState::kMaybeDeleted;
    etcdserverpb::TxnRequest req;
    Compare* c = req.add_compare();
    c->set_result(Compare::EQUAL);
    c->set_target(Compare::VALUE);
    c->set_key(victim);
    c->set_value(before.value);
    req.add_success()->mutable_request_delete_range()->set_key(victim);
    auto* p = req.add_success()->mutable_request_put();
    p->set_key(key);
    p->set_value(value);
    etcdserverpb::TxnResponse resp;
    if (kv_->Txn(Context().get(), req, &resp).ok()) {
      EXPECT_TRUE(resp.succeeded()) << victim;
      keys_[victim] = {KeyState::kAbsent, before.value, 0};
      keys_[key] = {KeyState::kPresent, value, resp.header().revision()};
      present_.push_back(key);
      Acked(resp.header().revision());
    } else {
      ++stats_.failed;
    }
  }

  int id_;
  int round_;
  std::mt19937_64 rng_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  KeyMap keys_;
  std::vector<std::string> present_;  // keys acknowledged present, candidates for deletion
  WriterStats stats_;
};

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Reads every "crash/" key; fails the test if the read fails.
bool ReadAll(Client& c, std::map<std::string, mvccpb::KeyValue>* out, int64_t* revision) {
  etcdserverpb::RangeResponse resp;
  etcdserverpb::RangeRequest req;
  req.set_key("crash/");
  req.set_range_end("crash0");
  auto st = c.kv->Range(Ctx(std::chrono::seconds(20)).get(), req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  if (!st.ok()) return false;
  out->clear();
  for (const auto& kv : resp.kvs()) (*out)[kv.key()] = kv;
  *revision = resp.header().revision();
  return true;
}

// Checks the store against what the writers know, then fixes the uncertain states to what was
// observed (a write seen after a restart, or seen lost, must stay that way).
void Verify(KeyMap& model, const std::map<std::string, mvccpb::KeyValue>& store, int round) {
  SCOPED_TRACE("after round " + std::to_string(round));
  int errors = 0;
  auto fail = [&](const std::string& what) {
    if (++errors <= 20) ADD_FAILURE() << what;
  };
  for (auto& [key, st] : model) {
    auto it = store.find(key);
    bool there = it != store.end();
    switch (st.kind) {
      case KeyState::kPresent:
        if (!there) {
          fail("acknowledged write lost: " + key + " (revision " + std::to_string(st.revision) +
               ")");
        } else {
          if (it->second.value() != st.value) fail("wrong value for " + key);
          if (it->second.mod_revision() != st.revision ||
              it->second.create_revision() != st.revision || it->second.version() != 1) {
            fail("wrong revisions for " + key + ": acknowledged at " + std::to_string(st.revision) +
                 ", stored " + it->second.ShortDebugString());
          }
        }
        break;
      case KeyState::kAbsent:
        if (there) fail("acknowledged delete undone (or lost write reappeared): " + key);
        break;
      case KeyState::kMaybePresent:
        if (there) {
          if (it->second.value() != st.value) fail("wrong value for unacknowledged " + key);
          st = {KeyState::kPresent, st.value, it->second.mod_revision()};
          if (it->second.create_revision() != st.revision || it->second.version() != 1) {
            fail("wrong revisions for " + key + ": " + it->second.ShortDebugString());
          }
        } else {
          st.kind = KeyState::kAbsent;
        }
        break;
      case KeyState::kMaybeDeleted:
        if (there) {
          if (it->second.value() != st.value || it->second.mod_revision() != st.revision) {
            fail("changed without a write: " + key + ": " + it->second.ShortDebugString());
          }
          st.kind = KeyState::kPresent;
        } else {
          st.kind = KeyState::kAbsent;
        }
        break;
    }
  }
  for (const auto& [key, kv] : store) {
    if (!model.count(key)) fail("key never written: " + key);
  }
}

TEST(CrashTest, AcknowledgedWritesSurviveKill9) {
  const uint64_t seed = EnvOr("ETCDW_CRASH_SEED", std::random_device{}());
  const auto budget = std::chrono::seconds(EnvOr("ETCDW_CRASH_SECONDS", 30));
  const int kWriters = 4;
  const int kMaxRounds = 60;
  std::cout << "[ CRASH    ] seed " << seed << " (reproduce with ETCDW_CRASH_SEED=" << seed << ")"
            << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);

  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start()) << m.log();

  // A long lease with a key: both survive every restart while the lease lives.
  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(600);
  etcdserverpb::LeaseGrantResponse granted;
  ASSERT_TRUE(m.client().lease->LeaseGrant(Ctx().get(), grant, &granted).ok());
  const int64_t lease = granted.id();
  etcdserverpb::PutResponse lease_put;
  ASSERT_TRUE(m.client().Put("lease/key", "leased", lease, &lease_put).ok());

  KeyMap model;
  int64_t last_revision = lease_put.header().revision();  // never decreases
  int64_t total_acked = 0, total_failed = 0;
  int rounds = 0;
  auto start = std::chrono::steady_clock::now();

  for (int round = 1; round <= kMaxRounds && !HasFatalFailure(); ++round) {
    if (round > 2 && std::chrono::steady_clock::now() - start > budget) break;
    rounds = round;
    const int delay_ms = 20 + static_cast<int>(rng() % 281);
    // Most rounds end with SIGKILL; some with SIGTERM (a graceful stop under load); some also
    // kill the next start while it replays its log.
    const int mode = static_cast<int>(rng() % 8);
    const bool graceful = mode == 0;
    const bool kill_restart = mode >= 6;
    const int restart_kill_ms = static_cast<int>(rng() % 60);

    std::vector<std::unique_ptr<Writer>> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.push_back(std::make_unique<Writer>(m, t, round, rng()));
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (auto& w : writers) threads.emplace_back([&w, &stop] { w->Run(stop); });
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    if (graceful) {
      auto rc = m.Stop(std::chrono::seconds(30));
      EXPECT_EQ(rc, 0) << "graceful stop under load failed in round " << round << "\n" << m.log();
    } else {
      m.Kill();
    }
    stop = true;
    for (auto& t : threads) t.join();

    if (kill_restart) {
      // Start on the same data directory (with the member's own config file) and kill it
      // again while it starts.
      std::string config;
      for (const auto& e : std::filesystem::directory_iterator(m.dir())) {
        if (e.path().filename().string().rfind("config-", 0) == 0) config = e.path().string();
      }
      ASSERT_FALSE(config.empty());
      Process p;
      ASSERT_TRUE(p.Start({EtcdWrapperBinary(), "--config", config}, m.dir() + "/member.log"));
      std::this_thread::sleep_for(std::chrono::milliseconds(restart_kill_ms));
      p.Kill();
    }

    int round_acked = 0;
    int64_t round_max = 0;
    for (auto& w : writers) {
      round_acked += w->stats().acked;
      total_failed += w->stats().failed;
      round_max = std::max(round_max, w->stats().max_revision);
      model.merge(w->keys());
    }
    total_acked += round_acked;

    // The store opens after every kill.
    ASSERT_TRUE(m.Start(Settings{}, std::chrono::seconds(60)))
        << "restart failed after round " << round << " (seed " << seed << ")\n"
        << m.log();

    std::map<std::string, mvccpb::KeyValue> store;
    int64_t revision = 0;
    ASSERT_TRUE(ReadAll(m.client(), &store, &revision));
    EXPECT_GE(revision, last_revision) << "revision went backwards after round " << round;
    EXPECT_GE(revision, round_max) << "acknowledged revision lost after round " << round;
    last_revision = std::max(revision, last_revision);
    Verify(model, store, round);

    // The lease and its key are still there.
    etcdserverpb::LeaseTimeToLiveRequest ttl_req;
    ttl_req.set_id(lease);
    ttl_req.set_keys(true);
    etcdserverpb::LeaseTimeToLiveResponse ttl;
    ASSERT_TRUE(m.client().lease->LeaseTimeToLive(Ctx().get(), ttl_req, &ttl).ok());
    EXPECT_GT(ttl.ttl(), 0) << "lease lost after round " << round;
    EXPECT_EQ(ttl.grantedttl(), 600);
    ASSERT_EQ(ttl.keys_size(), 1);
    EXPECT_EQ(ttl.keys(0), "lease/key");
    etcdserverpb::RangeResponse leased;
    ASSERT_TRUE(m.client().Get("lease/key", &leased).ok());
    ASSERT_EQ(leased.kvs_size(), 1) << "leased key lost after round " << round;
    EXPECT_EQ(leased.kvs(0).lease(), lease);
    EXPECT_EQ(leased.kvs(0).value(), "leased");

    std::cout << "[ CRASH    ] round " << round << ": " << (graceful ? "stopped" : "killed")
              << " after " << delay_ms << " ms"
              << (kill_restart
                      ? ", killed the restart after " + std::to_string(restart_kill_ms) + " ms"
                      : "")
              << ", " << round_acked << " writes acknowledged, revision " << revision << std::endl;
    if (HasFailure()) {
      ADD_FAILURE() << "seed " << seed << ", round " << round;
      break;
    }
  }
  std::cout << "[ CRASH    ] " << rounds << " rounds, " << total_acked << " acknowledged writes, "
            << total_failed << " failed or unanswered, " << model.size() << " keys" << std::endl;
  EXPECT_GE(rounds, 3);
  EXPECT_GT(total_acked, 50) << "too few writes to mean anything";

  // Revoking the lease deletes its key, durably.
  etcdserverpb::LeaseRevokeRequest revoke;
  revoke.set_id(lease);
  etcdserverpb::LeaseRevokeResponse revoked;
  ASSERT_TRUE(m.client().lease->LeaseRevoke(Ctx().get(), revoke, &revoked).ok());
  m.Kill();
  ASSERT_TRUE(m.Start()) << m.log();
  etcdserverpb::RangeResponse gone;
  ASSERT_TRUE(m.client().Get("lease/key", &gone).ok());
  EXPECT_EQ(gone.kvs_size(), 0);
  etcdserverpb::LeaseLeasesRequest list_req;
  etcdserverpb::LeaseLeasesResponse list;
  ASSERT_TRUE(m.client().lease->LeaseLeases(Ctx().get(), list_req, &list).ok());
  EXPECT_EQ(list.leases_size(), 0);
  // Writes acknowledged before the revoke are all still there after this last kill, too.
  std::map<std::string, mvccpb::KeyValue> store;
  int64_t revision = 0;
  ASSERT_TRUE(ReadAll(m.client(), &store, &revision));
  EXPECT_GE(revision, last_revision);
  Verify(model, store, rounds + 1);
}

// A short lease survives a kill with its key, then expires after the restart and takes the
// key with it; the expiry is durable across another kill.
TEST(CrashTest, LeaseExpiresAfterRestart) {
  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start()) << m.log();
  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(3);
  etcdserverpb::LeaseGrantResponse granted;
  ASSERT_TRUE(m.client().lease->LeaseGrant(Ctx().get(), grant, &granted).ok());
  ASSERT_TRUE(m.client().Put("short", "1", granted.id()).ok());
  m.Kill();
  ASSERT_TRUE(m.Start()) << m.log();
  etcdserverpb::RangeResponse r;
  ASSERT_TRUE(m.client().Get("short", &r).ok());
  ASSERT_EQ(r.kvs_size(), 1) << "leased key lost at restart";
  // Gone once the lease expires (TTL plus an election timeout after the restart).
  EXPECT_TRUE(WaitUntil(
      [&] {
        etcdserverpb::RangeResponse now;
        return m.client().Get("short", &now).ok() && now.kvs_size() == 0;
      },
      std::chrono::seconds(30)));
  m.Kill();
  ASSERT_TRUE(m.Start()) << m.log();
  ASSERT_TRUE(m.client().Get("short", &r).ok());
  EXPECT_EQ(r.kvs_size(), 0);
  etcdserverpb::LeaseTimeToLiveRequest ttl_req;
  ttl_req.set_id(granted.id());
  etcdserverpb::LeaseTimeToLiveResponse ttl;
  ASSERT_TRUE(m.client().lease->LeaseTimeToLive(Ctx().get(), ttl_req, &ttl).ok());
  EXPECT_EQ(ttl.ttl(), -1);
}

}  // namespace
}  // namespace etcdw::testing
