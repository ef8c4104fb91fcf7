#include "etcdw/storage/engine.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "etcdw/storage/versioned_key.h"
#include "support/scratch_dir.h"

namespace etcdw::storage {
namespace {

std::unique_ptr<Engine> OpenInMemory(const std::string& name = "/mem/engine") {
  EngineOptions o;
  o.in_memory = true;
  auto e = Engine::Open(name, o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::string Get(const Engine& e, Column c, std::string_view key, const Snapshot* snap = nullptr) {
  auto v = e.Get(c, key, snap);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() && v->has_value() ? **v : "<none>";
}

std::string Get(const Engine& e, Batch& b, Column c, std::string_view key) {
  auto v = e.Get(b, c, key);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() && v->has_value() ? **v : "<none>";
}

// Keys seen iterating forward from SeekToFirst.
std::vector<std::string> Forward(Iterator& it) {
  std::vector<std::string> out;
  for (it.SeekToFirst(); it.Valid(); it.Next()) out.emplace_back(it.key());
  EXPECT_TRUE(it.status().ok());
  return out;
}

std::vector<std::string> Backward(Iterator& it) {
  std::vector<std::string> out;
  for (it.SeekToLast(); it.Valid(); it.Prev()) out.emplace_back(it.key());
  EXPECT_TRUE(it.status().ok());
  return out;
}

void PutAll(Engine& e, Column c, const std::vector<std::string>& keys) {
  Batch b(e);
  for (const auto& k : keys) b.Put(c, k, "v" + k);
  ASSERT_TRUE(e.Write(b, false).ok());
}

using Keys = std::vector<std::string>;

TEST(FixedTest, BigEndianOrderIsNumericOrder) {
  EXPECT_EQ(EncodeFixed64BE(0x0102030405060708ULL),
            std::string("\x01\x02\x03\x04\x05\x06\x07\x08"));
  EXPECT_EQ(DecodeFixed64BE(EncodeFixed64BE(UINT64_MAX).data()), UINT64_MAX);
  EXPECT_LT(EncodeFixed64BE(255), EncodeFixed64BE(256));
  std::string s = "x";
  PutFixed64BE(s, 1);
  EXPECT_EQ(s, std::string("x\0\0\0\0\0\0\0\x01", 9));
}

TEST(ColumnTest, NamesAreTheOnDiskFormat) {
  EXPECT_STREQ(ColumnName(Column::kMeta), "default");
  EXPECT_STREQ(ColumnName(Column::kKeys), "keys");
  EXPECT_STREQ(ColumnName(Column::kRevisions), "revisions");
  EXPECT_STREQ(ColumnName(Column::kLeases), "leases");
  EXPECT_STREQ(ColumnName(Column::kRaftLog), "raft_log");
}

TEST(VersionedKeyTest, EncodingAndAccessors) {
  std::string vk = MakeVersionedKey("abc", 258);
  EXPECT_EQ(vk, std::string("abc\0\0\0\0\0\0\x01\x02", 11));
  EXPECT_EQ(UserKeyOf(vk), "abc");
  EXPECT_EQ(VersionOf(vk), 258u);
  std::string out = "p";
  AppendVersionedKey(out, "", 7);
  EXPECT_EQ(UserKeyOf(std::string_view(out).substr(1)), "");
  EXPECT_EQ(VersionOf(out), 7u);
}

TEST(EngineTest, VersionedKeysOrderNewestFirst) {
  EngineOptions o;
  o.in_memory = true;
  auto e = Engine::Open("/mem/versioned", o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  Batch b(**e);
  for (uint64_t v : {1, 5, 3}) b.Put(Column::kKeys, MakeVersionedKey("k", v), std::to_string(v));
  b.Put(Column::kKeys, MakeVersionedKey("j", 9), "j9");
  ASSERT_TRUE((*e)->Write(b, true).ok());
  auto it = (*e)->NewIterator(Column::kKeys);
  std::vector<std::string> seen;
  for (it->SeekToFirst(); it->Valid(); it->Next()) seen.emplace_back(it->value());
  EXPECT_EQ(seen, (std::vector<std::string>{"j9", "5", "3", "1"}));
  it->Seek(MakeVersionedKey("k", 4));
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "3");
}

TEST(EngineTest, VersionedOrderComparesUserKeysBytewiseFirst) {
  auto e = OpenInMemory();
  Batch b(*e);
  // A user key that is a prefix of another sorts first whatever the versions are, and bytes
  // compare unsigned.
  b.Put(Column::kKeys, MakeVersionedKey("a", 1), "a1");
  b.Put(Column::kKeys, MakeVersionedKey("a", 0xff00), "a-big");
  b.Put(Column::kKeys, MakeVersionedKey(std::string("a\0", 2), 2), "a0");
  b.Put(Column::kKeys, MakeVersionedKey("ab", 1), "ab");
  b.Put(Column::kKeys, MakeVersionedKey("\xff", 1), "ff");
  b.Put(Column::kKeys, MakeVersionedKey("b", UINT64_MAX), "bmax");
  ASSERT_TRUE(e->Write(b, false).ok());
  auto it = e->NewIterator(Column::kKeys);
  std::vector<std::string> seen;
  for (it->SeekToFirst(); it->Valid(); it->Next()) seen.emplace_back(it->value());
  EXPECT_EQ(seen, (std::vector<std::string>{"a-big", "a1", "a0", "ab", "bmax", "ff"}));
  // Seeking to (key, v) lands on the newest version at or below v.
  it->Seek(MakeVersionedKey("a", 100));
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "a1");
  it->Seek(MakeVersionedKey("a", 0));  // after every version of "a"
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "a0");
  // Point reads use the comparator too.
  EXPECT_EQ(Get(*e, Column::kKeys, MakeVersionedKey("a", 0xff00)), "a-big");
  EXPECT_EQ(Get(*e, Column::kKeys, MakeVersionedKey("a", 2)), "<none>");
}

TEST(EngineTest, ColumnsAreSeparateNamespaces) {
  auto e = OpenInMemory();
  Batch b(*e);
  b.Put(Column::kMeta, "k", "meta");
  b.Put(Column::kRevisions, "k", "rev");
  b.Put(Column::kLeases, "k", "lease");
  b.Put(Column::kRaftLog, "k", "log");
  ASSERT_TRUE(e->Write(b, false).ok());
  EXPECT_EQ(Get(*e, Column::kMeta, "k"), "meta");
  EXPECT_EQ(Get(*e, Column::kRevisions, "k"), "rev");
  EXPECT_EQ(Get(*e, Column::kLeases, "k"), "lease");
  EXPECT_EQ(Get(*e, Column::kRaftLog, "k"), "log");
  EXPECT_EQ(Get(*e, Column::kKeys, MakeVersionedKey("k", 1)), "<none>");
  auto it = e->NewIterator(Column::kLeases);
  EXPECT_EQ(Forward(*it), Keys{"k"});
}

TEST(EngineTest, GetMissingKeyIsEmptyNotAnError) {
  auto e = OpenInMemory();
  auto v = e->Get(Column::kMeta, "nothing");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());
}

TEST(EngineTest, EmptyValuesAreDistinctFromMissing) {
  auto e = OpenInMemory();
  Batch b(*e);
  b.Put(Column::kMeta, "empty", "");
  ASSERT_TRUE(e->Write(b, false).ok());
  auto v = e->Get(Column::kMeta, "empty");
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(v->has_value());
  EXPECT_EQ(**v, "");
}

TEST(BatchTest, CountSizeClearAndAtomicity) {
  auto e = OpenInMemory();
  Batch b(*e);
  EXPECT_TRUE(b.Empty());
  EXPECT_EQ(b.Count(), 0u);
  const size_t empty_size = b.DataSize();
  b.Put(Column::kMeta, "a", "1");
  b.Put(Column::kLeases, "b", "2");
  b.Delete(Column::kMeta, "c");
  b.DeleteRange(Column::kRaftLog, "x", "y");
  EXPECT_EQ(b.Count(), 4u);
  EXPECT_FALSE(b.Empty());
  EXPECT_GT(b.DataSize(), empty_size);
  // Nothing is visible in the database before Write.
  EXPECT_EQ(Get(*e, Column::kMeta, "a"), "<none>");
  b.Clear();
  EXPECT_TRUE(b.Empty());
  EXPECT_EQ(b.DataSize(), empty_size);
  ASSERT_TRUE(e->Write(b, true).ok());  // an empty batch is fine
  EXPECT_EQ(Get(*e, Column::kMeta, "a"), "<none>");

  b.Put(Column::kMeta, "a", "1");
  b.Put(Column::kLeases, "b", "2");
  ASSERT_TRUE(e->Write(b, false).ok());
  EXPECT_EQ(Get(*e, Column::kMeta, "a"), "1");
  EXPECT_EQ(Get(*e, Column::kLeases, "b"), "2");
}

TEST(BatchTest, ReadYourWritesWithGet) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a", "b", "c"});
  Batch b(*e);
  b.Put(Column::kMeta, "a", "new-a");
  b.Delete(Column::kMeta, "b");
  b.Put(Column::kMeta, "d", "new-d");
  b.Put(Column::kMeta, "d", "newer-d");  // the last write of a key wins
  EXPECT_EQ(Get(*e, b, Column::kMeta, "a"), "new-a");
  EXPECT_EQ(Get(*e, b, Column::kMeta, "b"), "<none>");
  EXPECT_EQ(Get(*e, b, Column::kMeta, "c"), "vc");  // from the database
  EXPECT_EQ(Get(*e, b, Column::kMeta, "d"), "newer-d");
  // Other columns are not affected by this column's pending writes.
  EXPECT_EQ(Get(*e, b, Column::kLeases, "a"), "<none>");
  // The database itself is unchanged until Write.
  EXPECT_EQ(Get(*e, Column::kMeta, "a"), "va");
  EXPECT_EQ(Get(*e, Column::kMeta, "b"), "vb");
  ASSERT_TRUE(e->Write(b, false).ok());
  EXPECT_EQ(Get(*e, Column::kMeta, "a"), "new-a");
  EXPECT_EQ(Get(*e, Column::kMeta, "b"), "<none>");
  EXPECT_EQ(Get(*e, Column::kMeta, "d"), "newer-d");
}

