// `etcdbrctl copy`'s work (sidecar/copier.h) between Local stores: which backups are chosen,
// that objects arrive byte for byte under their names without ".final", that what the
// destination has is skipped, that a copy the destination garbles is detected and removed,
// that failures are collected while the rest is copied, and the wait for a final snapshot.
#include "etcdw/sidecar/copier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/sidecar/local_store.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar::copier_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using Clock = std::chrono::system_clock;

const Clock::time_point kT0 = Clock::time_point(std::chrono::seconds(1'700'000'000));

SnapshotInfo Full(int64_t rev, Clock::time_point at, bool final = false) {
  return NewSnapshot(SnapshotKind::kFull, 0, rev, at, ".gz", final);
}
SnapshotInfo Incr(int64_t from, int64_t to, Clock::time_point at) {
  return NewSnapshot(SnapshotKind::kIncr, from, to, at, ".gz", false);
}

std::vector<std::string> Names(const std::vector<SnapshotInfo>& list) {
  std::vector<std::string> out;
  for (const auto& s : list) out.push_back(s.snap_name);
  return out;
}

TEST(SelectBackupsToCopyTest, NewestBackupFirstEachFullThenItsDeltasNewestFirst) {
  std::vector<SnapshotInfo> list = {
      Incr(1, 5, kT0),  // older than every full: part of no backup
      Full(10, kT0 + minutes(1)),
      Incr(11, 12, kT0 + minutes(2)),
      Incr(13, 14, kT0 + minutes(3)),
      Full(20, kT0 + minutes(4), true),
      Incr(21, 22, kT0 + minutes(5)),
  };
  SnapshotInfo chunk = list[2];
  chunk.is_chunk = true;
  chunk.snap_name += "/0000000001";
  list.push_back(chunk);
  SortSnapshots(list);
  EXPECT_EQ(
      Names(SelectBackupsToCopy(list, -1, std::nullopt)),
      (std::vector<std::string>{
          Full(20, kT0 + minutes(4), true).snap_name, Incr(21, 22, kT0 + minutes(5)).snap_name,
          Full(10, kT0 + minutes(1)).snap_name, Incr(13, 14, kT0 + minutes(3)).snap_name,
          Incr(11, 12, kT0 + minutes(2)).snap_name}));
  EXPECT_EQ(Names(SelectBackupsToCopy(list, 1, std::nullopt)),
            (std::vector<std::string>{Full(20, kT0 + minutes(4), true).snap_name,
                                      Incr(21, 22, kT0 + minutes(5)).snap_name}));
  EXPECT_TRUE(SelectBackupsToCopy(list, 0, std::nullopt).empty());
}

TEST(SelectBackupsToCopyTest, BackupsOlderThanTheAgeLimitAreDroppedAndDoNotCount) {
  std::vector<SnapshotInfo> list = {Full(10, kT0), Incr(11, 12, kT0 + hours(1)),
                                    Full(20, kT0 + hours(48)), Full(30, kT0 + hours(72))};
  SortSnapshots(list);
  // Not before kT0 + 47 h: the first backup (and its delta, though newer) goes.
  EXPECT_EQ(Names(SelectBackupsToCopy(list, -1, kT0 + hours(47))),
            (std::vector<std::string>{Full(30, kT0 + hours(72)).snap_name,
                                      Full(20, kT0 + hours(48)).snap_name}));
  // The newest backup fails the filter: the limit of one takes the next one that passes.
  std::vector<SnapshotInfo> odd = {Full(10, kT0 + hours(48)), Full(20, kT0)};
  SortSnapshots(odd);  // by revision: the newer full has the lower revision
  EXPECT_EQ(Names(SelectBackupsToCopy(odd, 1, kT0 + hours(47))),
            (std::vector<std::string>{Full(10, kT0 + hours(48)).snap_name}));
}

TEST(CopyNameTest, DropsTheFinalSuffixOnly) {
  EXPECT_EQ(CopyName(Full(7, kT0, true)), Full(7, kT0).snap_name);
  EXPECT_EQ(CopyName(Incr(8, 9, kT0)), Incr(8, 9, kT0).snap_name);
}

// A store that passes everything to another and can be told to garble or fail some calls.
class FaultyStore : public SnapStore {
 public:
  explicit FaultyStore(SnapStore* inner) : inner_(inner) {}
  Result<std::vector<SnapshotInfo>> List() override {
    if (fail_list) return Unavailable("listing refused");
    return inner_->List();
  }
  Status Fetch(const SnapshotInfo& s, const std::string& dest) override {
    if (s.snap_name == fail_fetch_of) return Unavailable("fetch refused");
    return inner_->Fetch(s, dest);
  }
  Status Save(const SnapshotInfo& s, const std::string& src) override {
    if (s.snap_name != garble_save_of) return inner_->Save(s, src);
    std::string data = testsupport::ReadFile(src);
    data.back() ^= 1;
    const std::string garbled = src + ".garbled";
    EXPECT_TRUE(testsupport::WriteFile(garbled, data));
    Status st = inner_->Save(s, garbled);
    fs::remove(garbled);
    return st;
  }
  Status Delete(const SnapshotInfo& s) override { return inner_->Delete(s); }
  std::string Describe() const override { return "faulty " + inner_->Describe(); }

  bool fail_list = false;
  std::string fail_fetch_of;
  std::string garble_save_of;

 private:
  SnapStore* inner_;
};

class CopierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(scratch_.path().empty());
    source_ = Open("source");
    destination_ = Open("destination");
    options_.temp_dir = scratch_.path() + "/tmp";
    options_.max_parallel = 3;
  }

  std::unique_ptr<SnapStore> Open(const std::string& name) {
    auto store = NewLocalStore(scratch_.path() + "/" + name, "etcd-main");
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Saves `s` into `store` with distinct contents of `size` bytes; returns the contents.
  std::string Put(SnapStore& store, const SnapshotInfo& s, size_t size = 1000) {
    std::string data(size, '\0');
    for (size_t i = 0; i < size; ++i) {
      data[i] = static_cast<char>((i * 31 + static_cast<size_t>(s.last_revision) * 7) & 0xff);
    }
    const std::string file = scratch_.path() + "/upload";
    EXPECT_TRUE(testsupport::WriteFile(file, data));
    EXPECT_TRUE(store.Save(s, file).ok());
    return data;
  }

  // The contents of the object named `name` in `store`, or "<absent>".
  std::string Get(SnapStore& store, const std::string& name) {
    auto list = store.List();
    EXPECT_TRUE(list.ok());
    for (const auto& s : *list) {
      if (s.snap_name != name) continue;
      const std::string file = scratch_.path() + "/download";
      EXPECT_TRUE(store.Fetch(s, file).ok());
      return testsupport::ReadFile(file);
    }
    return "<absent>";
  }

  std::vector<std::string> Listed(SnapStore& store) {
    auto list = store.List();
    EXPECT_TRUE(list.ok());
    return list.ok() ? Names(*list) : std::vector<std::string>{};
  }

  testsupport::ScratchDir scratch_{"copier"};
  std::unique_ptr<SnapStore> source_;
  std::unique_ptr<SnapStore> destination_;
  CopyOptions options_;
};

TEST_F(CopierTest, CopiesEveryBackupByteForByteAndAFinalSnapshotStopsBeingFinal) {
  const SnapshotInfo f1 = Full(10, kT0), d1 = Incr(11, 20, kT0 + minutes(1));
  const SnapshotInfo f2 = Full(30, kT0 + minutes(2), true), d2 = Incr(31, 40, kT0 + minutes(3));
  const std::string b_f1 = Put(*source_, f1, 3 << 20), b_d1 = Put(*source_, d1);
  const std::string b_f2 = Put(*source_, f2, 1), b_d2 = Put(*source_, d2, 0);

  auto report = CopyBackups(*source_, *destination_, options_, kT0 + hours(1));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const std::string f2_copy = Full(30, kT0 + minutes(2)).snap_name;
  EXPECT_EQ(report->copied.size(), 4u);
  EXPECT_TRUE(report->skipped.empty());
  EXPECT_EQ(Get(*destination_, f1.snap_name), b_f1);
  EXPECT_EQ(Get(*destination_, d1.snap_name), b_d1);
  EXPECT_EQ(Get(*destination_, f2_copy), b_f2);
  EXPECT_EQ(Get(*destination_, d2.snap_name), b_d2);
  EXPECT_EQ(Get(*destination_, f2.snap_name), "<absent>");
  EXPECT_EQ(Listed(*destination_).size(), 4u);
  // Nothing of the copy's work files stays behind; the source is untouched.
  EXPECT_TRUE(fs::is_empty(options_.temp_dir));
  EXPECT_EQ(Get(*source_, f2.snap_name), b_f2);

  // Again: everything is there (the final one under its name without ".final").
  auto again = CopyBackups(*source_, *destination_, options_, kT0 + hours(1));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->copied.empty());
  EXPECT_EQ(again->skipped.size(), 4u);
}

