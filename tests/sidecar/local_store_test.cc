#include "etcdw/sidecar/local_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/clock_util.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

namespace fs = std::filesystem;

using testsupport::Unix;

class LocalStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<testsupport::ScratchDir>("local-store");
    dir_ = scratch_->path();
    ASSERT_FALSE(scratch_->path().empty());
    root_ = dir_ + "/default.bkp";
  }
  void TearDown() override { scratch_.reset(); }

  std::unique_ptr<SnapStore> Open(const std::string& prefix) {
    Result<std::unique_ptr<SnapStore>> r = NewLocalStore(root_, prefix);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  // Writes `content` to a file outside the store and returns its path.
  std::string Source(const std::string& content) {
    std::string path = dir_ + "/src-" + std::to_string(sources_++);
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  static std::string Read(const std::string& path) { return testsupport::ReadFile(path); }
  static void Touch(const std::string& path, const std::string& content = "x") {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << content;
  }
  static std::vector<std::string> Keys(const std::vector<SnapshotInfo>& list) {
    std::vector<std::string> out;
    for (const SnapshotInfo& s : list) out.push_back(SnapshotKey(s));
    return out;
  }
  static unsigned Mode(const std::string& path) {
    struct stat st;
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 0777;
  }

  std::unique_ptr<testsupport::ScratchDir> scratch_;  // removed by TearDown
  std::string dir_, root_;
  int sources_ = 0;
};

TEST_F(LocalStoreTest, CreatesItsDirectoryPrivate) {
  auto store = Open("shoot--dev--etcd-main");
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(fs::is_directory(root_ + "/shoot--dev--etcd-main/v2"));
  EXPECT_EQ(Mode(root_), 0700u);
  EXPECT_EQ(Mode(root_ + "/shoot--dev--etcd-main"), 0700u);
  EXPECT_EQ(Mode(root_ + "/shoot--dev--etcd-main/v2"), 0700u);
  EXPECT_EQ(store->Describe(), "Local store " + root_ + "/shoot--dev--etcd-main/v2");
}

TEST_F(LocalStoreTest, SaveListFetchDeleteRoundTrip) {
  auto store = Open("etcd-main");
  ASSERT_NE(store, nullptr);
  SnapshotInfo full = NewSnapshot(SnapshotKind::kFull, 0, 100, Unix(1700000000), ".gz", false);
  SnapshotInfo delta = NewSnapshot(SnapshotKind::kIncr, 101, 150, Unix(1700000060), ".gz", false);
  std::string payload(3 << 20, '\0');  // larger than one copy buffer
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31 + 7);
  ASSERT_TRUE(store->Save(full, Source(payload)).ok());
  ASSERT_TRUE(store->Save(delta, Source("delta bytes")).ok());

  // gardener's layout: $HOME/<container>/<prefix>/v2/<name>.
  EXPECT_EQ(Read(root_ + "/etcd-main/v2/Full-00000000-00000100-1700000000.gz"), payload);
  EXPECT_EQ(Mode(root_ + "/etcd-main/v2/Full-00000000-00000100-1700000000.gz") & 0077, 0u);
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(root_ + "/etcd-main/v2")) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2);

  Result<std::vector<SnapshotInfo>> list = store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].snap_name, full.snap_name);
  EXPECT_EQ((*list)[0].prefix, "etcd-main/v2/");
  EXPECT_EQ((*list)[0].kind, SnapshotKind::kFull);
  EXPECT_EQ((*list)[0].last_revision, 100);
  EXPECT_EQ((*list)[0].compression_suffix, ".gz");
  EXPECT_EQ((*list)[1].snap_name, delta.snap_name);

  std::string dest = dir_ + "/fetched";
  std::ofstream(dest) << "stale content that is longer than the delta";
  ASSERT_TRUE(store->Fetch((*list)[1], dest).ok());
  EXPECT_EQ(Read(dest), "delta bytes");
  ASSERT_TRUE(store->Fetch((*list)[0], dest).ok());
  EXPECT_EQ(Read(dest), payload);

  ASSERT_TRUE(store->Delete((*list)[0]).ok());
  EXPECT_FALSE(fs::exists(root_ + "/etcd-main/v2/" + full.snap_name));
  // Deleting again is fine.
  EXPECT_TRUE(store->Delete((*list)[0]).ok());
  list = store->List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(Keys(*list), (std::vector<std::string>{"etcd-main/v2/" + delta.snap_name}));
  // Fetching a deleted snapshot is NotFound.
  SnapshotInfo gone = full;
  gone.prefix = "etcd-main/v2/";
  Status st = store->Fetch(gone, dest);
  EXPECT_EQ(st.code(), Code::kNotFound) << st.ToString();
}