TEST(BatchTest, PutAfterDeleteInTheSameBatch) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a"});
  Batch b(*e);
  b.Delete(Column::kMeta, "a");
  b.Put(Column::kMeta, "a", "again");
  EXPECT_EQ(Get(*e, b, Column::kMeta, "a"), "again");
  ASSERT_TRUE(e->Write(b, false).ok());
  EXPECT_EQ(Get(*e, Column::kMeta, "a"), "again");
}

TEST(BatchTest, ReadYourWritesWithIterators) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a", "c", "e", "g"});
  Batch b(*e);
  b.Put(Column::kMeta, "b", "new");
  b.Delete(Column::kMeta, "c");
  b.Put(Column::kMeta, "e", "changed");
  b.Put(Column::kMeta, "h", "new");
  b.Put(Column::kLeases, "zz", "other column");
  auto it = e->NewIterator(b, Column::kMeta);
  EXPECT_EQ(Forward(*it), (Keys{"a", "b", "e", "g", "h"}));
  EXPECT_EQ(Backward(*it), (Keys{"h", "g", "e", "b", "a"}));
  it->Seek("c");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "e");
  EXPECT_EQ(it->value(), "changed");
  it->SeekForPrev("d");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "b");
  EXPECT_EQ(it->value(), "new");
  // A plain iterator does not see the batch.
  auto plain = e->NewIterator(Column::kMeta);
  EXPECT_EQ(Forward(*plain), (Keys{"a", "c", "e", "g"}));
}

