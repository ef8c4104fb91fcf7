// The secondary store's sync (sidecar/backup_sync.h) between Local stores: a copy at start and
// at every period, GC of the secondary with the primary's policy, and a prompt stop.
#include "etcdw/sidecar/backup_sync.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/sidecar/local_store.h"
#include "support/await.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar::backup_sync_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using Clock = std::chrono::system_clock;

class BackupSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(scratch_.path().empty());
    primary_ = std::move(NewLocalStore(scratch_.path() + "/primary", "p").value());
    secondary_ = std::move(NewLocalStore(scratch_.path() + "/secondary", "p").value());
    options_.temp_dir = scratch_.path() + "/tmp";
    options_.sync_period = milliseconds(200);
    options_.gc_period = milliseconds(0);  // no GC unless a test turns it on
  }

  SnapshotInfo Put(SnapStore& store, SnapshotKind kind, int64_t from, int64_t to, int minute) {
    SnapshotInfo s = NewSnapshot(kind, from, to, now_ - minutes(60 - minute), ".gz", false);
    const std::string file = scratch_.path() + "/upload";
    EXPECT_TRUE(testsupport::WriteFile(file, s.snap_name));
    EXPECT_TRUE(store.Save(s, file).ok());
    return s;
  }

  std::vector<std::string> Names(SnapStore& store) {
    std::vector<std::string> out;
    auto list = store.List();
    EXPECT_TRUE(list.ok());
    if (list.ok()) {
      for (const auto& s : *list) out.push_back(s.snap_name);
    }
    return out;
  }

  testsupport::ScratchDir scratch_{"backup-sync"};
  const Clock::time_point now_ = Clock::now();
  std::unique_ptr<SnapStore> primary_;
  std::unique_ptr<SnapStore> secondary_;
  BackupSyncOptions options_;
};

TEST_F(BackupSyncTest, CopiesAtStartAndEveryPeriodThenStops) {
  Put(*primary_, SnapshotKind::kFull, 0, 10, 1);
  Put(*primary_, SnapshotKind::kIncr, 11, 12, 2);
  BackupSync sync(*primary_, *secondary_, options_);
  sync.Start();
  ASSERT_TRUE(testsupport::WaitUntil([&] { return Names(*secondary_) == Names(*primary_); },
                                     std::chrono::seconds(10)));
  // A delta taken later arrives at the next period.
  Put(*primary_, SnapshotKind::kIncr, 13, 14, 3);
  ASSERT_TRUE(testsupport::WaitUntil([&] { return Names(*secondary_) == Names(*primary_); },
                                     std::chrono::seconds(10)));
  EXPECT_EQ(Names(*secondary_).size(), 3u);
  const auto start = std::chrono::steady_clock::now();
  sync.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  const int syncs = sync.syncs();
  EXPECT_GE(syncs, 2);
  Put(*primary_, SnapshotKind::kIncr, 15, 16, 4);  // not copied: stopped
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(sync.syncs(), syncs);
  EXPECT_EQ(Names(*secondary_).size(), 3u);
}

TEST_F(BackupSyncTest, CollectsTheSecondarysGarbageWithThePrimarysPolicy) {
  Put(*primary_, SnapshotKind::kFull, 0, 10, 1);
  Put(*primary_, SnapshotKind::kIncr, 11, 12, 2);
  const SnapshotInfo full = Put(*primary_, SnapshotKind::kFull, 0, 20, 3);
  const SnapshotInfo delta = Put(*primary_, SnapshotKind::kIncr, 21, 22, 4);
  options_.sync_period = std::chrono::hours(1);  // one copy, at start
  options_.gc_period = milliseconds(1100);
  options_.gc.policy = GcPolicy::kLimitBased;
  options_.gc.max_backups = 1;
  BackupSync sync(*primary_, *secondary_, options_);
  sync.Start();
  ASSERT_TRUE(testsupport::WaitUntil([&] { return sync.syncs() == 1; }, std::chrono::seconds(10)));
  EXPECT_EQ(Names(*secondary_).size(), 4u);
  ASSERT_TRUE(
      testsupport::WaitUntil([&] { return sync.gc_runs() >= 1; }, std::chrono::seconds(10)));
  sync.Stop();
  // LimitBased with one backup: the older stream's delta and full go, the latest stream stays.
  EXPECT_EQ(Names(*secondary_), (std::vector<std::string>{full.snap_name, delta.snap_name}));
  EXPECT_EQ(Names(*primary_).size(), 4u);  // the primary is the primary's GC's business
}

}  // namespace
}  // namespace etcdw::sidecar::backup_sync_test