TEST_F(LocalStoreTest, SaveReplacesAnExistingObjectWhole) {
  auto store = Open("");
  ASSERT_NE(store, nullptr);
  SnapshotInfo s = NewSnapshot(SnapshotKind::kFull, 0, 7, Unix(1700000000), "", true);
  ASSERT_TRUE(store->Save(s, Source("first, long version")).ok());
  ASSERT_TRUE(store->Save(s, Source("second")).ok());
  EXPECT_EQ(Read(root_ + "/v2/Full-00000000-00000007-1700000000.final"), "second");
  auto list = store->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_TRUE((*list)[0].is_final);
  EXPECT_EQ((*list)[0].prefix, "v2/");
}

TEST_F(LocalStoreTest, SaveOfMissingSourceFailsAndLeavesNothing) {
  auto store = Open("p");
  ASSERT_NE(store, nullptr);
  SnapshotInfo s = NewSnapshot(SnapshotKind::kFull, 0, 7, Unix(1700000000), "", false);
  Status st = store->Save(s, dir_ + "/does-not-exist");
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(fs::is_empty(root_ + "/p/v2"));
}

TEST_F(LocalStoreTest, RejectsNamesThatLeaveTheStore) {
  auto store = Open("p");
  ASSERT_NE(store, nullptr);
  SnapshotInfo s = NewSnapshot(SnapshotKind::kFull, 0, 7, Unix(1700000000), "", false);
  s.snap_name = "../../escaped";
  EXPECT_EQ(store->Save(s, Source("x")).code(), Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(root_ + "/escaped"));
  s.snap_name = "Full-00000000-00000007-1700000000";
  s.prefix = "../";
  EXPECT_EQ(store->Delete(s).code(), Code::kInvalidArgument);
  EXPECT_EQ(NewLocalStore(root_, "a/../../b").status().code(), Code::kInvalidArgument);
}

