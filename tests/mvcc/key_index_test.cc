// The key index against the store it summarises: after random batches of puts, deletes and
// compactions (several transactions per batch, reopens in between), counts from the index equal
// counts walked over the stored versions, ranges with a limit answer the same with and without
// it, and every key's entry matches its newest stored version.
#include "etcdw/mvcc/key_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "mvcc_test_util.h"

namespace etcdw::mvcc {
namespace {

using testutil::PutReq;
using testutil::RangeReq;
using testutil::Store;
using testutil::TempDir;

// A view that never offers counts, so RangeKeys walks the stored versions (the reference).
class WalkingView final : public ReadView {
 public:
  explicit WalkingView(const ReadView& v) : v_(v) {}
  int64_t Rev() const override { return v_.Rev(); }
  int64_t CompactRev() const override { return v_.CompactRev(); }
  std::unique_ptr<storage::Iterator> NewKeysIterator(
      const storage::ReadOptions& opts) const override {
    return v_.NewKeysIterator(opts);
  }
  const LeaseTable& leases() const override { return v_.leases(); }

 private:
  const ReadView& v_;
};

std::string IndexKey(int i) { return "k/" + std::to_string(i); }

// Runs `fn` on each of several transactions of one batch, then commits it.
template <typename Fn>
void ApplyBatchOf(Store& s, int txns, uint64_t& index, Fn fn) {
  auto batch = s.kv().BeginApply();
  for (int i = 0; i < txns; ++i) {
    auto txn = batch->Begin();
    fn(*txn, i);
    batch->End(std::move(txn));
  }
  Status st = s.kv().Commit(*batch, ++index);
  ASSERT_TRUE(st.ok()) << st.ToString();
}

// Compares index counts and limited ranges with walked ones over `ranges`.
void ExpectRangesAgree(Store& s, const std::vector<KeyRange>& ranges) {
  auto view = s.kv().NewReadView();
  WalkingView walking(*view);
  for (const KeyRange& r : ranges) {
    SCOPED_TRACE("range [" + r.key + ", " + r.end + ")");
    auto counted = view->CountLive(r);
    ASSERT_TRUE(counted.has_value()) << "a view at the current revision must count";
    auto walked = RangeKeys(walking, r, {});
    ASSERT_TRUE(walked.ok()) << walked.status().ToString();
    EXPECT_EQ(*counted, walked->count);
    for (int64_t limit : {1, 3, 1000}) {
      etcdserverpb::RangeRequest req = RangeReq(r.key, r.end);
      if (r.kind == KeyRange::Kind::kFromKey) req.set_range_end(std::string(1, '\0'));
      req.set_limit(limit);
      auto a = ExecuteRange(*view, req);
      auto b = ExecuteRange(walking, req);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(a->count(), b->count());
      EXPECT_EQ(a->more(), b->more());
      EXPECT_EQ(testutil::KeysOf(*a), testutil::KeysOf(*b));
      req.set_count_only(true);
      auto c = ExecuteRange(*view, req);
      ASSERT_TRUE(c.ok());
      EXPECT_EQ(c->count(), b->count());
      EXPECT_EQ(c->kvs_size(), 0);
    }
  }
}

// Every key's index entry against its newest stored version, read through a write transaction.
void ExpectEntriesMatch(Store& s, int key_space) {
  auto view = s.kv().NewReadView();
  WalkingView walking(*view);
  for (int i = 0; i < key_space; ++i) {
    const std::string key = IndexKey(i);
    auto walked = RangeKeys(walking, KeyRange::Single(key), {});
    ASSERT_TRUE(walked.ok());
    auto batch = s.kv().BeginApply();
    auto txn = batch->Begin();
    auto got = txn->Get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->has_value(), walked->kvs.size() == 1) << key;
    if (!got->has_value()) continue;
    const mvccpb::KeyValue& want = walked->kvs.front();
    EXPECT_EQ((*got)->SerializeAsString(), want.SerializeAsString()) << key;
  }
}

TEST(KeyIndexTest, AgreesWithTheStoredVersionsThroughRandomBatches) {
  TempDir dir;
  auto s = Store::OnDisk(dir.path() + "/db");
  ASSERT_NE(s, nullptr);
  constexpr int kKeySpace = 60;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> key(0, kKeySpace - 1);
  uint64_t index = 0;
  const std::vector<KeyRange> ranges = {
      KeyRange::FromRequest("k/", PrefixRangeEnd("k/")),
      KeyRange::FromRequest("k/1", "k/4"),
      KeyRange::FromRequest("k/5", std::string(1, '\0')),
      KeyRange::Single("k/7"),
      KeyRange::FromRequest("a", "b"),
  };
  for (int round = 0; round < 120; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const int txns = 1 + static_cast<int>(rng() % 5);
    ApplyBatchOf(*s, txns, index, [&](WriteTxn& t, int) {
      switch (rng() % 6) {
        case 0: {  // a range of keys deleted
          int a = key(rng), b = key(rng);
          auto r = ExecuteDeleteRange(
              t, testutil::DeleteReq(IndexKey(std::min(a, b)), IndexKey(std::max(a, b))));
          ASSERT_TRUE(r.ok()) << r.status().ToString();
        } break;
        case 1: {  // one key deleted
          auto r = ExecuteDeleteRange(t, testutil::DeleteReq(IndexKey(key(rng))));
          ASSERT_TRUE(r.ok()) << r.status().ToString();
        } break;
        default: {
          auto r = ExecutePut(t, PutReq(IndexKey(key(rng)), "v" + std::to_string(round)));
          ASSERT_TRUE(r.ok()) << r.status().ToString();
        }
      }
    });
    if (round % 25 == 24) {
      ASSERT_TRUE(s->Compact(s->kv().Rev() - 3).ok());
    }
    if (round % 40 == 39) {
      s->Reopen();
      index = s->last_index();
    }
    ExpectRangesAgree(*s, ranges);
    if (round % 10 == 0) ExpectEntriesMatch(*s, kKeySpace);
  }
  ExpectEntriesMatch(*s, kKeySpace);
}

TEST(KeyIndexTest, TransactionsOfOneBatchSeeEachOthersChanges) {
  auto s = Store::InMemory();
  ASSERT_NE(s, nullptr);
  s->Put("a", "1");
  const int64_t created = s->kv().Rev();
  uint64_t index = s->last_index();
  std::vector<int64_t> versions;
  ApplyBatchOf(*s, 4, index, [&](WriteTxn& t, int i) {
    if (i == 2) {
      ASSERT_TRUE(ExecuteDeleteRange(t, testutil::DeleteReq("a")).ok());
      return;
    }
    auto r = ExecutePut(t, PutReq("a", "v" + std::to_string(i)));
    ASSERT_TRUE(r.ok());
    auto got = t.Get("a");
    ASSERT_TRUE(got.ok() && got->has_value());
    versions.push_back((*got)->version());
    // Recreated after the delete: a new generation.
    EXPECT_EQ((*got)->create_revision(), i < 2 ? created : t.Rev());
  });
  EXPECT_EQ(versions, (std::vector<int64_t>{2, 3, 1}));
  auto r = s->Range(RangeReq("a"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->kvs_size(), 1);
  EXPECT_EQ(r->kvs(0).value(), "v3");
  EXPECT_EQ(r->count(), 1);
}

TEST(KeyIndexTest, AViewBehindTheIndexWalksInsteadOfCounting) {
  auto s = Store::InMemory();
  ASSERT_NE(s, nullptr);
  s->Put("a", "1");
  auto old_view = s->kv().NewReadView();
  s->Put("b", "2");
  const KeyRange all = KeyRange::FromRequest("a", "z");
  EXPECT_FALSE(old_view->CountLive(all).has_value());
  auto r = RangeKeys(*old_view, all, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->count, 1);
  EXPECT_EQ(s->kv().NewReadView()->CountLive(all), std::optional<int64_t>(2));
}

TEST(KeyIndexTest, DecodesTheMetadataOfAStoredVersionAndRejectsGarbage) {
  mvccpb::KeyValue kv;
  kv.set_key("k");
  kv.set_value(std::string(10000, 'x'));
  kv.set_create_revision(5);
  kv.set_mod_revision(9);
  kv.set_version(3);
  kv.set_lease(0x1234);
  KeyMeta m;
  ASSERT_TRUE(DecodeKeyMeta(kv.SerializeAsString(), m));
  EXPECT_EQ(m.create_rev, 5);
  EXPECT_EQ(m.mod_rev, 9);
  EXPECT_EQ(m.version, 3);
  EXPECT_EQ(m.lease, 0x1234);
  std::string bytes = kv.SerializeAsString();
  bytes.resize(bytes.size() - 10);  // the value cut short
  EXPECT_FALSE(DecodeKeyMeta(bytes, m));
  EXPECT_FALSE(DecodeKeyMeta(std::string("\x12\xff\xff\xff\xff\x0f", 6), m));
}

}  // namespace
}  // namespace etcdw::mvcc