TEST(BatchTest, BatchIteratorHonoursBounds) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a", "c", "e", "g"});
  Batch b(*e);
  b.Put(Column::kMeta, "b", "new");
  b.Put(Column::kMeta, "f", "new");
  b.Put(Column::kMeta, "h", "new");
  b.Delete(Column::kMeta, "e");
  ReadOptions ro;
  ro.lower_bound = "b";
  ro.upper_bound = "g";
  auto it = e->NewIterator(b, Column::kMeta, ro);
  EXPECT_EQ(Forward(*it), (Keys{"b", "c", "f"}));
  EXPECT_EQ(Backward(*it), (Keys{"f", "c", "b"}));
  it->SeekForPrev("zzz");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "f");
  it->Seek("a");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "b");
  it->Seek("g");
  EXPECT_FALSE(it->Valid());
}

TEST(BatchTest, BatchIteratorOnVersionedKeys) {
  auto e = OpenInMemory();
  Batch base(*e);
  base.Put(Column::kKeys, MakeVersionedKey("k", 2), "k2");
  base.Put(Column::kKeys, MakeVersionedKey("k", 4), "k4");
  ASSERT_TRUE(e->Write(base, false).ok());
  Batch b(*e);
  b.Put(Column::kKeys, MakeVersionedKey("k", 5), "k5");
  b.Put(Column::kKeys, MakeVersionedKey("k", 3), "k3");
  b.Put(Column::kKeys, MakeVersionedKey("j", 7), "j7");
  auto it = e->NewIterator(b, Column::kKeys);
  std::vector<std::string> seen;
  for (it->SeekToFirst(); it->Valid(); it->Next()) seen.emplace_back(it->value());
  EXPECT_EQ(seen, (std::vector<std::string>{"j7", "k5", "k4", "k3", "k2"}));
  it->Seek(MakeVersionedKey("k", 4));
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "k4");
  EXPECT_EQ(Get(*e, b, Column::kKeys, MakeVersionedKey("k", 3)), "k3");
}

