// The key index's copy saved across a clean stop: loaded by the next open only when it was
// saved at the store's revision, gone with the first write after it, and never trusted when
// damaged (the index is rebuilt from the keys instead).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "etcdw/common/varint.h"
#include "etcdw/mvcc/key_index.h"
#include "mvcc_test_util.h"

namespace etcdw::mvcc {
namespace {

using storage::Column;
using testutil::Store;
using testutil::TempDir;

constexpr char kHeadKey[] = "local/key-index/head";

std::string ChunkKey(uint64_t n) { return "local/key-index/chunk/" + storage::EncodeFixed64BE(n); }

// Keys long enough that the copy takes several chunks of ~1 MiB, with leases, deletions and
// several versions of some keys.
void WriteKeys(Store& s) {
  ASSERT_TRUE(s.Grant(7, 100).ok());
  for (int i = 0; i < 700; ++i) {
    s.Put(std::string(3000, 'k') + std::to_string(i), "v", i % 5 == 0 ? 7 : 0);
  }
  for (int i = 0; i < 20; ++i) s.Put("short/" + std::to_string(i % 4), std::to_string(i));
  s.Delete(std::string(3000, 'k') + "3");
}

// The index the store's keys give, rebuilt from them.
void ExpectIndexMatchesTheKeys(Store& s) {
  KeyIndex rebuilt;
  ASSERT_TRUE(rebuilt.Load(s.engine(), s.kv().Rev()).ok());
  EXPECT_TRUE(s.kv().key_index().SameKeysAs(rebuilt));
  EXPECT_EQ(s.kv().key_index().size(), 700 - 1 + 4);
}

KeyIndex::Saved LoadSaved(Store& s) {
  KeyIndex index;
  auto r = index.LoadSaved(s.engine(), s.kv().Rev());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : KeyIndex::Saved::kNone;
}

void Write(Store& s, const std::function<void(storage::Batch&)>& fn) {
  storage::Batch b(s.engine());
  fn(b);
  ASSERT_TRUE(s.engine().Write(b, true).ok());
}

TEST(SavedKeyIndexTest, ACopySavedAtAStopIsLoadedByTheNextOpen) {
  TempDir dir;
  auto s = Store::OnDisk(dir.path());
  WriteKeys(*s);
  s->Reopen();
  EXPECT_FALSE(s->kv().loaded_saved_index()) << "nothing saved: rebuilt";
  ASSERT_TRUE(s->kv().SaveKeyIndex().ok());
  ASSERT_TRUE(s->engine().Get(Column::kMeta, ChunkKey(2)).value().has_value())
      << "the copy should take several chunks";
  s->Reopen();
  EXPECT_TRUE(s->kv().loaded_saved_index());
  ExpectIndexMatchesTheKeys(*s);
  // The store works from it: counts, reads and a put that replaces a key with a lease.
  EXPECT_EQ(s->Value("short/3"), "19");
  EXPECT_EQ(s->Keys("short/", "short0").size(), 4u);
  auto put = s->Put(std::string(3000, 'k') + "5", "w");
  auto read = s->Range(testutil::RangeReq(std::string(3000, 'k') + "5"));
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->kvs_size(), 1);
  EXPECT_EQ(read->kvs(0).version(), 2);
  EXPECT_EQ(read->kvs(0).lease(), 0);
  EXPECT_EQ(read->kvs(0).mod_revision(), put.header().revision());
}

TEST(SavedKeyIndexTest, TheFirstWriteAfterTheOpenDeletesTheCopy) {
  TempDir dir;
  auto s = Store::OnDisk(dir.path());
  WriteKeys(*s);
  ASSERT_TRUE(s->kv().SaveKeyIndex().ok());
  s->Reopen();
  ASSERT_TRUE(s->kv().loaded_saved_index());
  EXPECT_EQ(LoadSaved(*s), KeyIndex::Saved::kLoaded);
  s->Put("new", "1");
  EXPECT_EQ(LoadSaved(*s), KeyIndex::Saved::kNone);
  EXPECT_FALSE(s->engine().Get(Column::kMeta, ChunkKey(0)).value().has_value());
  s->Reopen();
  EXPECT_FALSE(s->kv().loaded_saved_index());
  EXPECT_EQ(s->Value("new"), "1");
}

TEST(SavedKeyIndexTest, ACopyOfAnotherRevisionIsNotLoaded) {
  TempDir dir;
  auto s = Store::OnDisk(dir.path());
  WriteKeys(*s);
  ASSERT_TRUE(s->kv().SaveKeyIndex().ok());
  // The head claims an older revision, as if the store had moved on without deleting it.
  std::string head = s->engine().Get(Column::kMeta, kHeadKey).value().value();
  head.replace(1, 8, storage::EncodeFixed64BE(static_cast<uint64_t>(s->kv().Rev() - 1)));
  Write(*s, [&](storage::Batch& b) { b.Put(Column::kMeta, kHeadKey, head); });
  EXPECT_EQ(LoadSaved(*s), KeyIndex::Saved::kOtherRevision);
  s->Reopen();
  EXPECT_FALSE(s->kv().loaded_saved_index());
  ExpectIndexMatchesTheKeys(*s);
  s->Put("new", "1");
  EXPECT_FALSE(s->engine().Get(Column::kMeta, kHeadKey).value().has_value())
      << "the first write deletes a copy it did not use too";
}

TEST(SavedKeyIndexTest, ADamagedCopyIsRefusedAndTheIndexRebuilt) {
  struct Case {
    const char* name;
    std::function<void(Store&, storage::Batch&)> damage;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"cut-short",
       [](Store& s, storage::Batch& b) {
         std::string c = s.engine().Get(Column::kMeta, ChunkKey(1)).value().value();
         b.Put(Column::kMeta, ChunkKey(1), c.substr(0, c.size() - 2));
       },
       "cut short"},
      {"chunk-missing", [](Store&, storage::Batch& b) { b.Delete(Column::kMeta, ChunkKey(1)); },
       "chunk 1 is missing"},
      {"chunks-swapped",
       [](Store& s, storage::Batch& b) {
         std::string c0 = s.engine().Get(Column::kMeta, ChunkKey(0)).value().value();
         std::string c1 = s.engine().Get(Column::kMeta, ChunkKey(1)).value().value();
         b.Put(Column::kMeta, ChunkKey(0), c1);
         b.Put(Column::kMeta, ChunkKey(1), c0);
       },
       "out of order"},
      {"revision-ahead",
       [](Store& s, storage::Batch& b) {
         std::string c;
         common::AppendVarint(c, 1);
         c += "!";  // sorts before every key written
         for (int64_t v : {int64_t{1}, s.kv().Rev() + 1, int64_t{1}, int64_t{0}}) {
           common::AppendVarint(c, static_cast<uint64_t>(v));
         }
         b.Put(Column::kMeta, ChunkKey(0),
               c + s.engine().Get(Column::kMeta, ChunkKey(0)).value().value());
       },
       "out of range"},
      {"count-differs",
       [](Store& s, storage::Batch& b) {
         std::string head = s.engine().Get(Column::kMeta, kHeadKey).value().value();
         head.replace(9, 8, storage::EncodeFixed64BE(5));
         b.Put(Column::kMeta, kHeadKey, head);
       },
       "where its head says 5 in"},
      {"unknown-format", [](Store&, storage::Batch& b) { b.Put(Column::kMeta, kHeadKey, "\x02"); },
       "not of a known format"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    auto s = Store::OnDisk(dir.path());
    WriteKeys(*s);
    ASSERT_TRUE(s->kv().SaveKeyIndex().ok());
    Write(*s, [&](storage::Batch& b) { c.damage(*s, b); });
    KeyIndex index;
    auto r = index.LoadSaved(s->engine(), s->kv().Rev());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kDataLoss);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().ToString();
    EXPECT_EQ(index.size(), 0u) << "a refused copy leaves the index as it was";
    s->Reopen();
    EXPECT_FALSE(s->kv().loaded_saved_index());
    ExpectIndexMatchesTheKeys(*s);
  }
}

TEST(SavedKeyIndexTest, AnOpenAskedToRebuildIgnoresTheCopy) {
  TempDir dir;
  auto s = Store::OnDisk(dir.path());
  WriteKeys(*s);
  ASSERT_TRUE(s->kv().SaveKeyIndex().ok());
  auto kv = KvStore::Open(s->engine(), {.use_saved_index = false});
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_FALSE((*kv)->loaded_saved_index());
  EXPECT_TRUE((*kv)->key_index().SameKeysAs(s->kv().key_index()));
}

}  // namespace
}  // namespace etcdw::mvcc
