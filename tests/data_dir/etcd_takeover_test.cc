// The takeover of a data directory etcd 3.4.23 wrote and left by `kill -9`
// (tests/data_dir/testdata/etcd34_datadir_killed.tar.gz, made by make_etcd34_datadir.sh beside
// it, with what etcd served before the kill): the WAL and snap readers on it and on damaged
// copies, CheckDataDir's view of it, the conversion served by a started member (every key at
// the current and a past revision, the lease, member and cluster IDs), nothing written on
// error, and a crash after every step of the conversion followed by a rerun.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "etcd_wal.h"
#include "etcdw/common/hash.h"
#include "etcdw/data_dir/data_dir.h"
#include "etcdw/member/etcd_server.h"
#include "support/await.h"
#include "support/files.h"
#include "support/local_member.h"
#include "support/scratch_dir.h"

namespace etcdw::data_dir {
namespace {

namespace fs = std::filesystem;

// What etcd answered before it was killed (expected_status.json).
constexpr uint64_t kMemberId = 15726146475090393654ull;
constexpr uint64_t kClusterId = 2194361610111756900ull;
constexpr int64_t kRevision = 62;
constexpr uint64_t kLastIndex = 68;
constexpr uint64_t kSnapIndex = 0x29;
constexpr char kWalName[] = "0000000000000000-0000000000000000.wal";

std::string TestData(const std::string& name) {
  return std::string(ETCDW_SOURCE_DIR) + "/tests/data_dir/testdata/" + name;
}

std::string Base64Decode(const std::string& in) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const size_t v = kAlphabet.find(c);
    if (v == std::string::npos) continue;
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

// The key-values of an `etcdctl get -w json` answer, by key.
struct ExpectedKv {
  std::string value;
  int64_t create = 0, mod = 0, version = 0, lease = 0;
};
std::map<std::string, ExpectedKv> ExpectedGet(const std::string& file) {
  std::map<std::string, ExpectedKv> out;
  auto j = nlohmann::json::parse(testsupport::ReadFile(TestData(file)));
  for (const auto& kv : j["kvs"]) {
    ExpectedKv& e = out[Base64Decode(kv["key"].get<std::string>())];
    e.value = Base64Decode(kv.value("value", ""));
    e.create = kv.value("create_revision", int64_t{0});
    e.mod = kv.value("mod_revision", int64_t{0});
    e.version = kv.value("version", int64_t{0});
    e.lease = kv.value("lease", int64_t{0});
  }
  return out;
}

// The SHA-256 of every file under `dir`, by path relative to it.
std::map<std::string, std::string> Digests(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    common::Sha256 sha;
    sha.Update(testsupport::ReadFile(e.path().string()));
    auto d = sha.Final();
    out[fs::relative(e.path(), dir).string()] = std::string(d.begin(), d.end());
  }
  return out;
}

class EtcdTakeoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(scratch_.path().empty());
    dir_ = scratch_.path() + "/etcd";
    Extract(scratch_.path());
    ASSERT_TRUE(fs::exists(dir_ + "/member/snap/db"));
    original_ = Digests(dir_ + "/member");
    wal_ = dir_ + "/member/wal/" + kWalName;
  }

  static void Extract(const std::string& into) {
    const std::string cmd =
        "tar -xzf '" + TestData("etcd34_datadir_killed.tar.gz") + "' -C '" + into + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }

  // Offsets of every record frame of the WAL file, in order.
  std::vector<size_t> Frames() {
    std::vector<size_t> out;
    std::string b = testsupport::ReadFile(wal_);
    size_t off = 0;
    while (off + 8 <= b.size()) {
      uint64_t f = 0;
      for (int i = 7; i >= 0; --i) f = f << 8 | static_cast<uint8_t>(b[off + i]);
      if (f == 0) break;
      out.push_back(off);
      const uint64_t len = f & ~(uint64_t{0xff} << 56);
      const uint64_t pad = (f >> 63) ? (f >> 56) & 7 : 0;
      off += 8 + len + pad;
    }
    return out;
  }

  // Nothing of a takeover in dir_: etcd's files as extracted, no build, nothing moved aside.
  void ExpectUntouched() {
    EXPECT_TRUE(IsEtcdDataDir(dir_));
    EXPECT_FALSE(fs::exists(dir_ + "/.etcdw-takeover"));
    EXPECT_FALSE(fs::exists(dir_ + "/etcd-taken-over"));
    EXPECT_EQ(Digests(dir_ + "/member"), original_);
  }

  // After a takeover: ours in member/, etcd's files unchanged in etcd-taken-over/member.
  void ExpectTakenOver() {
    EXPECT_FALSE(IsEtcdDataDir(dir_));
    EXPECT_TRUE(fs::exists(dir_ + "/member/store/CURRENT"));
    EXPECT_FALSE(fs::exists(dir_ + "/.etcdw-takeover"));
    ASSERT_TRUE(fs::exists(dir_ + "/etcd-taken-over/member"));
    EXPECT_EQ(Digests(dir_ + "/etcd-taken-over/member"), original_);
    DataDirCheck c = CheckDataDir(dir_, /*full=*/true);
    EXPECT_EQ(c.state, DataDirState::kValid) << c.detail;
  }

  // Starts the member on dir_ and compares what it serves with what etcd served.
  void ExpectServesWhatEtcdServed() {
    auto server = testsupport::StartLocalMember(dir_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    member::EtcdServer& s = **server;
    EXPECT_EQ(s.kv().Rev(), kRevision);
    auto members = s.MemberList();
    EXPECT_EQ(members.header().cluster_id(), kClusterId);
    EXPECT_EQ(members.header().member_id(), kMemberId);
    ASSERT_EQ(members.members_size(), 1);
    EXPECT_EQ(members.members(0).id(), kMemberId);
    EXPECT_EQ(members.members(0).peerurls(0), "http://127.0.0.1:23880");
    for (auto [file, rev] : {std::pair{"expected_get.json", int64_t{0}},
                             std::pair{"expected_get_rev.json", int64_t{45}}}) {
      SCOPED_TRACE(file);
      etcdserverpb::RangeRequest get;
      get.set_key(std::string(1, '\0'));
      get.set_range_end(std::string(1, '\0'));
      get.set_revision(rev);
      auto got =
          testsupport::Await<etcdserverpb::RangeResponse>([&](auto cb) { s.Range(get, cb); });
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      auto want = ExpectedGet(file);
      ASSERT_EQ(got->kvs_size(), static_cast<int>(want.size()));
      for (const auto& kv : got->kvs()) {
        SCOPED_TRACE(kv.key());
        ASSERT_EQ(want.count(kv.key()), 1u);
        const ExpectedKv& w = want[kv.key()];
        EXPECT_EQ(kv.value(), w.value);
        EXPECT_EQ(kv.create_revision(), w.create);
        EXPECT_EQ(kv.mod_revision(), w.mod);
        EXPECT_EQ(kv.version(), w.version);
        EXPECT_EQ(kv.lease(), w.lease);
      }
    }
    // The lease granted after etcd's snapshot, replayed from the WAL, still holds its key.
    const int64_t lease = ExpectedGet("expected_get.json")["leased"].lease;
    ASSERT_NE(lease, 0);
    etcdserverpb::LeaseTimeToLiveRequest ttl;
    ttl.set_id(lease);
    ttl.set_keys(true);
    auto l = testsupport::Await<etcdserverpb::LeaseTimeToLiveResponse>(
        [&](auto cb) { s.LeaseTimeToLive(ttl, cb); });
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(l->grantedttl(), 600);
    ASSERT_EQ(l->keys_size(), 1);
    EXPECT_EQ(l->keys(0), "leased");
    // The compaction replayed from the WAL holds.
    etcdserverpb::RangeRequest old;
    old.set_key("a");
    old.set_revision(29);
    auto compacted =
        testsupport::Await<etcdserverpb::RangeResponse>([&](auto cb) { s.Range(old, cb); });
    EXPECT_FALSE(compacted.ok());
    // And it takes writes.
    etcdserverpb::PutRequest put;
    put.set_key("after");
    put.set_value("v");
    auto r = testsupport::Await<etcdserverpb::PutResponse>([&](auto cb) { s.Put(put, cb); });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->header().revision(), kRevision + 1);
    s.Stop();
  }

  testsupport::ScratchDir scratch_{"takeover"};
  std::string dir_;
  std::string wal_;
  std::map<std::string, std::string> original_;
};