TEST(BatchTest, DeleteRangeAppliesOnWrite) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kRaftLog, {"1", "2", "3", "4", "5"});
  Batch b(*e);
  b.DeleteRange(Column::kRaftLog, "2", "4");
  ASSERT_TRUE(e->Write(b, false).ok());
  auto it = e->NewIterator(Column::kRaftLog);
  EXPECT_EQ(Forward(*it), (Keys{"1", "4", "5"}));
  EXPECT_EQ(Get(*e, Column::kRaftLog, "2"), "<none>");
  EXPECT_EQ(Get(*e, Column::kRaftLog, "4"), "v4");
  // Keys written after the range deletion (in a later batch) are visible again.
  PutAll(*e, Column::kRaftLog, {"3"});
  EXPECT_EQ(Get(*e, Column::kRaftLog, "3"), "v3");
}

TEST(BatchTest, DeleteRangeThenPutInOneBatchKeepsThePut) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kRaftLog, {"1", "2", "3"});
  Batch b(*e);
  b.DeleteRange(Column::kRaftLog, "1", "9");
  b.Put(Column::kRaftLog, "2", "new");
  ASSERT_TRUE(e->Write(b, false).ok());
  auto it = e->NewIterator(Column::kRaftLog);
  EXPECT_EQ(Forward(*it), (Keys{"2"}));
  EXPECT_EQ(Get(*e, Column::kRaftLog, "2"), "new");
}

TEST(BatchTest, ChangesBeforeTheFirstReadAreKeptInOrderAndSeenByIt) {
  // The batch records changes unindexed until something reads through it: the first read
  // must see them all, in order, and what follows must apply after them.
  auto e = OpenInMemory();
  PutAll(*e, Column::kRaftLog, {"1", "2", "3"});
  PutAll(*e, Column::kMeta, {"gone", "kept"});
  Batch b(*e);
  b.Put(Column::kMeta, "a", "1");
  b.Put(Column::kMeta, "a", "2");  // the later write of a key wins
  b.Delete(Column::kMeta, "gone");
  b.Put(Column::kKeys, MakeVersionedKey("k", 3), "k3");
  b.DeleteRange(Column::kRaftLog, "1", "3");
  b.Put(Column::kLeases, "l", "lease");
  const size_t count = b.Count();
  const size_t size = b.DataSize();
  EXPECT_EQ(count, 6u);

  EXPECT_EQ(Get(*e, b, Column::kMeta, "a"), "2");  // the first read: the batch is indexed now
  EXPECT_EQ(b.Count(), count);
  EXPECT_EQ(b.DataSize(), size);
  EXPECT_EQ(Get(*e, b, Column::kMeta, "gone"), "<none>");
  EXPECT_EQ(Get(*e, b, Column::kMeta, "kept"), "vkept");
  EXPECT_EQ(Get(*e, b, Column::kKeys, MakeVersionedKey("k", 3)), "k3");
  EXPECT_EQ(Get(*e, b, Column::kLeases, "l"), "lease");

  b.Put(Column::kMeta, "a", "3");
  b.Put(Column::kMeta, "gone", "back");
  EXPECT_EQ(b.Count(), count + 2);
  auto it = e->NewIterator(b, Column::kMeta);
  EXPECT_EQ(Forward(*it), (Keys{"a", "gone", "kept"}));
  EXPECT_EQ(Get(*e, b, Column::kMeta, "a"), "3");

  ASSERT_TRUE(e->Write(b, false).ok());
  EXPECT_EQ(Get(*e, Column::kMeta, "a"), "3");
  EXPECT_EQ(Get(*e, Column::kMeta, "gone"), "back");
  EXPECT_EQ(Get(*e, Column::kKeys, MakeVersionedKey("k", 3)), "k3");
  EXPECT_EQ(Get(*e, Column::kLeases, "l"), "lease");
  auto log = e->NewIterator(Column::kRaftLog);
  EXPECT_EQ(Forward(*log), (Keys{"3"}));

  // Cleared, it starts unindexed again.
  b.Clear();
  EXPECT_TRUE(b.Empty());
  b.Put(Column::kMeta, "z", "26");
  EXPECT_EQ(Get(*e, b, Column::kMeta, "z"), "26");
  EXPECT_EQ(Get(*e, b, Column::kMeta, "a"), "3");
}

