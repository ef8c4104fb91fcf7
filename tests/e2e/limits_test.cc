// Limits under load, on the real binaries, with etcd 3.4 beside for the figures: many client
// connections and many watchers cost bounded memory per item, and the member keeps serving
// other clients meanwhile. Each test prints what each server used; the bounds asserted are on
// etcd-wrapper (docs/compatibility.md lists the limits and what a client sees at them).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/common/open_files.h"
#include "servers.h"

namespace etcdw::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The resident memory of process `pid`, in KiB (0 if unknown).
uint64_t RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// How long a Put and a Get take on a fresh connection (each must succeed).
Clock::duration PutAndGet(Member& m, const std::string& key) {
  Client c(m.NewChannel());
  const auto start = Clock::now();
  EXPECT_TRUE(c.Put(key, "v").ok()) << m.label();
  etcdserverpb::RangeResponse got;
  EXPECT_TRUE(c.Get(key, &got).ok()) << m.label();
  EXPECT_EQ(got.kvs_size(), 1) << m.label();
  return Clock::now() - start;
}

class LimitsTest : public ::testing::TestWithParam<Member::Kind> {};

// Idle gRPC-style connections: each sends HTTP/2's preface and an empty SETTINGS frame, as a
// client does before its first call, and nothing more.
TEST_P(LimitsTest, ManyIdleConnectionsCostLittleAndTheMemberServesOthers) {
  const uint64_t files = common::RaiseOpenFileLimit();
  const size_t n = static_cast<size_t>(std::min<uint64_t>(10000, files > 1000 ? files - 1000 : 0));
  ASSERT_GE(n, 1000u) << "the open-file limit (" << files << ") is too low for this test";
  Member m(GetParam());
  ASSERT_TRUE(m.Start()) << m.log();
  PutAndGet(m, "warm");
  const uint64_t before = RssKiB(m.process().pid());
  const std::string opening("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0", 33);
  std::vector<int> fds;
  for (size_t i = 0; i < n; ++i) {
    int fd = Connect(m.client_port());
    ASSERT_GE(fd, 0) << "connection " << i;
    ASSERT_EQ(send(fd, opening.data(), opening.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(opening.size()));
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(2s);  // all accepted and read
  const auto took = PutAndGet(m, "during");
  const uint64_t after = RssKiB(m.process().pid());
  const double per_connection =
      static_cast<double>(after - std::min(after, before)) * 1024.0 / static_cast<double>(n);
  std::cout << m.label() << ": " << n << " idle connections, RSS " << before << " -> " << after
            << " KiB (" << static_cast<int>(per_connection) << " bytes each); a Put and a Get took "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms meanwhile\n";
  EXPECT_LT(took, 2s) << m.label();
  if (GetParam() == Member::Kind::kEtcdWrapper) {
    EXPECT_LT(per_connection, 32 * 1024) << "bytes per idle connection";
  }
  for (int fd : fds) close(fd);
  std::this_thread::sleep_for(500ms);
  PutAndGet(m, "after");
  EXPECT_TRUE(m.Running());
}

// Many watchers on one stream, each on its own key; one write reaches its watcher.
TEST_P(LimitsTest, ManyWatchersCostLittleAndEventsStillArrive) {
  constexpr int kWatchers = 100000;
  Member m(GetParam());
  ASSERT_TRUE(m.Start()) << m.log();
  PutAndGet(m, "warm");
  const uint64_t before = RssKiB(m.process().pid());
  Client c(m.NewChannel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  auto stream = c.watch->Watch(&ctx);
  const auto start = Clock::now();
  std::thread writer([&] {
    for (int i = 0; i < kWatchers; ++i) {
      etcdserverpb::WatchRequest req;
      req.mutable_create_request()->set_key("w/" + std::to_string(i));
      if (!stream->Write(req)) return;
    }
  });
  etcdserverpb::WatchResponse resp;
  int created = 0;
  int64_t last_watch = -1;
  while (created < kWatchers && stream->Read(&resp)) {
    if (resp.created()) {
      ++created;
      last_watch = resp.watch_id();
    }
  }
  writer.join();
  ASSERT_EQ(created, kWatchers) << m.label();
  const auto took = Clock::now() - start;
  const uint64_t after = RssKiB(m.process().pid());
  const double per_watcher = static_cast<double>(after - std::min(after, before)) * 1024.0 /
                             static_cast<double>(kWatchers);
  const auto op = PutAndGet(m, "w/" + std::to_string(kWatchers - 1));
  ASSERT_TRUE(stream->Read(&resp)) << m.label();
  ASSERT_EQ(resp.events_size(), 1) << m.label();
  EXPECT_EQ(resp.watch_id(), last_watch) << m.label();
  EXPECT_EQ(resp.events(0).kv().key(), "w/" + std::to_string(kWatchers - 1));
  std::cout << m.label() << ": " << kWatchers << " watchers created in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms, RSS "
            << before << " -> " << after << " KiB (" << static_cast<int>(per_watcher)
            << " bytes each); a Put and a Get took "
            << std::chrono::duration_cast<std::chrono::milliseconds>(op).count()
            << " ms with them open\n";
  EXPECT_LT(op, 2s) << m.label();
  if (GetParam() == Member::Kind::kEtcdWrapper) {
    EXPECT_LT(per_watcher, 1024) << "bytes per watcher";
  }
  ctx.TryCancel();
}

// A lease storm: thousands of leases, each with a key, expire at once. They are revoked at
// etcd's rate (1,000 a second on the leader), every key goes, and writes are served meanwhile.
TEST_P(LimitsTest, ALeaseStormIsRevokedWhileWritesAreServed) {
  constexpr int kLeases = 5000;
  constexpr int kThreads = 8;
  Member m(GetParam());
  ASSERT_TRUE(m.Start()) << m.log();
  const uint64_t before = RssKiB(m.process().pid());
  const auto grant_start = Clock::now();
  std::vector<std::thread> granters;
  std::atomic<int> failed{0};
  for (int t = 0; t < kThreads; ++t) {
    granters.emplace_back([&, t] {
      Client c(m.NewChannel());
      for (int i = t; i < kLeases; i += kThreads) {
        etcdserverpb::LeaseGrantRequest grant;
        grant.set_ttl(3);
        etcdserverpb::LeaseGrantResponse granted;
        if (!c.lease->LeaseGrant(Ctx().get(), grant, &granted).ok() ||
            !c.Put("l/" + std::to_string(i), "v", granted.id()).ok()) {
          ++failed;
        }
      }
    });
  }
  for (auto& g : granters) g.join();
  ASSERT_EQ(failed.load(), 0) << m.label();
  const uint64_t granted_rss = RssKiB(m.process().pid());
  const auto granting = Clock::now() - grant_start;
  // Until every key is gone: a write and a count every 100 ms, the slowest write kept.
  Client c(m.NewChannel());
  const auto start = Clock::now();
  Clock::duration slowest{};
  int64_t left = kLeases;
  while (left > 0 && Clock::now() - start < 60s) {
    const auto put_start = Clock::now();
    EXPECT_TRUE(c.Put("other", "v").ok()) << m.label();
    slowest = std::max(slowest, Clock::now() - put_start);
    etcdserverpb::RangeRequest count;
    count.set_key("l/");
    count.set_range_end("l0");
    count.set_count_only(true);
    etcdserverpb::RangeResponse counted;
    ASSERT_TRUE(c.kv->Range(Ctx().get(), count, &counted).ok()) << m.label();
    left = counted.count();
    std::this_thread::sleep_for(100ms);
  }
  const auto took = Clock::now() - start;
  auto ms = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  std::cout << m.label() << ": " << kLeases << " leases with a key each granted in " << ms(granting)
            << " ms (RSS " << before << " -> " << granted_rss << " KiB), TTL 3 s; all revoked "
            << ms(took) << " ms after the last grant; slowest put meanwhile " << ms(slowest)
            << " ms\n";
  EXPECT_EQ(left, 0) << m.label() << ": keys of expired leases left after 60 s";
  EXPECT_LT(slowest, 1s) << m.label();
}

INSTANTIATE_TEST_SUITE_P(Servers, LimitsTest,
                         ::testing::Values(Member::Kind::kEtcdWrapper, Member::Kind::kEtcd),
                         [](const auto& info) {
                           return std::string(info.param == Member::Kind::kEtcd ? "Etcd"
                                                                                : "EtcdWrapper");
                         });

}  // namespace
}  // namespace etcdw::testing
