// StateImporter (mvcc/import.h): a history written by our own store, handed to the importer the
// way etcd's backend holds it (one change per revision, the versions a finished compaction kept
// and nothing else below it), rebuilds the same records byte for byte; malformed changes and a
// live key without its lease are refused.
#include "etcdw/mvcc/import.h"

#include <gtest/gtest.h>

#include <map>

#include "etcdw/mvcc/compactor.h"
#include "etcdw/storage/meta_records.h"
#include "etcdw/storage/versioned_key.h"
#include "mvcc_test_util.h"

namespace etcdw::mvcc {
namespace {

using storage::Column;
using testutil::Store;

std::map<std::string, std::string> ColumnOf(const storage::Engine& e, Column c) {
  std::map<std::string, std::string> out;
  auto it = e.NewIterator(c);
  for (it->SeekToFirst(); it->Valid(); it->Next()) out[std::string(it->key())] = it->value();
  EXPECT_TRUE(it->status().ok());
  return out;
}

std::string MetaOf(const storage::Engine& e, const storage::meta::Record& r) {
  auto v = e.Get(Column::kMeta, r.key);
  EXPECT_TRUE(v.ok());
  return v.ok() && v->has_value() ? **v : "<none>";
}

std::string Kv(const std::string& key, int64_t create, int64_t mod, int64_t version,
               const std::string& value, int64_t lease = 0) {
  mvccpb::KeyValue kv;
  kv.set_key(key);
  kv.set_create_revision(create);
  kv.set_mod_revision(mod);
  kv.set_version(version);
  kv.set_value(value);
  kv.set_lease(lease);
  return kv.SerializeAsString();
}

std::string Tombstone(const std::string& key) {
  mvccpb::KeyValue kv;
  kv.set_key(key);
  return kv.SerializeAsString();
}

class ImportTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> src_ = Store::InMemory();
  std::unique_ptr<Store> dst_ = Store::InMemory();
};

TEST_F(ImportTest, RebuildsTheRecordsOurOwnWritesAndCompactionLeave) {
  ASSERT_TRUE(src_->Grant(7, 600).ok());
  src_->Put("a", "1");
  src_->Put("b", "1", 7);
  src_->Put("a", "2");
  src_->Delete("b");
  src_->Put("c", "1", 7);
  etcdserverpb::TxnRequest t;  // three changes of one revision: subs 0..2
  *t.add_success() = testutil::OpPut("d", "1", 7);
  *t.add_success() = testutil::OpPut("e", "1");
  *t.add_success() = testutil::OpDelete("a");
  ASSERT_TRUE(src_->Txn(t).ok());
  src_->Put("e", "2");
  src_->Put("b", "3");
  const int64_t compacted = src_->kv().Rev() - 2;  // the transaction's
  ASSERT_TRUE(src_->Compact(compacted).ok());
  ASSERT_TRUE(Compactor::CompactTo(src_->kv(), compacted).ok());
  src_->Put("c", "2", 7);
  src_->Delete("d");
  const int64_t last = src_->kv().Rev();

  // The changes as etcd's backend holds them: each surviving version with its revision (the
  // sub revision from the revision log where it is kept, any below the compaction).
  const auto revisions = ColumnOf(src_->engine(), Column::kRevisions);
  std::map<std::pair<std::string, int64_t>, int64_t> sub_of;
  for (const auto& [k, v] : revisions) {
    const Revision r = DecodeRevisionKey(k);
    sub_of[{v.substr(1), r.main}] = r.sub;
  }
  StateImporter importer(dst_->engine(), {compacted, compacted});
  ASSERT_TRUE(importer.AddLease({7, 600, 0}).ok());
  for (const auto& [vkey, value] : ColumnOf(src_->engine(), Column::kKeys)) {
    const std::string key(storage::UserKeyOf(vkey));
    const int64_t main = static_cast<int64_t>(storage::VersionOf(vkey));
    const int64_t sub = sub_of.count({key, main}) ? sub_of[{key, main}] : 0;
    Status st = value.empty() ? importer.AddVersion({main, sub}, true, Tombstone(key))
                              : importer.AddVersion({main, sub}, false, value);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  auto rev = importer.Finish();
  ASSERT_TRUE(rev.ok()) << rev.status().ToString();
  EXPECT_EQ(*rev, last);
  EXPECT_EQ(importer.stats().leases, 1u);

  for (Column c : {Column::kKeys, Column::kRevisions, Column::kLeases}) {
    EXPECT_EQ(ColumnOf(dst_->engine(), c), ColumnOf(src_->engine(), c)) << static_cast<int>(c);
  }
  for (const auto* r : {&storage::meta::kCurrentRev, &storage::meta::kScheduledCompactRev,
                        &storage::meta::kFinishedCompactRev}) {
    EXPECT_EQ(MetaOf(dst_->engine(), *r), MetaOf(src_->engine(), *r)) << r->key;
  }
  auto kv = KvStore::Open(dst_->engine());
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_EQ((*kv)->Rev(), last);
  EXPECT_EQ((*kv)->CompactRev(), compacted);
  ASSERT_TRUE((*kv)->leases().Get(7).has_value());
  EXPECT_EQ((*kv)->leases().Get(7)->ttl, 600);
}

TEST_F(ImportTest, RefusesMalformedChanges) {
  StateImporter importer(dst_->engine(), {});
  Status st = importer.AddVersion({5, 0}, false, "\xff\xff");
  EXPECT_EQ(st.code(), Code::kDataLoss);
  EXPECT_NE(st.message().find("revision 5.0"), std::string::npos) << st.ToString();
  EXPECT_EQ(importer.AddVersion({5, 0}, true, "").code(), Code::kDataLoss);  // no key
  st = importer.AddVersion({5, 0}, false, Kv("k", 2, 4, 1, "v"));            // mod != main
  EXPECT_NE(st.message().find("do not fit"), std::string::npos) << st.ToString();
  EXPECT_FALSE(importer.AddVersion({5, 0}, false, Kv("k", 6, 5, 1, "v")).ok());  // create > mod
  EXPECT_FALSE(importer.AddVersion({5, 0}, false, Kv("k", 5, 5, 0, "v")).ok());  // version 0
  EXPECT_FALSE(importer.AddVersion({0, 0}, false, Kv("k", 1, 0, 1, "v")).ok());
  EXPECT_FALSE(importer.AddLease({0, 10, 0}).ok());
  EXPECT_FALSE(importer.AddLease({1, -1, 0}).ok());
  EXPECT_TRUE(importer.AddVersion({5, 0}, false, Kv("k", 5, 5, 1, "v")).ok());
}

TEST_F(ImportTest, ALiveKeyNeedsItsLeaseADeletedOneDoesNot) {
  {
    StateImporter importer(dst_->engine(), {});
    ASSERT_TRUE(importer.AddVersion({2, 0}, false, Kv("gone", 2, 2, 1, "v", 9)).ok());
    ASSERT_TRUE(importer.AddVersion({3, 0}, true, Tombstone("gone")).ok());
    auto rev = importer.Finish();
    ASSERT_TRUE(rev.ok()) << rev.status().ToString();
    EXPECT_EQ(*rev, 3);
  }
  std::unique_ptr<Store> other = Store::InMemory();
  StateImporter importer(other->engine(), {});
  ASSERT_TRUE(importer.AddVersion({2, 0}, false, Kv("live", 2, 2, 1, "v", 9)).ok());
  auto rev = importer.Finish();
  ASSERT_FALSE(rev.ok());
  EXPECT_EQ(rev.status().code(), Code::kDataLoss);
  EXPECT_NE(rev.status().message().find("\"live\""), std::string::npos) << rev.status().ToString();
}

TEST_F(ImportTest, TheRevisionIsTheCompactionsWhenItsChangesAreGone) {
  // Compacted to 9 after the newest changes (deletions at 8 and 9) were removed with it.
  StateImporter importer(dst_->engine(), {9, 9});
  ASSERT_TRUE(importer.AddVersion({4, 0}, false, Kv("k", 4, 4, 1, "v")).ok());
  auto rev = importer.Finish();
  ASSERT_TRUE(rev.ok()) << rev.status().ToString();
  EXPECT_EQ(*rev, 9);
  auto kv = KvStore::Open(dst_->engine());
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_EQ((*kv)->Rev(), 9);
  EXPECT_EQ((*kv)->CompactRev(), 9);
  // Below the finished compaction a version has no revision record.
  EXPECT_TRUE(ColumnOf(dst_->engine(), Column::kRevisions).empty());
}

}  // namespace
}  // namespace etcdw::mvcc