TEST(IteratorTest, UnboundedSeeks) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"b", "d", "f"});
  auto it = e->NewIterator(Column::kMeta);
  it->Seek("c");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "d");
  EXPECT_EQ(it->value(), "vd");
  it->Seek("d");
  EXPECT_EQ(it->key(), "d");
  it->SeekForPrev("e");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "d");
  it->SeekForPrev("d");
  EXPECT_EQ(it->key(), "d");
  it->SeekForPrev("a");
  EXPECT_FALSE(it->Valid());
  it->Seek("g");
  EXPECT_FALSE(it->Valid());
  it->SeekToLast();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "f");
  it->Prev();
  EXPECT_EQ(it->key(), "d");
  EXPECT_TRUE(it->status().ok());
}

TEST(IteratorTest, EmptyColumn) {
  auto e = OpenInMemory();
  auto it = e->NewIterator(Column::kRevisions);
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  it->SeekToLast();
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().ok());
}

TEST(IteratorTest, LowerAndUpperBounds) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a", "b", "c", "d", "e"});
  ReadOptions ro;
  ro.lower_bound = "b";
  ro.upper_bound = "d";  // exclusive
  auto it = e->NewIterator(Column::kMeta, ro);
  EXPECT_EQ(Forward(*it), (Keys{"b", "c"}));
  EXPECT_EQ(Backward(*it), (Keys{"c", "b"}));
  it->Seek("a");  // below the lower bound: clamps to it
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "b");
  it->Seek("d");
  EXPECT_FALSE(it->Valid());
  it->SeekForPrev("z");  // above the upper bound: the last key inside
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "c");
  it->SeekForPrev("d");  // the bound itself is excluded
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "c");
  it->SeekForPrev("a");
  EXPECT_FALSE(it->Valid());
}

TEST(IteratorTest, UpperBoundBetweenKeysAndOnlyOneBound) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a", "b", "c"});
  ReadOptions upper_only;
  upper_only.upper_bound = "bb";
  auto it = e->NewIterator(Column::kMeta, upper_only);
  EXPECT_EQ(Forward(*it), (Keys{"a", "b"}));
  it->SeekToLast();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "b");

  ReadOptions lower_only;
  lower_only.lower_bound = "aa";
  auto lo = e->NewIterator(Column::kMeta, lower_only);
  EXPECT_EQ(Backward(*lo), (Keys{"c", "b"}));

  ReadOptions empty_range;
  empty_range.lower_bound = "b";
  empty_range.upper_bound = "b";
  auto none = e->NewIterator(Column::kMeta, empty_range);
  EXPECT_TRUE(Forward(*none).empty());
  EXPECT_TRUE(Backward(*none).empty());
}

TEST(IteratorTest, SeekToLastWithUpperBoundBeyondEveryKey) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a", "b"});
  ReadOptions ro;
  ro.upper_bound = "zzz";
  auto it = e->NewIterator(Column::kMeta, ro);
  it->SeekToLast();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "b");
  ReadOptions below;
  below.upper_bound = "a";
  auto none = e->NewIterator(Column::kMeta, below);
  none->SeekToLast();
  EXPECT_FALSE(none->Valid());
}

TEST(IteratorTest, BoundsOnVersionedKeys) {
  auto e = OpenInMemory();
  Batch b(*e);
  for (const char* k : {"a", "b", "c"}) {
    for (uint64_t v : {1, 2, 3})
      b.Put(Column::kKeys, MakeVersionedKey(k, v), std::string(k) + std::to_string(v));
  }
  ASSERT_TRUE(e->Write(b, false).ok());
  ReadOptions ro;
  ro.lower_bound = MakeVersionedKey("b", UINT64_MAX);  // before every version of b
  ro.upper_bound = MakeVersionedKey("b", 0);           // after every version of b
  auto it = e->NewIterator(Column::kKeys, ro);
  std::vector<std::string> seen;
  for (it->SeekToFirst(); it->Valid(); it->Next()) seen.emplace_back(it->value());
  EXPECT_EQ(seen, (std::vector<std::string>{"b3", "b2", "b1"}));
  it->SeekToLast();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "b1");
  it->SeekForPrev(MakeVersionedKey("c", 3));
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "b1");
}