TEST_F(LocalStoreTest, ListsV1AndV2TogetherSkippingGarbage) {
  auto store = Open("etcd-main");
  ASSERT_NE(store, nullptr);
  const std::string base = root_ + "/etcd-main/";
  Touch(base + "v1/Backup-1500000000/Full-00000000-00000100-1500000000");
  Touch(base + "v1/Backup-1500000000/Incr-00000101-00000200-1500000060");
  Touch(base + "v2/Full-00000000-00000300-1600000000.gz");
  Touch(base + "v2/Incr-00000301-00000400-1600000060.gz/0000000001");  // a chunk
  Touch(base + "v2/Incr-00000301-00000400-1600000060.gz/0000000002");
  // Garbage: not snapshot names, temporary files of an upload, another store's files.
  Touch(base + "v2/README");
  Touch(base + "v2/Full-00000000-00000300.gz");
  Touch(base + "v2/.Full-00000000-00000500-1600000100.tmp.Ab12Cd");
  Touch(base + "notes.txt");
  Touch(root_ + "/other-store/v2/Full-00000000-00000900-1600000000");

  Result<std::vector<SnapshotInfo>> list = store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(Keys(*list), (std::vector<std::string>{
                             "etcd-main/v1/Backup-1500000000/Full-00000000-00000100-1500000000",
                             "etcd-main/v1/Backup-1500000000/Incr-00000101-00000200-1500000060",
                             "etcd-main/v2/Full-00000000-00000300-1600000000.gz",
                             "etcd-main/v2/Incr-00000301-00000400-1600000060.gz/0000000001",
                             "etcd-main/v2/Incr-00000301-00000400-1600000060.gz/0000000002",
                         }));
  EXPECT_EQ((*list)[0].snap_dir, "Backup-1500000000");
  EXPECT_EQ((*list)[0].prefix, "etcd-main/v1/");
  EXPECT_TRUE((*list)[3].is_chunk);

  // A v1 object is fetched and deleted where it lives; its emptied directory goes with it.
  std::string dest = dir_ + "/v1-fetched";
  ASSERT_TRUE(store->Fetch((*list)[1], dest).ok());
  EXPECT_EQ(Read(dest), "x");
  ASSERT_TRUE(store->Delete((*list)[1]).ok());
  EXPECT_TRUE(fs::exists(base + "v1/Backup-1500000000"));  // not empty yet
  ASSERT_TRUE(store->Delete((*list)[0]).ok());
  EXPECT_FALSE(fs::exists(base + "v1/Backup-1500000000"));
  // Chunks likewise: the chunk directory disappears with its last part.
  ASSERT_TRUE(store->Delete((*list)[3]).ok());
  ASSERT_TRUE(store->Delete((*list)[4]).ok());
  EXPECT_FALSE(fs::exists(base + "v2/Incr-00000301-00000400-1600000060.gz"));
  // The store's own directory stays even when empty.
  ASSERT_TRUE(store->Delete((*list)[2]).ok());
  EXPECT_TRUE(fs::is_directory(base + "v2"));
  list = store->List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST_F(LocalStoreTest, ListingRemovesTheTemporaryFilesOfAbandonedUploadsOnly) {
  auto store = Open("etcd-main");
  ASSERT_NE(store, nullptr);
  const std::string base = root_ + "/etcd-main/v2/";
  const std::string abandoned = base + ".Full-00000000-00000500-1600000100.tmp.Ab12Cd";
  const std::string in_progress = base + ".Full-00000000-00000600-1600000200.tmp.Ef34Gh";
  const std::string hidden = base + ".keep";  // not an upload's file
  Touch(abandoned);
  Touch(in_progress);
  Touch(hidden);
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(abandoned, old);
  fs::last_write_time(hidden, old);
  fs::last_write_time(in_progress, fs::file_time_type::clock::now() - std::chrono::minutes(50));
  Result<std::vector<SnapshotInfo>> list = store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->empty());
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(in_progress));
  EXPECT_TRUE(fs::exists(hidden));
}

TEST_F(LocalStoreTest, EmptyPrefixListsTheWholeContainer) {
  auto store = Open("");
  ASSERT_NE(store, nullptr);
  Touch(root_ + "/v1/Backup-1/Full-00000000-00000001-1");
  Touch(root_ + "/v2/Incr-00000002-00000003-2");
  auto list = store->List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(Keys(*list), (std::vector<std::string>{"v1/Backup-1/Full-00000000-00000001-1",
                                                   "v2/Incr-00000002-00000003-2"}));
}

TEST_F(LocalStoreTest, SnapshotWithoutPrefixIsInThisStoresV2) {
  auto store = Open("p");
  ASSERT_NE(store, nullptr);
  SnapshotInfo s = NewSnapshot(SnapshotKind::kIncr, 1, 2, Unix(1700000000), "", false);
  ASSERT_TRUE(store->Save(s, Source("abc")).ok());
  std::string dest = dir_ + "/out";
  ASSERT_TRUE(store->Fetch(s, dest).ok());
  EXPECT_EQ(Read(dest), "abc");
  ASSERT_TRUE(store->Delete(s).ok());
  EXPECT_FALSE(fs::exists(root_ + "/p/v2/" + s.snap_name));
}

}  // namespace
}  // namespace etcdw::sidecar