TEST_F(EtcdTakeoverTest, WalReaderReadsEtcdsLog) {
  auto wal = internal::ReadEtcdWal(dir_ + "/member/wal");
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  EXPECT_EQ(wal->member_id, kMemberId);
  EXPECT_EQ(wal->cluster_id, kClusterId);
  ASSERT_EQ(wal->files.size(), 1u);  // 0.tmp, etcd's next preallocated file, is not read
  ASSERT_FALSE(wal->entries.empty());
  EXPECT_EQ(wal->entries.front().index, 1u);
  EXPECT_EQ(wal->entries.back().index, kLastIndex);
  for (size_t i = 1; i < wal->entries.size(); ++i) {
    EXPECT_EQ(wal->entries[i].index, wal->entries[i - 1].index + 1);
  }
  EXPECT_EQ(wal->hard_state.term, 2u);
  EXPECT_EQ(wal->hard_state.vote, kMemberId);
  EXPECT_LE(wal->hard_state.commit, kLastIndex);
  EXPECT_EQ(wal->torn_tail_offset, -1);
  ASSERT_GE(wal->snapshots.size(), 2u);
  EXPECT_EQ(wal->snapshots.back().index, kSnapIndex);
  EXPECT_EQ(wal->TermOf(kSnapIndex), 2u);

  auto snap = internal::ReadNewestEtcdSnap(dir_ + "/member/snap");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ASSERT_TRUE(snap->has_value());
  EXPECT_EQ((*snap)->position.index, kSnapIndex);
  EXPECT_EQ((*snap)->position.term, 2u);
  EXPECT_EQ((*snap)->voters, std::vector<uint64_t>{kMemberId});
}