TEST_F(CopierTest, CopiesOnlyWhatTheDestinationLacksAndHonoursTheLimits) {
  const SnapshotInfo old_full = Full(10, kT0), f = Full(30, kT0 + hours(50));
  const SnapshotInfo d1 = Incr(31, 32, kT0 + hours(51)), d2 = Incr(33, 34, kT0 + hours(52));
  for (const auto& s : {old_full, f, d1, d2}) Put(*source_, s);
  Put(*destination_, d1, 5);  // already there (its contents are not compared)

  options_.max_backup_age_days = 1;  // now - 24 h: the old backup is too old
  auto report = CopyBackups(*source_, *destination_, options_, kT0 + hours(53));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::vector<std::string> want = {f.snap_name, d2.snap_name};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(report->copied, want);
  EXPECT_EQ(report->skipped, std::vector<std::string>{d1.snap_name});
  EXPECT_EQ(Get(*destination_, old_full.snap_name), "<absent>");
  EXPECT_EQ(Get(*destination_, d1.snap_name).size(), 5u);
}

TEST_F(CopierTest, ACopyTheDestinationGarblesIsRemovedAndReportedAndARerunRepairsIt) {
  const SnapshotInfo f = Full(10, kT0), d = Incr(11, 12, kT0 + minutes(1));
  const std::string b_f = Put(*source_, f), b_d = Put(*source_, d);
  FaultyStore faulty(destination_.get());
  faulty.garble_save_of = d.snap_name;

  auto report = CopyBackups(*source_, faulty, options_, kT0 + hours(1));
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("1 of 2 snapshots were not copied"), std::string::npos)
      << report.status().ToString();
  EXPECT_NE(report.status().message().find(d.snap_name + ": the copy differs from the source"),
            std::string::npos)
      << report.status().ToString();
  EXPECT_EQ(Get(*destination_, d.snap_name), "<absent>");  // removed
  EXPECT_EQ(Get(*destination_, f.snap_name), b_f);         // the good one stays

  auto rerun = CopyBackups(*source_, *destination_, options_, kT0 + hours(1));
  ASSERT_TRUE(rerun.ok()) << rerun.status().ToString();
  EXPECT_EQ(rerun->copied, std::vector<std::string>{d.snap_name});
  EXPECT_EQ(Get(*destination_, d.snap_name), b_d);
}