TEST(IteratorTest, BoundsAreCopied) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a", "b", "c"});
  std::unique_ptr<Iterator> it;
  {
    ReadOptions ro;
    ro.lower_bound = std::string("b");
    ro.upper_bound = std::string("c");
    it = e->NewIterator(Column::kMeta, ro);
  }  // the options are gone; the iterator must not refer to them
  EXPECT_EQ(Forward(*it), Keys{"b"});
}

TEST(SnapshotTest, IsolatesFromLaterWrites) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a", "b"});
  auto snap = e->GetSnapshot();
  Batch b(*e);
  b.Put(Column::kMeta, "a", "changed");
  b.Delete(Column::kMeta, "b");
  b.Put(Column::kMeta, "c", "new");
  b.DeleteRange(Column::kMeta, "a", "b");
  ASSERT_TRUE(e->Write(b, false).ok());
  EXPECT_EQ(Get(*e, Column::kMeta, "a", snap.get()), "va");
  EXPECT_EQ(Get(*e, Column::kMeta, "b", snap.get()), "vb");
  EXPECT_EQ(Get(*e, Column::kMeta, "c", snap.get()), "<none>");
  EXPECT_EQ(Get(*e, Column::kMeta, "a"), "<none>");
  EXPECT_EQ(Get(*e, Column::kMeta, "c"), "new");
  ReadOptions ro;
  ro.snapshot = snap.get();
  auto it = e->NewIterator(Column::kMeta, ro);
  EXPECT_EQ(Forward(*it), (Keys{"a", "b"}));
  auto now = e->NewIterator(Column::kMeta);
  EXPECT_EQ(Forward(*now), (Keys{"c"}));
}

TEST(SnapshotTest, SurvivesFlushAndCompaction) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a"});
  auto snap = e->GetSnapshot();
  Batch b(*e);
  b.Delete(Column::kMeta, "a");
  ASSERT_TRUE(e->Write(b, false).ok());
  ASSERT_TRUE(e->CompactAll().ok());
  EXPECT_EQ(Get(*e, Column::kMeta, "a", snap.get()), "va");
  EXPECT_EQ(Get(*e, Column::kMeta, "a"), "<none>");
}

TEST(SnapshotTest, BatchIteratorOverSnapshot) {
  auto e = OpenInMemory();
  PutAll(*e, Column::kMeta, {"a"});
  auto snap = e->GetSnapshot();
  PutAll(*e, Column::kMeta, {"b"});
  Batch b(*e);
  b.Put(Column::kMeta, "c", "pending");
  ReadOptions ro;
  ro.snapshot = snap.get();
  auto it = e->NewIterator(b, Column::kMeta, ro);
  EXPECT_EQ(Forward(*it), (Keys{"a", "c"}));
}

TEST(EngineTest, SizesAndMaintenance) {
  auto e = OpenInMemory();
  Batch b(*e);
  std::mt19937 rng(1);
  for (int i = 0; i < 1000; ++i) {
    std::string v(100, '\0');
    for (char& c : v) c = static_cast<char>(rng());  // incompressible
    if (i == 7) v = std::string(100, 'x');
    b.Put(Column::kKeys, MakeVersionedKey("key" + std::to_string(i), 1), v);
  }
  ASSERT_TRUE(e->Write(b, false).ok());
  EXPECT_GT(e->SizeOnDisk(), 0u);
  ASSERT_TRUE(e->Flush().ok());
  EXPECT_GT(e->SizeOnDisk(), 50000u);
  ASSERT_TRUE(e->CompactAll().ok());
  EXPECT_TRUE(e->VerifyChecksums().ok());
  EXPECT_EQ(Get(*e, Column::kKeys, MakeVersionedKey("key7", 1)), std::string(100, 'x'));
}

TEST(EngineTest, InMemoryEnginesAreIndependentAndTouchNoFiles) {
  testsupport::ScratchDir dir("engine-test");
  const std::string path = dir.path() + "/db";
  EngineOptions o;
  o.in_memory = true;
  auto a = Engine::Open(path, o);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE((*a)->in_memory());
  EXPECT_EQ((*a)->path(), path);
  PutAll(**a, Column::kMeta, {"x"});
  ASSERT_TRUE((*a)->Flush().ok());
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "in-memory engine created " << path;
  // Another in-memory engine at the same path starts empty.
  auto b = Engine::Open(path, o);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Get(**b, Column::kMeta, "x"), "<none>");
  EXPECT_EQ(Get(**a, Column::kMeta, "x"), "vx");
}

