// A full disk: a member whose data directory lies on a small filesystem (a tmpfs the test
// mounts; the test is skipped where it may not mount one) refuses writes with etcd's NOSPACE
// error and alarm before the disk fills, keeps serving reads, loses nothing, and takes writes
// again once the filesystem has room and the alarm is disarmed. A sync that fails with ENOSPC all
// the same (the disk filled between the check and the write; injected by the campaign's
// preloaded library) stops the member cleanly, as etcd stops, and a restart loses nothing.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "servers.h"

namespace etcdw::testing {
namespace {

// A tmpfs of `megabytes` mounted on `dir` while it lives.
class SmallDisk {
 public:
  SmallDisk(std::string dir, int megabytes) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
    mounted_ = geteuid() == 0 && mount("tmpfs", dir_.c_str(), "tmpfs", 0,
                                       ("size=" + std::to_string(megabytes) + "m").c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  bool Resize(int megabytes) {
    return mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT,
                 ("size=" + std::to_string(megabytes) + "m").c_str()) == 0;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};

std::string RandomValue(std::mt19937_64& rng, size_t bytes) {
  std::string v(bytes, '\0');
  for (char& c : v) c = static_cast<char>(rng());
  return v;
}

TEST(FullDiskTest, WritesAreRefusedWithNoSpaceBeforeTheDiskFillsAndResumeAfterDisarm) {
  TempDir scratch;
  SmallDisk disk(scratch.File("disk"), 320);
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start({{"data-dir", scratch.File("disk") + "/data"}})) << m.log();
  Client c(m.NewChannel());  // m.client() is replaced at each start
  std::mt19937_64 rng(7);
  std::map<std::string, std::string> acked;
  grpc::Status refused;
  for (int i = 0; i < 10000; ++i) {
    const std::string key = "k" + std::to_string(i);
    std::string value = RandomValue(rng, 64 << 10);  // incompressible
    grpc::Status st = c.Put(key, value);
    if (!st.ok()) {
      refused = st;
      break;
    }
    acked[key] = std::move(value);
  }
  ASSERT_FALSE(refused.ok()) << "a 320 MiB disk never filled";
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(), "etcdserver: mvcc: database space exceeded");
  EXPECT_GT(acked.size(), 100u);
  ASSERT_TRUE(m.Running()) << m.log();
  etcdserverpb::AlarmRequest list;
  list.set_action(etcdserverpb::AlarmRequest::GET);
  etcdserverpb::AlarmResponse alarms;
  ASSERT_TRUE(c.maintenance->Alarm(Ctx().get(), list, &alarms).ok());
  ASSERT_EQ(alarms.alarms_size(), 1);
  EXPECT_EQ(alarms.alarms(0).alarm(), etcdserverpb::NOSPACE);
  // Reads are served, and every acknowledged write is there.
  auto check_all = [&] {
    for (const auto& [key, value] : acked) {
      etcdserverpb::RangeResponse got;
      ASSERT_TRUE(c.Get(key, &got).ok()) << key;
      ASSERT_EQ(got.kvs_size(), 1) << key;
      ASSERT_EQ(got.kvs(0).value(), value) << key;
    }
  };
  check_all();
  EXPECT_FALSE(c.Put("more", "v").ok()) << "the alarm holds writes back";

  // Room again: the operator disarms the alarm and writes resume; a restart loses nothing.
  ASSERT_TRUE(disk.Resize(1024));
  etcdserverpb::AlarmRequest disarm;
  disarm.set_action(etcdserverpb::AlarmRequest::DEACTIVATE);
  disarm.set_alarm(etcdserverpb::NOSPACE);
  disarm.set_memberid(alarms.alarms(0).memberid());
  ASSERT_TRUE(c.maintenance->Alarm(Ctx().get(), disarm, &alarms).ok());
  EXPECT_TRUE(c.Put("more", "v").ok());
  ASSERT_TRUE(m.Stop().has_value()) << m.log();
  ASSERT_TRUE(m.Start({{"data-dir", scratch.File("disk") + "/data"}})) << m.log();
  acked["more"] = "v";
  check_all();
}

// The Raft log's synced append fails with ENOSPC: the member stops with an exit status of 1 and
// a log line that names the error (no abort, no signal), and once the disk syncs again a restart
// serves every acknowledged write.
TEST(FullDiskTest, ASyncFailingWithNoSpaceStopsTheMemberCleanlyAndARestartLosesNothing) {
  Member m(Member::Kind::kEtcdWrapper);
  const std::string control = m.dir() + "/sync_control";
  WriteFile(control, "0");
  m.set_extra_env(
      {std::string("LD_PRELOAD=") + ETCDW_SLOW_FSYNC_LIB, "ETCDW_SLOW_FSYNC_FILE=" + control});
  ASSERT_TRUE(m.Start()) << m.log();
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(m.client().Put("k" + std::to_string(i), "v" + std::to_string(i)).ok());
  }
  WriteFile(control, "enospc");
  // The library reads its control file at most every 20 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(m.client().Put("lost", "x").ok()) << "a put was acknowledged without its sync";
  std::optional<int> status = m.process().Wait(std::chrono::seconds(20));
  ASSERT_TRUE(status.has_value()) << "the member still runs after its log could not be synced";
  EXPECT_EQ(*status, 1) << m.log();
  EXPECT_NE(m.log().find("No space left on device"), std::string::npos) << m.log();

  WriteFile(control, "0");
  ASSERT_TRUE(m.Start()) << m.log();
  etcdserverpb::RangeResponse r;
  ASSERT_TRUE(m.client().Get("k", &r, "l").ok());
  ASSERT_EQ(r.kvs_size(), 50);
  for (const auto& kv : r.kvs()) EXPECT_EQ("v" + kv.key().substr(1), kv.value());
  EXPECT_TRUE(m.client().Put("after", "y").ok());
}

}  // namespace
}  // namespace etcdw::testing
