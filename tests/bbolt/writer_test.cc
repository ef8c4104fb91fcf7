// The bbolt writer read back by our reader (db.h): many keys over several tree levels, values
// bigger than a page (overflow pages), empty buckets, the meta pages and the freelist; and bad
// use, which is an error naming the mistake and leaves no file behind.
#include "etcdw/bbolt/writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "etcdw/bbolt/db.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::bbolt {
namespace {

constexpr size_t kWPage = kWriterPageSize;

using Buckets = std::map<std::string, std::map<std::string, std::string>>;

class BoltWriterTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) { return scratch_.path() + "/" + name; }

  // Writes `buckets` in order; the writer's statistics.
  WriterStats Write(const std::string& path, const Buckets& buckets) {
    auto w = BoltWriter::Create(path);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    for (const auto& [name, entries] : buckets) {
      EXPECT_TRUE((*w)->BeginBucket(name).ok());
      for (const auto& [k, v] : entries) {
        Status st = (*w)->Put(k, v);
        EXPECT_TRUE(st.ok()) << st.ToString();
      }
    }
    auto stats = (*w)->Finish();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.ok() ? *stats : WriterStats{};
  }

  // Everything the reader finds, walked and looked up one by one.
  static void ExpectReadsBack(const std::string& path, const Buckets& want) {
    auto db = BoltDb::Open(path);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    Buckets got;
    ASSERT_TRUE((*db)
                    ->ForEach({},
                              [&](std::string_view k, std::string_view, bool is_bucket) {
                                EXPECT_TRUE(is_bucket);
                                got[std::string(k)];
                                return Status::Ok();
                              })
                    .ok());
    for (auto& [name, entries] : got) {
      Status st = (*db)->ForEach({name}, [&](std::string_view k, std::string_view v, bool b) {
        EXPECT_FALSE(b);
        entries.emplace(std::string(k), std::string(v));
        return Status::Ok();
      });
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [name, entries] : want) {
      ASSERT_EQ(got[name].size(), entries.size()) << name;
      EXPECT_TRUE(got[name] == entries) << name;
      // Descent from the root finds every key.
      for (const auto& [k, v] : entries) {
        auto found = (*db)->Get({name}, k);
        ASSERT_TRUE(found.ok()) << found.status().ToString();
        ASSERT_TRUE(found->has_value()) << name << " " << k.size();
        ASSERT_EQ(**found, v);
      }
    }
  }

  testsupport::ScratchDir scratch_{"bbolt-writer"};
};

std::string WBe64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[i] = static_cast<char>(v & 0xff);
  return s;
}

TEST_F(BoltWriterTest, ManyKeysOverSeveralLevelsReadBack) {
  Buckets b;
  std::mt19937_64 rng(7);
  // 60000 entries with 17-byte keys: about 700 leaves, a three-level tree.
  for (uint64_t i = 0; i < 60000; ++i) {
    std::string v(rng() % 200, '\0');
    for (auto& c : v) c = static_cast<char>(rng());
    b["key"][WBe64(i) + "_" + WBe64(i % 3)] = v;
  }
  b["meta"]["consistent_index"] = WBe64(42);
  const std::string path = Path("many.db");
  const WriterStats stats = Write(path, b);
  EXPECT_EQ(stats.entries, 60001u);
  EXPECT_EQ(stats.buckets, 2u);
  EXPECT_EQ(stats.overflow_pages, 0u);
  EXPECT_EQ(testsupport::ReadFile(path).size(), stats.pages * kWPage);
  ExpectReadsBack(path, b);
  auto db = BoltDb::Open(path);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ((*db)->meta().page_size, kWPage);
  EXPECT_EQ((*db)->meta().high_water, stats.pages);
  EXPECT_EQ((*db)->meta().txid, 2u);
  EXPECT_EQ((*db)->meta().freelist_page, stats.pages - 1);
}

TEST_F(BoltWriterTest, ValuesBiggerThanAPageGoToOverflowPages) {
  Buckets b;
  std::string big(100 * 1024, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 + 7);
  b["blobs"]["a"] = "small";
  b["blobs"]["b"] = big;
  b["blobs"]["c"] = std::string(kWPage - 16 - 16 - 1, 'x');  // exactly one full page
  b["blobs"]["d"] = std::string(kWPage, 'y');                // just over one page
  b["blobs"]["e"] = big + big;
  b["blobs"]["f"] = "after";
  // A long key in a branch page.
  for (int i = 0; i < 400; ++i) b["long"][std::string(3000, 'k') + WBe64(i)] = "v";
  const std::string path = Path("big.db");
  const WriterStats stats = Write(path, b);
  EXPECT_GT(stats.overflow_pages, 3 * 100 * 1024 / kWPage - 10);
  ExpectReadsBack(path, b);
}

