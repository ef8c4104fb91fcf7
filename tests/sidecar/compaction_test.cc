// `etcdbrctl compact`'s work (sidecar/compaction.h): a full snapshot etcd 3.4.23 took
// (support/etcd_fixture.h) and two deltas of ours in a local store become one full snapshot at
// the last delta's revision, from which a restore gives the state the original set gives, with
// the history before it compacted away.
#include "etcdw/sidecar/compaction.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/sidecar/compression.h"
#include "etcdw/sidecar/delta.h"
#include "etcdw/sidecar/local_store.h"
#include "etcdw/storage/engine.h"
#include "support/delta_events.h"
#include "support/etcd_fixture.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

using testsupport::DeleteEvent;
using testsupport::PutEvent;

namespace fs = std::filesystem;
using std::chrono::minutes;
using testsupport::kEtcdFixtureRevision;

class CompactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = scratch_.path();
    ASSERT_FALSE(root_.empty());
    auto store = NewLocalStore(root_ + "/store", "v2");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    options_.restore.target = {
        "c", "c=http://127.0.0.1:2380", "etcd-cluster", {"http://127.0.0.1:2380"}};
    options_.restore.temp_dir = root_ + "/restoration.tmp";
    options_.data_dir = root_ + "/compaction.etcd";
    options_.temp_dir = root_ + "/tmp";
  }

  // Saves `file`, compressed as `suffix` says, as `s`.
  void Save(const SnapshotInfo& s, const std::string& file) {
    auto c = CompressionFromSuffix(s.compression_suffix);
    ASSERT_TRUE(c.ok());
    std::string upload = file;
    if (*c != Compression::kNone) {
      upload = file + ".c";
      ASSERT_TRUE(CompressFile(file, upload, *c).ok());
    }
    ASSERT_TRUE(store_->Save(s, upload).ok());
  }

  // etcd's full snapshot at 307, then deltas 308-309 (gzip) and 310-311 (zlib).
  void SaveBackup() {
    const std::string full = root_ + "/etcd.db";
    ASSERT_TRUE(testsupport::WriteFile(full, testsupport::EtcdFixtureSnapshot()));
    Save(NewSnapshot(SnapshotKind::kFull, 0, kEtcdFixtureRevision, created_, ".gz", false), full);
    const int64_t r = kEtcdFixtureRevision;
    DeltaWriter d1;
    d1.Add(PutEvent("new", "1", r + 1, 0, r + 1, 1), created_);
    d1.Add(PutEvent("new", "2", r + 2, 0, r + 1, 2), created_);
    ASSERT_TRUE(testsupport::WriteFile(root_ + "/d1", d1.Finish()));
    Save(NewSnapshot(SnapshotKind::kIncr, r + 1, r + 2, created_ + minutes(1), ".gz", false),
         root_ + "/d1");
    DeltaWriter d2;
    d2.Add(DeleteEvent("k1", r + 3), created_);
    d2.Add(PutEvent("new", "3", r + 4, 0, r + 1, 3), created_);
    ASSERT_TRUE(testsupport::WriteFile(root_ + "/d2", d2.Finish()));
    Save(NewSnapshot(SnapshotKind::kIncr, r + 3, r + 4, created_ + minutes(2), ".zlib", false),
         root_ + "/d2");
  }

  std::vector<SnapshotInfo> List() {
    auto list = store_->List();
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    if (!list.ok()) return {};
    SortSnapshots(*list);
    return *list;
  }

  // Every key of the data directory restored from the store's latest set into `dir`, as
  // "key=value@create/mod/version lease" lines, and the store's revision and compaction.
  std::string RestoredState(const std::string& dir, int64_t* compact_rev) {
    LatestSet set = FindLatestSet(List());
    RestoreOptions o = options_.restore;
    Status st = RestoreFromBackup(*store_, set, dir, o);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return "";
    auto engine = storage::Engine::Open(dir + "/member/store", {});
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    if (!engine.ok()) return "";
    auto kv = mvcc::KvStore::Open(**engine);
    EXPECT_TRUE(kv.ok()) << kv.status().ToString();
    if (!kv.ok()) return "";
    *compact_rev = (*kv)->CompactRev();
    auto view = (*kv)->NewReadView();
    const std::string all(1, '\0');
    auto r = mvcc::RangeKeys(*view, mvcc::KeyRange::FromRequest(all, all), {});
    EXPECT_TRUE(r.ok());
    std::string out = "rev " + std::to_string((*kv)->Rev()) + "\n";
    for (const auto& k : r->kvs) {
      out += k.key() + "=" + k.value() + "@" + std::to_string(k.create_revision()) + "/" +
             std::to_string(k.mod_revision()) + "/" + std::to_string(k.version()) + " " +
             std::to_string(k.lease()) + "\n";
    }
    return out;
  }

  testsupport::ScratchDir scratch_{"compaction"};
  std::string root_;
  std::unique_ptr<SnapStore> store_;
  CompactionOptions options_;
  const std::chrono::system_clock::time_point created_ =
      std::chrono::system_clock::now() - std::chrono::hours(1);
};