// Bytes of RocksDB's write-ahead log files in `dir`.
uint64_t WalBytes(const std::string& dir) {
  uint64_t sum = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() == ".log") sum += f.file_size();
  }
  return sum;
}

TEST(EngineTest, UnloggedWritesSkipTheLogAndAreDurableAfterFlush) {
  testsupport::ScratchDir dir("engine-test");
  const std::string path = dir.path() + "/db";
  const std::string big(1 << 20, 'u');
  {
    auto e = Engine::Open(path, {});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    Batch b(**e);
    for (int i = 0; i < 4; ++i) {
      b.Put(Column::kKeys, "unlogged" + std::to_string(i), big);
      ASSERT_TRUE((*e)->WriteUnlogged(b).ok());
      b.Clear();  // the batch is refilled, as the importer does
    }
    EXPECT_EQ(Get(**e, Column::kKeys, "unlogged3"), big);
    ASSERT_TRUE((*e)->SyncWal().ok());
    EXPECT_LT(WalBytes(path), uint64_t{64} << 10) << "the unlogged values reached the log";
    b.Put(Column::kKeys, "logged", big);
    ASSERT_TRUE((*e)->Write(b, /*sync=*/true).ok());
    EXPECT_GT(WalBytes(path), uint64_t{1} << 20) << "a logged write must reach the log";
    ASSERT_TRUE((*e)->Flush().ok());
  }
  auto e = Engine::Open(path, {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(Get(**e, Column::kKeys, "unlogged" + std::to_string(i)), big);
  EXPECT_EQ(Get(**e, Column::kKeys, "logged"), big);
}

TEST(EngineTest, PersistsAcrossReopen) {
  testsupport::ScratchDir dir("engine-test");
  const std::string path = dir.path() + "/db";
  {
    auto e = Engine::Open(path, {});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_FALSE((*e)->in_memory());
    Batch b(**e);
    b.Put(Column::kMeta, "m", "meta");
    b.Put(Column::kKeys, MakeVersionedKey("k", 3), "k3");
    b.Put(Column::kKeys, MakeVersionedKey("k", 9), "k9");
    b.Put(Column::kRaftLog, EncodeFixed64BE(1), "entry");
    ASSERT_TRUE((*e)->Write(b, /*sync=*/true).ok());
    Batch unsynced(**e);
    unsynced.Put(Column::kLeases, "l", "lease");
    ASSERT_TRUE((*e)->Write(unsynced, /*sync=*/false).ok());
  }
  {
    auto e = Engine::Open(path, {});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ(Get(**e, Column::kMeta, "m"), "meta");
    EXPECT_EQ(Get(**e, Column::kRaftLog, EncodeFixed64BE(1)), "entry");
    // A clean close keeps unsynced writes too.
    EXPECT_EQ(Get(**e, Column::kLeases, "l"), "lease");
    // The versioned order is kept (the comparator is recorded with the data).
    auto it = (**e).NewIterator(Column::kKeys);
    it->SeekToFirst();
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ(it->value(), "k9");
    ASSERT_TRUE((*e)->CompactAll().ok());
    ASSERT_TRUE((*e)->VerifyChecksums().ok());
  }
  auto again = Engine::Open(path, {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Get(**again, Column::kKeys, MakeVersionedKey("k", 3)), "k3");
}

// Writes `count` synced records of 1 KiB into a new store at `path` and closes it without a
// flush, so they live only in the write-ahead log; returns that log's path.
std::string StoreWithRecordsOnlyInTheWal(const std::string& path, int count) {
  {
    auto e = Engine::Open(path, {});
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok()) return "";
    for (int i = 0; i < count; ++i) {
      Batch b(**e);
      b.Put(Column::kRaftLog, EncodeFixed64BE(i),
            std::string(1024, static_cast<char>('a' + i % 26)));
      EXPECT_TRUE((*e)->Write(b, /*sync=*/true).ok());
    }
  }
  std::string wal;
  uintmax_t size = 0;
  for (const auto& f : std::filesystem::directory_iterator(path)) {
    if (f.path().extension() == ".log" && f.file_size() > size) {
      wal = f.path().string();
      size = f.file_size();
    }
  }
  EXPECT_GT(size, uintmax_t(count) * 1024) << "the records are not in a WAL of " << path;
  return wal;
}

TEST(EngineTest, DamagedWalRecordFailsTheOpenInsteadOfDroppingLaterWrites) {
  testsupport::ScratchDir dir("engine-test");
  const std::string path = dir.path() + "/db";
  const std::string wal = StoreWithRecordsOnlyInTheWal(path, 200);
  ASSERT_FALSE(wal.empty());
  {
    // One byte in the middle of the log: a record that was acknowledged, with 100 after it.
    std::fstream f(wal, std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = static_cast<std::streamoff>(std::filesystem::file_size(wal) / 2);
    f.seekg(at);
    char c = 0;
    f.get(c);
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x10));
  }
  auto e = Engine::Open(path, {});
  ASSERT_FALSE(e.ok()) << "a damaged WAL opened; later writes would be lost silently";
  EXPECT_NE(e.status().ToString().find("orruption"), std::string::npos) << e.status().ToString();
}

TEST(EngineTest, WalTornAtItsEndByACrashDropsOnlyTheUnfinishedRecord) {
  testsupport::ScratchDir dir("engine-test");
  const std::string path = dir.path() + "/db";
  const std::string wal = StoreWithRecordsOnlyInTheWal(path, 50);
  ASSERT_FALSE(wal.empty());
  // A crash in the middle of the last write leaves part of its record.
  std::filesystem::resize_file(wal, std::filesystem::file_size(wal) - 100);
  auto e = Engine::Open(path, {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (int i = 0; i < 49; ++i) {
    EXPECT_EQ(Get(**e, Column::kRaftLog, EncodeFixed64BE(i)),
              std::string(1024, static_cast<char>('a' + i % 26)))
        << "record " << i;
  }
  EXPECT_EQ(Get(**e, Column::kRaftLog, EncodeFixed64BE(49)), "<none>");
}

TEST(EngineTest, OpenWithoutCreateFailsOnMissingDatabase) {
  testsupport::ScratchDir dir("engine-test");
  EngineOptions o;
  o.create_if_missing = false;
  auto e = Engine::Open(dir.path() + "/missing", o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("open store \"" + dir.path() + "/missing\""),
            std::string::npos)
      << e.status().message();
}

TEST(EngineTest, OpenFailsWhenPathIsAFile) {
  testsupport::ScratchDir dir("engine-test");
  const std::string file = dir.path() + "/file";
  std::system(("echo x > '" + file + "'").c_str());
  auto e = Engine::Open(file, {});
  EXPECT_FALSE(e.ok());
}

}  // namespace
}  // namespace etcdw::storage

namespace etcdw::storage {
namespace {

TEST(EngineSizeTest, LegacyRaftLogColumnIsLeftOut) {
  EngineOptions o;
  o.in_memory = true;
  auto e = Engine::Open("/mem/size", o);
  ASSERT_TRUE(e.ok());
  Batch b(**e);
  std::mt19937 rng(7);
  for (int i = 0; i < 400; ++i) {
    std::string v(512, '\0');
    for (char& c : v) c = static_cast<char>(rng());
    b.Put(Column::kRaftLog, EncodeFixed64BE(static_cast<uint64_t>(i + 1)), v);
  }
  ASSERT_TRUE((*e)->Write(b, true).ok());
  ASSERT_TRUE((*e)->Flush().ok());
  EXPECT_LT((*e)->SizeOnDisk(), 50000u);
  // The same data in a counted column is counted.
  Batch k(**e);
  for (int i = 0; i < 400; ++i) {
    std::string v(512, '\0');
    for (char& c : v) c = static_cast<char>(rng());
    k.Put(Column::kKeys, MakeVersionedKey("k" + std::to_string(i), 1), v);
  }
  ASSERT_TRUE((*e)->Write(k, true).ok());
  ASSERT_TRUE((*e)->Flush().ok());
  EXPECT_GT((*e)->SizeOnDisk(), 150000u);
}

TEST(EngineSizeTest, UnflushedDataIsCountedCloseToItsSize) {
  EngineOptions o;
  o.in_memory = true;
  auto e = Engine::Open("/mem/size2", o);
  ASSERT_TRUE(e.ok());
  uint64_t empty = (*e)->SizeOnDisk();
  Batch b(**e);
  b.Put(Column::kKeys, MakeVersionedKey("k", 1), std::string(10000, 'v'));
  ASSERT_TRUE((*e)->Write(b, false).ok());
  uint64_t one = (*e)->SizeOnDisk();
  EXPECT_GE(one, empty + 10000);
  // Small arena blocks: a 10 kB write does not count as megabytes.
  EXPECT_LT(one, empty + 200000);
}

}  // namespace
}  // namespace etcdw::storage