TEST_F(CopierTest, AFailedFetchIsReportedAndTheOthersAreCopied) {
  const SnapshotInfo f = Full(10, kT0), d1 = Incr(11, 12, kT0 + minutes(1));
  const SnapshotInfo d2 = Incr(13, 14, kT0 + minutes(2));
  for (const auto& s : {f, d1, d2}) Put(*source_, s);
  FaultyStore faulty(source_.get());
  faulty.fail_fetch_of = d1.snap_name;
  options_.max_parallel = 1;

  auto report = CopyBackups(faulty, *destination_, options_, kT0 + hours(1));
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find(d1.snap_name + ": fetch from the source: fetch refused"),
            std::string::npos)
      << report.status().ToString();
  EXPECT_EQ(Listed(*destination_), (std::vector<std::string>{f.snap_name, d2.snap_name}));
}

TEST_F(CopierTest, AStoreThatCannotBeListedFailsTheCopyBeforeAnythingIsWritten) {
  Put(*source_, Full(10, kT0));
  FaultyStore faulty(destination_.get());
  faulty.fail_list = true;
  auto report = CopyBackups(*source_, faulty, options_, kT0 + hours(1));
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(), "listing the destination store: listing refused");
  EXPECT_TRUE(Listed(*destination_).empty());
}

TEST_F(CopierTest, WaitsForAFinalSnapshotAmongTheNewestFourFulls) {
  Put(*source_, Full(10, kT0, true));
  for (int i = 1; i <= 4; ++i) Put(*source_, Full(10 + i, kT0 + minutes(i)));
  options_.wait_for_final = true;
  options_.poll_interval = milliseconds(50);
  options_.wait_timeout = milliseconds(300);
  // The final one is the fifth newest: not seen, the wait times out, everything is copied.
  const auto start = std::chrono::steady_clock::now();
  auto report = CopyBackups(*source_, *destination_, options_, kT0 + hours(1));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->found_final);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(300));
  EXPECT_EQ(report->copied.size(), 5u);

  // A final snapshot taken while the copy waits ends the wait.
  options_.wait_timeout = milliseconds(0);  // none
  std::thread taker([&] {
    std::this_thread::sleep_for(milliseconds(200));
    Put(*source_, Full(20, kT0 + minutes(10), true));
  });
  report = CopyBackups(*source_, *destination_, options_, kT0 + hours(1));
  taker.join();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->found_final);
  EXPECT_EQ(report->copied, std::vector<std::string>{Full(20, kT0 + minutes(10)).snap_name});
}

TEST_F(CopierTest, ACancelledWaitEndsTheCopy) {
  Put(*source_, Full(10, kT0));
  std::atomic<bool> cancel{false};
  options_.cancel = &cancel;
  options_.wait_for_final = true;
  options_.poll_interval = milliseconds(50);
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(150));
    cancel = true;
  });
  auto report = CopyBackups(*source_, *destination_, options_, kT0 + hours(1));
  canceller.join();
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), Code::kCanceled);
  EXPECT_TRUE(Listed(*destination_).empty());
}

}  // namespace
}  // namespace etcdw::sidecar::copier_test