TEST_F(EtcdTakeoverTest, AFlippedByteIsAnErrorNamingTheFileAndOffset) {
  auto frames = Frames();
  ASSERT_GT(frames.size(), 10u);
  const size_t off = frames[5];
  ASSERT_TRUE(testsupport::FlipByte(wal_, off + 8 + 3));
  auto wal = internal::ReadEtcdWal(dir_ + "/member/wal");
  ASSERT_FALSE(wal.ok());
  EXPECT_EQ(wal.status().code(), Code::kDataLoss);
  EXPECT_NE(wal.status().message().find(kWalName), std::string::npos) << wal.status().message();
  EXPECT_NE(wal.status().message().find("offset " + std::to_string(off)), std::string::npos)
      << wal.status().message();

  // The takeover refuses it and changes nothing; the check calls it corrupt.
  original_ = Digests(dir_ + "/member");
  auto r = TakeOverEtcdDataDir(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(kWalName), std::string::npos);
  ExpectUntouched();
  EXPECT_EQ(CheckDataDir(dir_, false).state, DataDirState::kCorrupt);
}

TEST_F(EtcdTakeoverTest, ARecordCutShortAtTheEndIsATornTail) {
  auto frames = Frames();
  const size_t last = frames.back();
  fs::resize_file(wal_, last + 12);  // the last record's frame and 4 of its bytes
  auto wal = internal::ReadEtcdWal(dir_ + "/member/wal");
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  EXPECT_EQ(wal->torn_tail_offset, static_cast<int64_t>(last));

  // Zeros where the last record's sectors were not written: torn too.
  Extract(scratch_.path());
  std::string b = testsupport::ReadFile(wal_);
  const size_t zero_from = (last + 8 + 511) / 512 * 512;
  std::fstream f(wal_, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t frame = 0;
  for (int i = 7; i >= 0; --i) frame = frame << 8 | static_cast<uint8_t>(b[last + i]);
  if (last + 8 + (frame & 0xffffffffffffff) > zero_from) {
    f.seekp(static_cast<std::streamoff>(zero_from));
    f << std::string(512, '\0');
    f.close();
    auto torn = internal::ReadEtcdWal(dir_ + "/member/wal");
    ASSERT_TRUE(torn.ok()) << torn.status().ToString();
    EXPECT_EQ(torn->torn_tail_offset, static_cast<int64_t>(last));
  }
}

TEST_F(EtcdTakeoverTest, ADamagedRecordBeforeTheEndIsNotATornTail) {
  auto frames = Frames();
  // A record cut short in the middle of the log: the frame claims more than the file holds
  // only at the end, so zero a whole sector inside an early record instead.
  const size_t off = frames[2];
  std::string b = testsupport::ReadFile(wal_);
  b.replace(off + 8, 4, std::string(4, '\xff'));
  ASSERT_TRUE(testsupport::WriteFile(wal_, b));
  auto wal = internal::ReadEtcdWal(dir_ + "/member/wal");
  ASSERT_FALSE(wal.ok());
  EXPECT_NE(wal.status().message().find("offset " + std::to_string(off)), std::string::npos)
      << wal.status().message();
}

TEST_F(EtcdTakeoverTest, ADamagedSnapFileIsRefused) {
  const std::string snap = dir_ + "/member/snap/0000000000000002-0000000000000029.snap";
  ASSERT_TRUE(testsupport::FlipByte(snap, 100));
  auto one = internal::ReadEtcdSnapFile(snap);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("CRC mismatch"), std::string::npos);
  original_ = Digests(dir_ + "/member");
  EXPECT_FALSE(TakeOverEtcdDataDir(dir_).ok());
  ExpectUntouched();
}