// Values of 8 KiB (etcd's keys written with big values) share runs of pages: the file is
// within 10% of the data, where one leaf per value would take 3 pages for each 2 pages of data.
TEST_F(BoltWriterTest, BigValuesSharePagesAndSmallEntriesKeepOnePageLeaves) {
  Buckets b;
  size_t data = 0;
  for (int i = 0; i < 700; ++i) {
    std::string v(8192, static_cast<char>('a' + i % 26));
    b["big"][WBe64(i)] = v;
    data += 8 + v.size();
  }
  for (int i = 0; i < 3000; ++i) b["small"][WBe64(i)] = "value-" + std::to_string(i);
  // A small entry after a big one starts a new leaf; a big one after small ones too.
  b["mixed"]["a"] = "small";
  b["mixed"]["b"] = std::string(9000, 'm');
  b["mixed"]["c"] = "small again";
  const std::string path = Path("packed.db");
  const WriterStats stats = Write(path, b);
  ExpectReadsBack(path, b);
  const size_t small_pages = 3000 * (16 + 8 + 10) / kWPage + 10;  // one-page leaves, branches
  EXPECT_LT(stats.pages * kWPage, (data + small_pages * kWPage) * 11 / 10)
      << stats.pages << " pages for " << data << " bytes of 8 KiB values";
}

TEST_F(BoltWriterTest, EmptyBucketsAndAnEmptyFileReadBack) {
  Buckets b{{"alarm", {}}, {"auth", {{"authRevision", WBe64(1)}}}, {"authRoles", {}}};
  ExpectReadsBack(Path("empty-buckets.db"), (Write(Path("empty-buckets.db"), b), b));
  const std::string none = Path("none.db");
  const WriterStats stats = Write(none, {});
  EXPECT_EQ(stats.pages, 4u);  // two meta pages, the root bucket's leaf, the freelist
  ExpectReadsBack(none, {});
}

TEST_F(BoltWriterTest, ManyBucketsMakeABranchedRootBucket) {
  Buckets b;
  for (int i = 0; i < 700; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "bucket-%05d", i);
    b[name]["k"] = std::to_string(i);
  }
  const std::string path = Path("buckets.db");
  Write(path, b);
  ExpectReadsBack(path, b);
}

TEST_F(BoltWriterTest, TheFreelistPageIsEmptyAndTheMetaPagesAgree) {
  const std::string path = Path("layout.db");
  const WriterStats stats = Write(path, {{"key", {{"a", "1"}}}});
  const std::string bytes = testsupport::ReadFile(path);
  ASSERT_EQ(bytes.size(), stats.pages * kWPage);
  const size_t fl = (stats.pages - 1) * kWPage;
  uint16_t flags, count;
  std::memcpy(&flags, bytes.data() + fl + 8, 2);
  std::memcpy(&count, bytes.data() + fl + 10, 2);
  EXPECT_EQ(flags, 0x10);
  EXPECT_EQ(count, 0);
  // The two meta pages differ only in page id, transaction id and checksum.
  std::string m0 = bytes.substr(0, kWPage), m1 = bytes.substr(kWPage, kWPage);
  for (std::string* m : {&m0, &m1}) {
    std::memset(m->data(), 0, 8);
    std::memset(m->data() + 16 + 48, 0, 16);
  }
  EXPECT_EQ(m0, m1);
}

TEST_F(BoltWriterTest, BadUseIsAnErrorAndLeavesNoFile) {
  const std::string path = Path("bad.db");
  {
    auto w = BoltWriter::Create(path);
    ASSERT_TRUE(w.ok());
    EXPECT_EQ((*w)->Put("k", "v").code(), Code::kFailedPrecondition);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  {
    auto w = BoltWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->BeginBucket("b").ok());
    Status st = (*w)->BeginBucket("a");
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_NE(st.message().find("\"a\" does not sort after \"b\""), std::string::npos)
        << st.ToString();
    // The writer stays failed.
    EXPECT_FALSE((*w)->Finish().ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  {
    auto w = BoltWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->BeginBucket("b").ok());
    ASSERT_TRUE((*w)->Put("k2", "v").ok());
    EXPECT_EQ((*w)->Put("k1", "v").code(), Code::kInvalidArgument);
  }
  {
    auto w = BoltWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->BeginBucket("b").ok());
    EXPECT_NE((*w)->Put("", "v").message().find("empty key"), std::string::npos);
    auto again = BoltWriter::Create(path);  // the first one's file exists
    EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  // A finished file stays, and the writer refuses more.
  auto w = BoltWriter::Create(path);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_EQ((*w)->BeginBucket("late").code(), Code::kFailedPrecondition);
  w->reset();
  EXPECT_TRUE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace etcdw::bbolt