TEST_F(CompactionTest, TheLatestSetBecomesOneFullSnapshotThatRestoresTheSameState) {
  SaveBackup();
  int64_t compact_before = -1;
  const std::string before = RestoredState(root_ + "/before", &compact_before);
  ASSERT_NE(before.find("new=3@308/311/3"), std::string::npos) << before;
  ASSERT_EQ(before.find("k1="), std::string::npos) << before;

  const auto now = created_ + minutes(30);
  auto compacted = CompactBackups(*store_, options_, now);
  ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
  ASSERT_TRUE(compacted->has_value());
  const SnapshotInfo& s = **compacted;
  // Named as gardener names it: the last revision, now, the last delta's compression.
  EXPECT_EQ(s.snap_name, MakeSnapshotName(SnapshotKind::kFull, 0, kEtcdFixtureRevision + 4, now,
                                          ".zlib", false));
  EXPECT_FALSE(fs::exists(options_.data_dir));
  EXPECT_FALSE(fs::exists(options_.data_dir + ".part"));
  EXPECT_FALSE(fs::exists(options_.restore.temp_dir));

  const std::vector<SnapshotInfo> list = List();
  ASSERT_EQ(list.size(), 4u);  // the three objects stay (GC removes them later)
  LatestSet latest = FindLatestSet(list);
  ASSERT_TRUE(latest.full.has_value());
  EXPECT_EQ(latest.full->snap_name, s.snap_name);
  EXPECT_TRUE(latest.deltas.empty());

  int64_t compact_after = -1;
  EXPECT_EQ(RestoredState(root_ + "/after", &compact_after), before);
  EXPECT_EQ(compact_after, kEtcdFixtureRevision + 4) << "the history was not compacted away";
  EXPECT_LT(compact_before, kEtcdFixtureRevision + 4);
}

TEST_F(CompactionTest, WithoutDefragmentationTheStateIsTheSame) {
  SaveBackup();
  int64_t compact = -1;
  const std::string before = RestoredState(root_ + "/before", &compact);
  options_.defragment = false;
  auto compacted = CompactBackups(*store_, options_, created_ + minutes(30));
  ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
  ASSERT_TRUE(compacted->has_value());
  EXPECT_EQ(RestoredState(root_ + "/after", &compact), before);
}

TEST_F(CompactionTest, AStoreWithoutAFullSnapshotIsLeftAlone) {
  auto compacted = CompactBackups(*store_, options_, created_);
  ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
  EXPECT_FALSE(compacted->has_value());
  EXPECT_TRUE(List().empty());
}

TEST_F(CompactionTest, AMissingDeltaFailsAndLeavesTheStoreAsItWas) {
  SaveBackup();
  const int64_t r = kEtcdFixtureRevision;
  // A delta from 313: 312 is missing.
  DeltaWriter d;
  d.Add(PutEvent("later", "x", r + 6, 0, r + 6, 1), created_);
  ASSERT_TRUE(testsupport::WriteFile(root_ + "/d3", d.Finish()));
  Save(NewSnapshot(SnapshotKind::kIncr, r + 6, r + 6, created_ + minutes(3), ".gz", false),
       root_ + "/d3");
  const std::vector<SnapshotInfo> before = List();

  auto compacted = CompactBackups(*store_, options_, created_ + minutes(30));
  ASSERT_FALSE(compacted.ok());
  EXPECT_NE(compacted.status().message().find("a delta snapshot is missing"), std::string::npos)
      << compacted.status().ToString();
  const std::vector<SnapshotInfo> after = List();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i].snap_name, before[i].snap_name);
  EXPECT_FALSE(fs::exists(options_.data_dir));
  EXPECT_FALSE(fs::exists(options_.data_dir + ".part"));
}

}  // namespace
}  // namespace etcdw::sidecar