TEST_F(EtcdTakeoverTest, CheckDataDirCallsItEtcdFormatAndChangesNothing) {
  for (bool full : {false, true}) {
    DataDirCheck c = CheckDataDir(dir_, full);
    EXPECT_EQ(c.state, DataDirState::kEtcdFormat) << c.detail;
    EXPECT_STREQ(DataDirStateName(c.state), "etcd-format");
    // The backend was last committed at etcd's snapshot; the WAL holds the rest.
    EXPECT_GT(c.revision, 0);
    EXPECT_LT(c.revision, kRevision);
    EXPECT_GE(c.revision + static_cast<int64_t>(c.unapplied_entries), kRevision);
  }
  ExpectUntouched();
}

TEST_F(EtcdTakeoverTest, ARunningEtcdKeepsItsDirectory) {
  const int fd = ::open((dir_ + "/member/snap/db").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  auto r = TakeOverEtcdDataDir(dir_);
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_EQ(CheckDataDir(dir_, false).state, DataDirState::kLocked);
  ::close(fd);
  ExpectUntouched();
}

TEST_F(EtcdTakeoverTest, TakesOverEverythingEtcdServed) {
  auto r = TakeOverEtcdDataDir(dir_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->taken_over);
  EXPECT_EQ(r->moved_to, dir_ + "/etcd-taken-over");
  EXPECT_EQ(r->member_id, kMemberId);
  EXPECT_EQ(r->cluster_id, kClusterId);
  EXPECT_GE(r->consistent_index, kSnapIndex);
  EXPECT_EQ(r->consistent_index + r->replayed_entries, kLastIndex);
  EXPECT_GT(r->replayed_entries, 0u);
  ExpectTakenOver();
  // A second call finds nothing of etcd's.
  auto again = TakeOverEtcdDataDir(dir_);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->taken_over);
  ExpectServesWhatEtcdServed();
}

TEST_F(EtcdTakeoverTest, AnEmptyDirectoryIsNotTouched) {
  const std::string empty = scratch_.path() + "/empty";
  fs::create_directories(empty);
  auto r = TakeOverEtcdDataDir(empty);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->taken_over);
  EXPECT_TRUE(fs::is_empty(empty));
}

// The child process of the crash test (run as this binary, so that it starts without the
// parent's threads): takes over $ETCDW_TAKEOVER_DIR and ends with status 42 right after the
// step $ETCDW_TAKEOVER_CRASH_STEP, as a crash there would. Disabled, so that only the crash
// test runs it (and skipped if run otherwise).
TEST(EtcdTakeoverCrashChild, DISABLED_EndsAfterTheStep) {
  const char* step = std::getenv("ETCDW_TAKEOVER_CRASH_STEP");
  const char* dir = std::getenv("ETCDW_TAKEOVER_DIR");
  if (step == nullptr || dir == nullptr) GTEST_SKIP() << "run by the crash test only";
  TakeoverOptions o;
  o.after_step = [&](const std::string& s) {
    if (s == step) ::_exit(42);
  };
  auto r = TakeOverEtcdDataDir(dir, o);
  ::_exit(r.ok() ? 0 : 1);
}

// A crash after each step (the child process ends there), then a rerun: the takeover completes
// with nothing lost and etcd's files whole.
TEST_F(EtcdTakeoverTest, ACrashAtAnyStepIsFinishedByTheNextStart) {
  for (const std::string step :
       {"store-built", "log-written", "synced", "exchanged", "moved-aside"}) {
    SCOPED_TRACE(step);
    fs::remove_all(dir_);
    Extract(scratch_.path());
    const std::string env_step = "ETCDW_TAKEOVER_CRASH_STEP=" + step;
    const std::string env_dir = "ETCDW_TAKEOVER_DIR=" + dir_;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Only exec after fork: the parent may have threads.
      char filter[] = "--gtest_filter=EtcdTakeoverCrashChild.*";
      char disabled[] = "--gtest_also_run_disabled_tests";
      char self[] = "/proc/self/exe";
      char* argv[] = {self, filter, disabled, nullptr};
      char* envp[] = {const_cast<char*>(env_step.c_str()), const_cast<char*>(env_dir.c_str()),
                      nullptr};
      ::execve(self, argv, envp);
      ::_exit(127);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 42);
    // The sidecar's check between the crash and the next start: still valid.
    DataDirCheck c = CheckDataDir(dir_, true);
    EXPECT_TRUE(c.state == DataDirState::kEtcdFormat || c.state == DataDirState::kValid)
        << c.detail;
    auto r = TakeOverEtcdDataDir(dir_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->taken_over, step != "moved-aside");
    ExpectTakenOver();
  }
  ExpectServesWhatEtcdServed();
}

}  // namespace
}  // namespace etcdw::data_dir
