#include "etcdw/mvcc/kv_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/mvcc/key_range.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/mvcc/txn.h"
#include "etcdw/storage/meta_records.h"
#include "etcdw/storage/versioned_key.h"
#include "mvcc/mvcc_test_util.h"

namespace etcdw::mvcc {
namespace {

using etcdserverpb::RangeRequest;
using testutil::KeysOf;
using testutil::PutReq;
using testutil::RangeReq;
using testutil::ReplacedVersion;
using testutil::Store;
using Keys = std::vector<std::string>;

class KvStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    s_ = Store::InMemory();
    ASSERT_NE(s_, nullptr);
  }
  KvStore& kv() { return s_->kv(); }
  etcdserverpb::RangeResponse MustRange(const RangeRequest& r) {
    auto resp = s_->Range(r);
    EXPECT_TRUE(resp.ok()) << resp.status().ToString();
    return resp.ok() ? resp.value() : etcdserverpb::RangeResponse();
  }
  std::unique_ptr<Store> s_;
};

TEST(KvStoreOpenTest, PutAdvancesRevisionAndKeepsHistory) {
  storage::EngineOptions o;
  o.in_memory = true;
  auto e = storage::Engine::Open("/mem/kv", o);
  ASSERT_TRUE(e.ok());
  auto kv = KvStore::Open(**e);
  ASSERT_TRUE(kv.ok());
  for (const char* v : {"a", "b"}) {
    auto batch = (*kv)->BeginApply();
    auto txn = batch->Begin();
    etcdserverpb::PutRequest p;
    p.set_key("k");
    p.set_value(v);
    ASSERT_TRUE(ExecutePut(*txn, p).ok());
    batch->End(std::move(txn));
    ASSERT_TRUE((*kv)->Commit(*batch, 1).ok());
  }
  EXPECT_EQ((*kv)->Rev(), 3);
  auto view = (*kv)->NewReadView();
  etcdserverpb::RangeRequest r;
  r.set_key("k");
  r.set_revision(2);
  auto resp = ExecuteRange(*view, r);
  ASSERT_TRUE(resp.ok());
  ASSERT_EQ(resp->kvs_size(), 1);
  EXPECT_EQ(resp->kvs(0).value(), "a");
  EXPECT_EQ(resp->header().revision(), 3);
}

// --- revisions ------------------------------------------------------------------------------

TEST_F(KvStoreTest, FreshStoreIsAtRevisionOne) {
  EXPECT_EQ(kv().Rev(), 1);
  EXPECT_EQ(kv().CompactRev(), -1);
  EXPECT_EQ(kv().ConsistentIndex(), 0u);
  EXPECT_EQ(kv().ScheduledCompactRev(), -1);
  EXPECT_EQ(kv().FinishedCompactRev(), -1);
  auto r = MustRange(RangeReq("a"));
  EXPECT_EQ(r.header().revision(), 1);
  EXPECT_EQ(r.count(), 0);
}

TEST_F(KvStoreTest, CreateModRevisionAndVersion) {
  auto p1 = s_->Put("k", "v1");
  EXPECT_EQ(p1.header().revision(), 2);
  auto r = MustRange(RangeReq("k"));
  ASSERT_EQ(r.kvs_size(), 1);
  EXPECT_EQ(r.kvs(0).key(), "k");
  EXPECT_EQ(r.kvs(0).value(), "v1");
  EXPECT_EQ(r.kvs(0).create_revision(), 2);
  EXPECT_EQ(r.kvs(0).mod_revision(), 2);
  EXPECT_EQ(r.kvs(0).version(), 1);
  EXPECT_EQ(r.kvs(0).lease(), 0);

  s_->Put("other", "x");  // rev 3
  auto p2 = s_->Put("k", "v2");
  EXPECT_EQ(p2.header().revision(), 4);
  r = MustRange(RangeReq("k"));
  ASSERT_EQ(r.kvs_size(), 1);
  EXPECT_EQ(r.kvs(0).create_revision(), 2);
  EXPECT_EQ(r.kvs(0).mod_revision(), 4);
  EXPECT_EQ(r.kvs(0).version(), 2);
  EXPECT_EQ(r.header().revision(), 4);
}

TEST_F(KvStoreTest, EveryChangingRequestBumpsTheRevisionOnce) {
  s_->Put("a", "1");
  EXPECT_EQ(kv().Rev(), 2);
  s_->Put("a", "1");  // the same value again is still a change
  EXPECT_EQ(kv().Rev(), 3);
  auto d = s_->Delete("a");
  EXPECT_EQ(d.deleted(), 1);
  EXPECT_EQ(d.header().revision(), 4);
  EXPECT_EQ(kv().Rev(), 4);
}

TEST_F(KvStoreTest, DeletingNothingDoesNotBumpTheRevision) {
  s_->Put("a", "1");
  auto d = s_->Delete("missing");
  EXPECT_EQ(d.deleted(), 0);
  EXPECT_EQ(d.header().revision(), 2);
  EXPECT_EQ(kv().Rev(), 2);
  auto r = s_->Delete("b", "c");
  EXPECT_EQ(r.deleted(), 0);
  EXPECT_EQ(kv().Rev(), 2);
  EXPECT_TRUE(s_->last_events().empty());
}

TEST_F(KvStoreTest, DeleteLeavesATombstoneAndHistory) {
  s_->Put("k", "v1");                              // 2
  s_->Put("k", "v2");                              // 3
  auto d = s_->Delete("k", "", /*prev_kv=*/true);  // 4
  ASSERT_EQ(d.prev_kvs_size(), 1);
  EXPECT_EQ(d.prev_kvs(0).value(), "v2");
  EXPECT_EQ(d.prev_kvs(0).version(), 2);
  EXPECT_EQ(s_->Value("k"), "<none>");
  EXPECT_EQ(s_->Value("k", 3), "v2");
  EXPECT_EQ(s_->Value("k", 2), "v1");
  EXPECT_EQ(s_->Value("k", 4), "<none>");
  EXPECT_EQ(s_->Value("k", 1), "<none>");
  EXPECT_EQ(MustRange(RangeReq("k")).count(), 0);
  // The tombstone is stored as an empty value at the deleting revision.
  auto tomb = s_->engine().Get(storage::Column::kKeys, storage::MakeVersionedKey("k", 4));
  ASSERT_TRUE(tomb.ok());
  ASSERT_TRUE(tomb->has_value());
  EXPECT_EQ(**tomb, "");
}

TEST_F(KvStoreTest, RecreatedKeyStartsANewGeneration) {
  s_->Put("k", "v1");  // 2
  s_->Put("k", "v2");  // 3
  s_->Delete("k");     // 4
  s_->Put("k", "v3");  // 5
  auto r = MustRange(RangeReq("k"));
  ASSERT_EQ(r.kvs_size(), 1);
  EXPECT_EQ(r.kvs(0).create_revision(), 5);
  EXPECT_EQ(r.kvs(0).mod_revision(), 5);
  EXPECT_EQ(r.kvs(0).version(), 1);
}

TEST_F(KvStoreTest, EmptyValuesAreNotDeletions) {
  s_->Put("k", "");
  auto r = MustRange(RangeReq("k"));
  ASSERT_EQ(r.kvs_size(), 1);
  EXPECT_EQ(r.kvs(0).value(), "");
  EXPECT_EQ(r.count(), 1);
  auto d = s_->Delete("k");
  EXPECT_EQ(d.deleted(), 1);
}

TEST_F(KvStoreTest, BinaryKeysAndValues) {
  const std::string key("a\0\xff", 3), value("\0\x01\xfe", 3);
  s_->Put(key, value);
  s_->Put("a", "plain");
  EXPECT_EQ(s_->Value(key), value);
  EXPECT_EQ(s_->Keys("a", "b"), (Keys{"a", key}));
}

TEST_F(KvStoreTest, ManyVersionsOfOneKeyAtEveryRevision) {
  // More versions than RangeKeys steps over before seeking.
  for (int i = 0; i < 20; ++i) {
    s_->Put("k", "v" + std::to_string(i));
    s_->Put("k2", "w" + std::to_string(i));
  }
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(s_->Value("k", 2 + 2 * i), "v" + std::to_string(i));
    EXPECT_EQ(s_->Value("k2", 3 + 2 * i), "w" + std::to_string(i));
  }
  EXPECT_EQ(s_->Keys("k", "l"), (Keys{"k", "k2"}));
  EXPECT_EQ(s_->Keys("k", "l", 2), (Keys{"k"}));
}

// --- ranges -----------------------------------------------------------------------------------

class RangeTest : public KvStoreTest {
 protected:
  void SetUp() override {
    KvStoreTest::SetUp();
    for (const char* k : {"a", "ab", "abc", "b", "c", "d"}) s_->Put(k, std::string("v") + k);
  }
};

TEST_F(RangeTest, RangeEndConventions) {
  EXPECT_EQ(s_->Keys("ab"), (Keys{"ab"}));                                  // "" : single key
  EXPECT_EQ(s_->Keys("ab", "c"), (Keys{"ab", "abc", "b"}));                 // [key, end)
  EXPECT_EQ(s_->Keys("b", std::string(1, '\0')), (Keys{"b", "c", "d"}));    // "\0": from key
  EXPECT_EQ(s_->Keys("a", PrefixRangeEnd("a")), (Keys{"a", "ab", "abc"}));  // prefix
  EXPECT_EQ(s_->Keys(std::string(1, '\0'), std::string(1, '\0')),
            (Keys{"a", "ab", "abc", "b", "c", "d"}));  // everything
  EXPECT_EQ(s_->Keys("c", "b"), Keys{});               // end before key: empty
  EXPECT_EQ(s_->Keys("b", "b"), Keys{});
  EXPECT_EQ(s_->Keys("zz"), Keys{});
  EXPECT_EQ(s_->Keys("a", "a\x01"), (Keys{"a"}));
}

TEST_F(RangeTest, LimitKeepsTheTotalCount) {
  auto req = RangeReq("a", "z");
  req.set_limit(2);
  auto r = MustRange(req);
  EXPECT_EQ(KeysOf(r), (Keys{"a", "ab"}));
  EXPECT_EQ(r.count(), 6);
  EXPECT_TRUE(r.more());
  req.set_limit(6);
  r = MustRange(req);
  EXPECT_EQ(r.kvs_size(), 6);
  EXPECT_FALSE(r.more());
  req.set_limit(100);
  r = MustRange(req);
  EXPECT_EQ(r.kvs_size(), 6);
  EXPECT_FALSE(r.more());
  req.set_limit(-1);  // negative: no limit
  r = MustRange(req);
  EXPECT_EQ(r.kvs_size(), 6);
  EXPECT_FALSE(r.more());
  req.set_limit(INT64_MAX);  // no room for the extra "more" key: still everything
  r = MustRange(req);
  EXPECT_EQ(r.kvs_size(), 6);
  EXPECT_FALSE(r.more());
}

TEST_F(RangeTest, HistoricalReads) {
  s_->Put("a", "changed");  // rev 8
  s_->Delete("b");          // rev 9
  EXPECT_EQ(s_->Keys("a", "z", 3), (Keys{"a", "ab"}));
  EXPECT_EQ(s_->Value("a", 7), "va");
  EXPECT_EQ(s_->Value("a", 8), "changed");
  EXPECT_EQ(s_->Value("b", 8), "vb");
  EXPECT_EQ(s_->Value("b", 9), "<none>");
  auto r = MustRange(RangeReq("a", "z", 4));
  EXPECT_EQ(r.count(), 3);
  EXPECT_EQ(r.header().revision(), 9);  // the header carries the current revision
  auto all = MustRange(RangeReq("a", "z", 0));
  EXPECT_EQ(all.count(), 5);
  auto neg = MustRange(RangeReq("a", "z", -5));  // negative: current
  EXPECT_EQ(neg.count(), 5);
}

TEST_F(RangeTest, FutureRevisionError) {
  auto r = s_->Range(RangeReq("a", "", kv().Rev() + 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kOutOfRange);
  EXPECT_EQ(r.status().message(), "etcdserver: mvcc: required revision is a future revision");
  EXPECT_EQ(r.status(), errors::FutureRev());
  EXPECT_TRUE(s_->Range(RangeReq("a", "", kv().Rev())).ok());
}

TEST_F(RangeTest, CompactedRevisionError) {
  ASSERT_TRUE(s_->Compact(4).ok());
  auto r = s_->Range(RangeReq("a", "", 3));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kOutOfRange);
  EXPECT_EQ(r.status().message(), "etcdserver: mvcc: required revision has been compacted");
  auto at = s_->Range(RangeReq("a", "z", 4));  // the compaction revision itself is readable
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(KeysOf(*at), (Keys{"a", "ab", "abc"}));
}

TEST_F(RangeTest, KeysOnlyAndCountOnly) {
  auto req = RangeReq("a", "c");
  req.set_keys_only(true);
  auto r = MustRange(req);
  ASSERT_EQ(r.kvs_size(), 4);
  for (const auto& kv : r.kvs()) {
    EXPECT_EQ(kv.value(), "");
    EXPECT_GT(kv.mod_revision(), 0);
    EXPECT_EQ(kv.version(), 1);
  }
  EXPECT_EQ(r.count(), 4);

  auto c = RangeReq("a", "c");
  c.set_count_only(true);
  c.set_limit(1);
  r = MustRange(c);
  EXPECT_EQ(r.kvs_size(), 0);
  EXPECT_EQ(r.count(), 4);
  EXPECT_FALSE(r.more());
}

// A keys-only range decodes every stored field but the value (which it skips): what it answers
// is the full range's answer with the values cleared, at the current and at past revisions, and
// its count is exact whatever the limit.
TEST_F(RangeTest, KeysOnlyIsTheFullRangeWithoutValues) {
  s_->Put("ab", std::string(100000, 'x'));  // a big value, skipped
  s_->Put("abc", "");                       // an empty one
  s_->Delete("b");
  for (int64_t rev : {int64_t{0}, int64_t{7}, int64_t{8}}) {
    auto full_req = RangeReq("a", "z", rev);
    auto keys_req = full_req;
    keys_req.set_keys_only(true);
    auto full = MustRange(full_req);
    auto keys = MustRange(keys_req);
    ASSERT_EQ(keys.kvs_size(), full.kvs_size()) << rev;
    EXPECT_EQ(keys.count(), full.count());
    for (int i = 0; i < full.kvs_size(); ++i) {
      auto want = full.kvs(i);
      want.clear_value();
      EXPECT_EQ(keys.kvs(i).SerializeAsString(), want.SerializeAsString()) << want.key();
    }
    keys_req.set_limit(1);
    auto limited = MustRange(keys_req);
    EXPECT_EQ(limited.kvs_size(), 1);
    EXPECT_EQ(limited.count(), full.count()) << rev;
    EXPECT_TRUE(limited.more());
    keys_req.set_count_only(true);
    auto counted = MustRange(keys_req);
    EXPECT_EQ(counted.kvs_size(), 0);
    EXPECT_EQ(counted.count(), full.count()) << rev;
  }
}

TEST_F(KvStoreTest, SortOrdersAndTargets) {
  s_->Put("b", "3");  // 2
  s_->Put("a", "2");  // 3
  s_->Put("c", "1");  // 4
  s_->Put("a", "4");  // 5: a has version 2
  s_->Put("b", "0");  // 6: b has version 2
  s_->Put("b", "5");  // 7: b has version 3
  auto sorted = [&](RangeRequest::SortTarget t, RangeRequest::SortOrder o) {
    auto r = RangeReq("a", "z");
    r.set_sort_target(t);
    r.set_sort_order(o);
    return KeysOf(MustRange(r));
  };
  using R = RangeRequest;
  EXPECT_EQ(sorted(R::KEY, R::NONE), (Keys{"a", "b", "c"}));
  EXPECT_EQ(sorted(R::KEY, R::ASCEND), (Keys{"a", "b", "c"}));
  EXPECT_EQ(sorted(R::KEY, R::DESCEND), (Keys{"c", "b", "a"}));
  // a=4 b=5 c=1
  EXPECT_EQ(sorted(R::VALUE, R::ASCEND), (Keys{"c", "a", "b"}));
  EXPECT_EQ(sorted(R::VALUE, R::DESCEND), (Keys{"b", "a", "c"}));
  // A target other than KEY with order NONE sorts ascending.
  EXPECT_EQ(sorted(R::VALUE, R::NONE), (Keys{"c", "a", "b"}));
  // create: b=2 a=3 c=4
  EXPECT_EQ(sorted(R::CREATE, R::ASCEND), (Keys{"b", "a", "c"}));
  EXPECT_EQ(sorted(R::CREATE, R::DESCEND), (Keys{"c", "a", "b"}));
  // mod: c=4 a=5 b=7
  EXPECT_EQ(sorted(R::MOD, R::ASCEND), (Keys{"c", "a", "b"}));
  EXPECT_EQ(sorted(R::MOD, R::DESCEND), (Keys{"b", "a", "c"}));
  // version: c=1 a=2 b=3
  EXPECT_EQ(sorted(R::VERSION, R::ASCEND), (Keys{"c", "a", "b"}));
  EXPECT_EQ(sorted(R::VERSION, R::DESCEND), (Keys{"b", "a", "c"}));
}

TEST_F(KvStoreTest, EqualSortKeysKeepKeyOrder) {
  for (const char* k : {"a", "b", "c", "d"}) s_->Put(k, "same");
  auto r = RangeReq("a", "z");
  r.set_sort_target(RangeRequest::VALUE);
  r.set_sort_order(RangeRequest::ASCEND);
  EXPECT_EQ(KeysOf(MustRange(r)), (Keys{"a", "b", "c", "d"}));
  r.set_sort_target(RangeRequest::VERSION);
  r.set_sort_order(RangeRequest::DESCEND);
  EXPECT_EQ(KeysOf(MustRange(r)), (Keys{"a", "b", "c", "d"}));
}

TEST_F(KvStoreTest, ValuesSortAsUnsignedBytes) {
  s_->Put("hi", "\xff");
  s_->Put("lo", "\x01");
  auto r = RangeReq("a", "z");
  r.set_sort_target(RangeRequest::VALUE);
  r.set_sort_order(RangeRequest::ASCEND);
  EXPECT_EQ(KeysOf(MustRange(r)), (Keys{"lo", "hi"}));
}

TEST_F(KvStoreTest, SortByValueWithKeysOnly) {
  // etcd sorts first and drops the values afterwards.
  s_->Put("a", "3");
  s_->Put("b", "1");
  s_->Put("c", "2");
  auto r = RangeReq("a", "z");
  r.set_sort_target(RangeRequest::VALUE);
  r.set_sort_order(RangeRequest::ASCEND);
  r.set_keys_only(true);
  auto resp = MustRange(r);
  EXPECT_EQ(KeysOf(resp), (Keys{"b", "c", "a"}));
  for (const auto& kv : resp.kvs()) EXPECT_EQ(kv.value(), "");
}

TEST_F(KvStoreTest, SortThenLimit) {
  s_->Put("a", "3");
  s_->Put("b", "1");
  s_->Put("c", "2");
  auto r = RangeReq("a", "z");
  r.set_sort_target(RangeRequest::VALUE);
  r.set_sort_order(RangeRequest::DESCEND);
  r.set_limit(2);
  auto resp = MustRange(r);
  EXPECT_EQ(KeysOf(resp), (Keys{"a", "c"}));
  EXPECT_TRUE(resp.more());
  EXPECT_EQ(resp.count(), 3);
  r.set_sort_target(RangeRequest::KEY);
  resp = MustRange(r);
  EXPECT_EQ(KeysOf(resp), (Keys{"c", "b"}));
}

TEST_F(KvStoreTest, ModAndCreateRevisionFilters) {
  s_->Put("a", "1");  // 2
  s_->Put("b", "1");  // 3
  s_->Put("c", "1");  // 4
  s_->Put("a", "2");  // 5: a create 2 mod 5
  s_->Put("d", "1");  // 6
  auto q = [&](int64_t min_mod, int64_t max_mod, int64_t min_create, int64_t max_create) {
    auto r = RangeReq("a", "z");
    r.set_min_mod_revision(min_mod);
    r.set_max_mod_revision(max_mod);
    r.set_min_create_revision(min_create);
    r.set_max_create_revision(max_create);
    return MustRange(r);
  };
  EXPECT_EQ(KeysOf(q(4, 0, 0, 0)), (Keys{"a", "c", "d"}));
  EXPECT_EQ(KeysOf(q(0, 4, 0, 0)), (Keys{"b", "c"}));
  EXPECT_EQ(KeysOf(q(3, 5, 0, 0)), (Keys{"a", "b", "c"}));
  EXPECT_EQ(KeysOf(q(0, 0, 3, 0)), (Keys{"b", "c", "d"}));
  EXPECT_EQ(KeysOf(q(0, 0, 0, 3)), (Keys{"a", "b"}));
  EXPECT_EQ(KeysOf(q(5, 0, 0, 2)), (Keys{"a"}));
  // count is the number of keys in the range, before filtering.
  EXPECT_EQ(q(5, 0, 0, 2).count(), 4);
}

TEST_F(KvStoreTest, FiltersApplyBeforeTheLimit) {
  for (const char* k : {"a", "b", "c", "d"}) s_->Put(k, "v");  // revs 2..5
  auto r = RangeReq("a", "z");
  r.set_min_mod_revision(4);
  r.set_limit(1);
  auto resp = MustRange(r);
  EXPECT_EQ(KeysOf(resp), (Keys{"c"}));
  EXPECT_TRUE(resp.more());
  r.set_limit(2);
  resp = MustRange(r);
  EXPECT_EQ(KeysOf(resp), (Keys{"c", "d"}));
  EXPECT_FALSE(resp.more());
}

TEST_F(KvStoreTest, RangeRequestChecks) {
  EXPECT_EQ(CheckRangeRequest(RangeReq("")), errors::EmptyKey());
  EXPECT_TRUE(CheckRangeRequest(RangeReq("a")).ok());
  EXPECT_EQ(CheckDeleteRequest(testutil::DeleteReq("")), errors::EmptyKey());
  EXPECT_TRUE(CheckDeleteRequest(testutil::DeleteReq("a", "b")).ok());
}

// --- delete ranges ----------------------------------------------------------------------------

TEST_F(RangeTest, DeleteRangeConventionsInOneRevision) {
  const int64_t before = kv().Rev();
  auto d = s_->Delete("a", PrefixRangeEnd("a"), /*prev_kv=*/true);
  EXPECT_EQ(d.deleted(), 3);
  ASSERT_EQ(d.prev_kvs_size(), 3);
  EXPECT_EQ(d.prev_kvs(2).key(), "abc");
  EXPECT_EQ(d.prev_kvs(2).value(), "vabc");
  EXPECT_EQ(kv().Rev(), before + 1);
  ASSERT_EQ(s_->last_events().size(), 1u);
  const auto& evs = s_->last_events()[0];
  EXPECT_EQ(evs.rev, before + 1);
  ASSERT_EQ(evs.events.size(), 3u);
  for (const auto& ev : evs.events) {
    EXPECT_EQ(ev.type(), mvccpb::Event::DELETE);
    EXPECT_EQ(ev.kv().mod_revision(), before + 1);
    EXPECT_EQ(ev.kv().value(), "");
    EXPECT_EQ(ev.kv().create_revision(), 0);
    EXPECT_EQ(ev.prev_kv().key(), ev.kv().key());
  }
  EXPECT_EQ(s_->Keys(std::string(1, '\0'), std::string(1, '\0')), (Keys{"b", "c", "d"}));

  auto from = s_->Delete("c", std::string(1, '\0'));
  EXPECT_EQ(from.deleted(), 2);
  EXPECT_EQ(from.prev_kvs_size(), 0);  // not requested
  EXPECT_EQ(s_->Keys(std::string(1, '\0'), std::string(1, '\0')), (Keys{"b"}));
  auto all = s_->Delete(std::string(1, '\0'), std::string(1, '\0'));
  EXPECT_EQ(all.deleted(), 1);
  EXPECT_EQ(MustRange(RangeReq(std::string(1, '\0'), std::string(1, '\0'))).count(), 0);
}

// --- puts -------------------------------------------------------------------------------------

TEST_F(KvStoreTest, PutPrevKv) {
  auto req = PutReq("k", "v1");
  req.set_prev_kv(true);
  auto first = s_->TryPut(req);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->has_prev_kv());  // nothing before
  req.set_value("v2");
  auto second = s_->TryPut(req);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->has_prev_kv());
  EXPECT_EQ(second->prev_kv().value(), "v1");
  EXPECT_EQ(second->prev_kv().mod_revision(), 2);
  EXPECT_EQ(second->prev_kv().version(), 1);
  EXPECT_EQ(second->header().revision(), 3);
  auto no_prev = s_->TryPut(PutReq("k", "v3"));
  ASSERT_TRUE(no_prev.ok());
  EXPECT_FALSE(no_prev->has_prev_kv());
}

TEST_F(KvStoreTest, PutIgnoreValueKeepsTheValue) {
  ASSERT_TRUE(s_->Grant(7, 60).ok());
  s_->Put("k", "keep");
  auto req = PutReq("k", "", 7);
  req.set_ignore_value(true);
  ASSERT_TRUE(CheckPutRequest(req).ok());
  auto r = s_->TryPut(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto got = MustRange(RangeReq("k"));
  ASSERT_EQ(got.kvs_size(), 1);
  EXPECT_EQ(got.kvs(0).value(), "keep");
  EXPECT_EQ(got.kvs(0).lease(), 7);
  EXPECT_EQ(got.kvs(0).version(), 2);
}

TEST_F(KvStoreTest, PutIgnoreLeaseKeepsTheLease) {
  ASSERT_TRUE(s_->Grant(7, 60).ok());
  s_->Put("k", "v1", 7);
  auto req = PutReq("k", "v2");
  req.set_ignore_lease(true);
  ASSERT_TRUE(CheckPutRequest(req).ok());
  ASSERT_TRUE(s_->TryPut(req).ok());
  auto got = MustRange(RangeReq("k"));
  ASSERT_EQ(got.kvs_size(), 1);
  EXPECT_EQ(got.kvs(0).value(), "v2");
  EXPECT_EQ(got.kvs(0).lease(), 7);
  auto keys = LeaseTable::AttachedKeys(s_->engine(), 7);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, Keys{"k"});
}

TEST_F(KvStoreTest, IgnoreFlagsNeedAnExistingKey) {
  auto iv = PutReq("missing", "");
  iv.set_ignore_value(true);
  auto r = s_->TryPut(iv);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), errors::KeyNotFound());
  EXPECT_EQ(r.status().message(), "etcdserver: key not found");
  auto il = PutReq("missing", "v");
  il.set_ignore_lease(true);
  EXPECT_EQ(s_->TryPut(il).status(), errors::KeyNotFound());
  // A deleted key is missing too.
  s_->Put("gone", "v");
  s_->Delete("gone");
  iv.set_key("gone");
  EXPECT_EQ(s_->TryPut(iv).status(), errors::KeyNotFound());
  EXPECT_EQ(kv().Rev(), 3);  // the failures changed nothing
}

TEST_F(KvStoreTest, PutRequestChecks) {
  EXPECT_EQ(CheckPutRequest(PutReq("", "v")), errors::EmptyKey());
  auto iv = PutReq("k", "v");
  iv.set_ignore_value(true);
  EXPECT_EQ(CheckPutRequest(iv), errors::ValueProvided());
  EXPECT_EQ(CheckPutRequest(iv).message(), "etcdserver: value is provided");
  auto il = PutReq("k", "v", 5);
  il.set_ignore_lease(true);
  EXPECT_EQ(CheckPutRequest(il), errors::LeaseProvided());
  EXPECT_EQ(CheckPutRequest(il).message(), "etcdserver: lease is provided");
  EXPECT_TRUE(CheckPutRequest(PutReq("k", "v", 5)).ok());
}

TEST_F(KvStoreTest, PutWithUnknownLeaseFails) {
  auto r = s_->TryPut(PutReq("k", "v", 99));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), errors::LeaseNotFound());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(kv().Rev(), 1);
  EXPECT_EQ(s_->Value("k"), "<none>");
}

TEST_F(KvStoreTest, PutEventsNameThePreviousVersionWithoutReadingIt) {
  s_->Put("k", "v1");  // 2
  ASSERT_EQ(s_->last_events().size(), 1u);
  const RevisionEvents first = s_->last_events()[0];
  ASSERT_EQ(first.events.size(), 1u);
  EXPECT_EQ(first.events[0].type(), mvccpb::Event::PUT);
  EXPECT_EQ(first.events[0].kv().value(), "v1");
  EXPECT_FALSE(first.events[0].has_prev_kv());
  EXPECT_EQ(first.unread_prev_rev(0), 0);  // the key was created
  auto none = ReplacedVersion(kv(), first, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  s_->Put("k", "v2");  // 3
  const RevisionEvents second = s_->last_events()[0];
  ASSERT_EQ(second.events.size(), 1u);
  EXPECT_EQ(second.events[0].kv().version(), 2);
  EXPECT_FALSE(second.events[0].has_prev_kv()) << "not read: nobody asked for it";
  EXPECT_EQ(second.unread_prev_rev(0), 2);
  auto prev = ReplacedVersion(kv(), second, 0);
  ASSERT_TRUE(prev.ok()) << prev.status().ToString();
  ASSERT_TRUE(prev->has_value());
  EXPECT_EQ((*prev)->value(), "v1");
  EXPECT_EQ((*prev)->mod_revision(), 2);
  EXPECT_EQ((*prev)->version(), 1);

  // A put that asked for prev_kv read it: its event carries it.
  auto req = PutReq("k", "v3");
  req.set_prev_kv(true);
  ASSERT_TRUE(s_->TryPut(req).ok());
  const RevisionEvents third = s_->last_events()[0];
  ASSERT_TRUE(third.events[0].has_prev_kv());
  EXPECT_EQ(third.events[0].prev_kv().value(), "v2");
  EXPECT_EQ(third.unread_prev_rev(0), 0);

  // Deletions always carry what they deleted.
  s_->Delete("k", "");
  const RevisionEvents del = s_->last_events()[0];
  ASSERT_TRUE(del.events[0].has_prev_kv());
  EXPECT_EQ(del.events[0].prev_kv().value(), "v3");
  EXPECT_EQ(del.unread_prev_rev(0), 0);
}

TEST_F(KvStoreTest, PutsInOneBatchNameTheVersionTheyReplaceWithinIt) {
  s_->Put("k", "v1");  // 2
  s_->Apply([&](WriteTxn& t) {
    EXPECT_TRUE(ExecutePut(t, PutReq("k", "v2")).ok());  // 3
    EXPECT_TRUE(ExecutePut(t, PutReq("j", "new")).ok());
    return 0;
  });
  const RevisionEvents rc = s_->last_events()[0];
  ASSERT_EQ(rc.events.size(), 2u);
  EXPECT_EQ(rc.unread_prev_rev(0), 2);
  EXPECT_EQ(rc.unread_prev_rev(1), 0);
  auto batch = kv().BeginApply();
  auto t1 = batch->Begin();
  ASSERT_TRUE(ExecutePut(*t1, PutReq("k", "v3")).ok());  // 4
  batch->End(std::move(t1));
  auto t2 = batch->Begin();
  ASSERT_TRUE(ExecutePut(*t2, PutReq("k", "v4")).ok());  // 5: replaces 4, not yet committed
  batch->End(std::move(t2));
  ASSERT_TRUE(kv().Commit(*batch, s_->last_index() + 1).ok());
  ASSERT_EQ(batch->changes().size(), 2u);
  EXPECT_EQ(batch->changes()[0].unread_prev_rev(0), 3);
  EXPECT_EQ(batch->changes()[1].unread_prev_rev(0), 4);
  auto prev = ReplacedVersion(kv(), batch->changes()[1], 0);
  ASSERT_TRUE(prev.ok() && prev->has_value());
  EXPECT_EQ((*prev)->value(), "v3");
}

TEST_F(KvStoreTest, AReplacedVersionMissingFromTheStoreIsDataLoss) {
  s_->Put("k", "v1");  // 2
  s_->Put("k", "v2");  // 3
  const RevisionEvents rc = s_->last_events()[0];
  storage::Batch b(s_->engine());
  b.Delete(storage::Column::kKeys, storage::MakeVersionedKey("k", 2));
  ASSERT_TRUE(s_->engine().Write(b, false).ok());
  auto prev = ReplacedVersion(kv(), rc, 0);
  ASSERT_FALSE(prev.ok());
  EXPECT_EQ(prev.status().code(), Code::kDataLoss);
  EXPECT_NE(prev.status().message().find("revision 2"), std::string::npos)
      << prev.status().ToString();
}

// --- leases -----------------------------------------------------------------------------------

TEST_F(KvStoreTest, LeaseGrantRules) {
  const int64_t rev = kv().Rev();
  EXPECT_TRUE(s_->Grant(1, 10).ok());
  EXPECT_EQ(kv().Rev(), rev);  // granting a lease is not a key change
  EXPECT_EQ(s_->Grant(1, 10), errors::LeaseExist());
  EXPECT_EQ(s_->Grant(0, 10), errors::LeaseNotFound());
  EXPECT_EQ(s_->Grant(2, kMaxLeaseTtl + 1), errors::LeaseTTLTooLarge());
  EXPECT_TRUE(s_->Grant(3, kMaxLeaseTtl).ok());
  // The TTL is raised to the minimum.
  etcdserverpb::LeaseGrantRequest g;
  g.set_id(4);
  g.set_ttl(1);
  auto resp = s_->Apply([&](WriteTxn& t) { return ExecuteLeaseGrant(t, g, 5); });
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(resp->id(), 4);
  EXPECT_EQ(resp->ttl(), 5);
  EXPECT_EQ(kv().leases().Get(4)->ttl, 5);
  EXPECT_EQ(kv().leases().Size(), 3u);
  auto list = kv().leases().List();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].id, 1);
  EXPECT_EQ(list[2].id, 4);
  EXPECT_FALSE(kv().leases().Exists(2));
}

TEST_F(KvStoreTest, LeaseAttachAndDetach) {
  ASSERT_TRUE(s_->Grant(1, 10).ok());
  ASSERT_TRUE(s_->Grant(2, 10).ok());
  auto attached = [&](int64_t id) {
    auto k = LeaseTable::AttachedKeys(s_->engine(), id);
    EXPECT_TRUE(k.ok());
    return k.ok() ? k.value() : Keys{"error"};
  };
  s_->Put("b", "v", 1);
  s_->Put("a", "v", 1);
  s_->Put("c", "v", 2);
  EXPECT_EQ(attached(1), (Keys{"a", "b"}));
  EXPECT_EQ(attached(2), (Keys{"c"}));
  EXPECT_EQ(MustRange(RangeReq("a")).kvs(0).lease(), 1);
  s_->Put("a", "v2", 2);  // moves to lease 2
  EXPECT_EQ(attached(1), (Keys{"b"}));
  EXPECT_EQ(attached(2), (Keys{"a", "c"}));
  s_->Put("b", "v2");  // a put without a lease detaches
  EXPECT_EQ(attached(1), Keys{});
  EXPECT_EQ(MustRange(RangeReq("b")).kvs(0).lease(), 0);
  s_->Delete("c");  // a deletion detaches
  EXPECT_EQ(attached(2), (Keys{"a"}));
}

TEST_F(KvStoreTest, RevokeDeletesAttachedKeysInOneRevision) {
  ASSERT_TRUE(s_->Grant(1, 10).ok());
  s_->Put("x", "v", 1);
  s_->Put("a", "v", 1);
  s_->Put("m", "v", 1);
  s_->Put("keep", "v");
  const int64_t before = kv().Rev();
  auto r = s_->Revoke(1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->header().revision(), before + 1);
  EXPECT_EQ(kv().Rev(), before + 1);
  EXPECT_FALSE(kv().leases().Exists(1));
  EXPECT_EQ(s_->Keys(std::string(1, '\0'), std::string(1, '\0')), (Keys{"keep"}));
  ASSERT_EQ(s_->last_events().size(), 1u);
  const auto& evs = s_->last_events()[0].events;
  ASSERT_EQ(evs.size(), 3u);
  // Deleted in key order, so every member deletes identically.
  EXPECT_EQ(evs[0].kv().key(), "a");
  EXPECT_EQ(evs[1].kv().key(), "m");
  EXPECT_EQ(evs[2].kv().key(), "x");
  for (const auto& ev : evs) EXPECT_EQ(ev.type(), mvccpb::Event::DELETE);
  auto keys = LeaseTable::AttachedKeys(s_->engine(), 1);
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->empty());
  EXPECT_EQ(s_->Revoke(1).status(), errors::LeaseNotFound());
}

TEST_F(KvStoreTest, RevokingALeaseWithoutKeysKeepsTheRevision) {
  ASSERT_TRUE(s_->Grant(1, 10).ok());
  s_->Put("a", "v");
  auto r = s_->Revoke(1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(kv().Rev(), 2);
  EXPECT_EQ(r->header().revision(), 2);
}

TEST_F(KvStoreTest, RevokeSkipsKeysDetachedEarlierInTheSameBatch) {
  ASSERT_TRUE(s_->Grant(1, 10).ok());
  s_->Put("a", "v", 1);
  s_->Put("b", "v", 1);
  // One apply batch: detach "a" by overwriting it, then revoke.
  auto batch = kv().BeginApply();
  auto t1 = batch->Begin();
  ASSERT_TRUE(ExecutePut(*t1, PutReq("a", "free")).ok());
  batch->End(std::move(t1));
  auto t2 = batch->Begin();
  etcdserverpb::LeaseRevokeRequest rr;
  rr.set_id(1);
  ASSERT_TRUE(ExecuteLeaseRevoke(*t2, rr).ok());
  batch->End(std::move(t2));
  ASSERT_TRUE(kv().Commit(*batch, 100).ok());
  EXPECT_EQ(s_->Value("a"), "free");
  EXPECT_EQ(s_->Value("b"), "<none>");
  EXPECT_EQ(kv().Rev(), 5);
}

TEST_F(KvStoreTest, LeaseCheckpointIsRecorded) {
  ASSERT_TRUE(s_->Grant(1, 100).ok());
  auto batch = kv().BeginApply();
  auto txn = batch->Begin();
  txn->mutable_leases().StageCheckpoint(batch->batch(), 1, 42);
  txn->mutable_leases().StageCheckpoint(batch->batch(), 999, 1);  // unknown: ignored
  batch->End(std::move(txn));
  ASSERT_TRUE(kv().Commit(*batch, 50).ok());
  EXPECT_EQ(kv().leases().Get(1)->remaining_ttl, 42);
  EXPECT_FALSE(kv().leases().Exists(999));
  LeaseTable reloaded;
  ASSERT_TRUE(reloaded.Load(s_->engine()).ok());
  ASSERT_TRUE(reloaded.Get(1).has_value());
  EXPECT_EQ(reloaded.Get(1)->ttl, 100);
  EXPECT_EQ(reloaded.Get(1)->remaining_ttl, 42);
  EXPECT_EQ(reloaded.Size(), 1u);
}

TEST(LeaseTableTest, AttachmentKeysOfNeighbouringIdsDoNotMix) {
  storage::EngineOptions o;
  o.in_memory = true;
  auto e = storage::Engine::Open("/mem/lease", o);
  ASSERT_TRUE(e.ok());
  storage::Batch b(**e);
  LeaseTable::StageAttach(b, 1, "one");
  LeaseTable::StageAttach(b, 2, "two");
  LeaseTable::StageAttach(b, -1, "max");  // id bits all ones
  LeaseTable::StageAttach(b, 256, "x");
  ASSERT_TRUE((*e)->Write(b, false).ok());
  EXPECT_EQ(*LeaseTable::AttachedKeys(**e, 1), Keys{"one"});
  EXPECT_EQ(*LeaseTable::AttachedKeys(**e, 2), Keys{"two"});
  EXPECT_EQ(*LeaseTable::AttachedKeys(**e, -1), Keys{"max"});
  EXPECT_EQ(*LeaseTable::AttachedKeys(**e, 256), Keys{"x"});
  EXPECT_TRUE(LeaseTable::AttachedKeys(**e, 3)->empty());
  // Through a batch: pending attachments and detachments count.
  storage::Batch pending(**e);
  LeaseTable::StageDetach(pending, 1, "one");
  LeaseTable::StageAttach(pending, 1, "uno");
  EXPECT_EQ(*LeaseTable::AttachedKeys(**e, 1, &pending), Keys{"uno"});
  EXPECT_EQ(*LeaseTable::AttachedKeys(**e, 1), Keys{"one"});
}

// --- batches, views and persistence -----------------------------------------------------------

TEST_F(KvStoreTest, TransactionsInOneBatchGetSuccessiveRevisions) {
  s_->Put("a", "0");
  auto batch = kv().BeginApply();
  EXPECT_EQ(batch->pending_rev(), 2);
  auto t1 = batch->Begin();
  EXPECT_EQ(t1->Rev(), 2);
  ASSERT_TRUE(ExecutePut(*t1, PutReq("a", "1")).ok());
  EXPECT_EQ(t1->Rev(), 3);  // reads in a changed txn see its revision
  batch->End(std::move(t1));
  EXPECT_EQ(batch->pending_rev(), 3);

  auto noop = batch->Begin();
  ASSERT_TRUE(ExecuteRange(*noop, RangeReq("a")).ok());
  batch->End(std::move(noop));
  EXPECT_EQ(batch->pending_rev(), 3);  // nothing changed: no revision used

  auto t2 = batch->Begin();
  EXPECT_EQ(t2->begin_rev(), 3);
  auto prev = t2->Get("a");  // sees the earlier txn of the batch
  ASSERT_TRUE(prev.ok());
  ASSERT_TRUE(prev->has_value());
  EXPECT_EQ((*prev)->value(), "1");
  EXPECT_EQ((*prev)->version(), 2);
  ASSERT_TRUE(ExecutePut(*t2, PutReq("a", "2")).ok());
  ASSERT_TRUE(ExecutePut(*t2, PutReq("b", "2")).ok());
  batch->End(std::move(t2));

  // Not visible to readers before Commit.
  EXPECT_EQ(kv().Rev(), 2);
  EXPECT_EQ(s_->Value("a"), "0");
  auto before = kv().NewReadView();

  ASSERT_TRUE(kv().Commit(*batch, 77).ok());
  EXPECT_EQ(kv().Rev(), 4);
  EXPECT_EQ(kv().ConsistentIndex(), 77u);
  EXPECT_EQ(s_->Value("a"), "2");
  EXPECT_EQ(s_->Value("a", 3), "1");
  auto r = MustRange(RangeReq("a"));
  EXPECT_EQ(r.kvs(0).version(), 3);

  // The older view still answers at its revision.
  EXPECT_EQ(before->Rev(), 2);
  auto old = ExecuteRange(*before, RangeReq("a", "z"));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(KeysOf(*old), Keys{"a"});
  EXPECT_EQ(old->kvs(0).value(), "0");
  EXPECT_FALSE(ExecuteRange(*before, RangeReq("a", "", 3)).ok());  // future for that view

  ASSERT_EQ(batch->changes().size(), 2u);
  EXPECT_EQ(batch->changes()[0].rev, 3);
  EXPECT_EQ(batch->changes()[1].rev, 4);
  ASSERT_EQ(batch->changes()[1].events.size(), 2u);
  EXPECT_EQ(batch->changes()[1].events[1].kv().key(), "b");
}

TEST_F(KvStoreTest, ReadsThroughABatchWithManyPendingVersions) {
  // Pending versions in the batch and committed ones interleave in one iterator.
  for (int i = 0; i < 6; ++i) {
    for (const char* k : {"k1", "k2", "k3"}) s_->Put(k, "old" + std::to_string(i));
  }
  auto batch = kv().BeginApply();
  for (int i = 0; i < 6; ++i) {
    auto t = batch->Begin();
    for (const char* k : {"k1", "k2", "k3"}) {
      ASSERT_TRUE(ExecutePut(*t, PutReq(k, "new" + std::to_string(i))).ok());
    }
    batch->End(std::move(t));
  }
  auto t = batch->Begin();
  auto r = ExecuteRange(*t, RangeReq("k", "l", t->Rev() - 3));  // three batch txns back
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->kvs_size(), 3);
  EXPECT_EQ(r->kvs(2).value(), "new2");
  auto old = ExecuteRange(*t, RangeReq("k", "l", 19));  // before the batch
  ASSERT_TRUE(old.ok());
  ASSERT_EQ(old->kvs_size(), 3);
  EXPECT_EQ(old->kvs(0).value(), "old5");
  std::vector<mvccpb::KeyValue> deleted;
  auto n = t->DeleteRange(KeyRange::FromRequest("k", "l"), &deleted);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3);
  ASSERT_EQ(deleted.size(), 3u);
  EXPECT_EQ(deleted[1].key(), "k2");
  EXPECT_EQ(deleted[1].value(), "new5");
  EXPECT_EQ(deleted[1].version(), 12);
  batch->End(std::move(t));
  ASSERT_TRUE(kv().Commit(*batch, 500).ok());
  EXPECT_EQ(kv().Rev(), 26);
  EXPECT_EQ(s_->Keys("k", "l"), Keys{});
  EXPECT_EQ(s_->Value("k3", 25), "new5");
}

TEST_F(KvStoreTest, ReadViewsAreStableWhileWritesContinue) {
  s_->Put("a", "1");
  auto view = kv().NewReadView();
  for (int i = 0; i < 10; ++i) s_->Put("a", std::to_string(i + 2));
  s_->Delete("a");
  auto r = ExecuteRange(*view, RangeReq("a"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->kvs_size(), 1);
  EXPECT_EQ(r->kvs(0).value(), "1");
  EXPECT_EQ(r->header().revision(), 2);
}

TEST_F(KvStoreTest, CommitWithoutChangesStillRecordsTheIndex) {
  auto batch = kv().BeginApply();
  ASSERT_TRUE(kv().Commit(*batch, 9).ok());
  EXPECT_EQ(kv().Rev(), 1);
  EXPECT_EQ(kv().ConsistentIndex(), 9u);
}

TEST_F(KvStoreTest, ConcurrentReadersSeeWholeTransactions) {
  // Writers update "a" and "b" together; a view at any revision must see them equal and
  // carrying that revision's data, whatever commits run meanwhile. Writing goes on past
  // kWrites until the readers have checked kChecks views, as on a loaded machine the readers
  // may not be scheduled before a fixed number of fast in-memory commits is done.
  constexpr int kWrites = 300;
  constexpr int kChecks = 100;
  constexpr int kMaxWrites = 200000;
  std::atomic<bool> done{false};
  std::atomic<int> checked{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!done.load()) {
        auto view = kv().NewReadView();
        auto r = ExecuteRange(*view, RangeReq("a", "c"));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        if (view->Rev() == 1) {
          EXPECT_EQ(r->count(), 0);
          continue;
        }
        ASSERT_EQ(r->kvs_size(), 2) << "at revision " << view->Rev();
        EXPECT_EQ(r->kvs(0).value(), r->kvs(1).value());
        EXPECT_EQ(r->kvs(0).mod_revision(), view->Rev());
        EXPECT_EQ(r->kvs(0).value(), std::to_string(view->Rev()));
        checked.fetch_add(1);
      }
    });
  }
  int writes = 0;
  for (; writes < kMaxWrites && (writes < kWrites || checked.load() < kChecks); ++writes) {
    const std::string v = std::to_string(kv().Rev() + 1);
    etcdserverpb::TxnRequest t;
    *t.add_success() = testutil::OpPut("a", v);
    *t.add_success() = testutil::OpPut("b", v);
    ASSERT_TRUE(s_->Txn(t).ok());
  }
  done = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(kv().Rev(), 1 + writes);
  EXPECT_GE(checked.load(), kChecks);
}

TEST(KvStoreReopenTest, RevisionIndexLeasesAndDataSurviveReopen) {
  testutil::TempDir dir;
  auto s = Store::OnDisk(dir.path() + "/db");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Grant(5, 30).ok());
  s->Put("a", "1", 5);
  s->Put("b", "1");
  s->Put("a", "2", 5);
  s->Delete("b");
  ASSERT_TRUE(s->Compact(3).ok());
  const int64_t rev = s->kv().Rev();
  const uint64_t index = s->kv().ConsistentIndex();
  s->Reopen();
  EXPECT_EQ(s->kv().Rev(), rev);
  EXPECT_EQ(s->kv().ConsistentIndex(), index);
  EXPECT_EQ(s->kv().CompactRev(), 3);
  EXPECT_EQ(s->kv().ScheduledCompactRev(), 3);
  EXPECT_EQ(s->kv().FinishedCompactRev(), -1);
  ASSERT_TRUE(s->kv().leases().Exists(5));
  EXPECT_EQ(s->kv().leases().Get(5)->ttl, 30);
  EXPECT_EQ(s->Value("a"), "2");
  EXPECT_EQ(s->Value("a", 3), "1");
  EXPECT_EQ(s->Value("b"), "<none>");
  EXPECT_EQ(s->Value("a", 2), "error: etcdserver: mvcc: required revision has been compacted");
  // Writing continues from the stored revision.
  auto p = s->Put("c", "1");
  EXPECT_EQ(p.header().revision(), rev + 1);
  auto r = s->Revoke(5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(s->Value("a"), "<none>");
}

TEST(KvStoreReopenTest, CorruptMetaIsDataLoss) {
  storage::EngineOptions o;
  o.in_memory = true;
  auto e = storage::Engine::Open("/mem/corrupt", o);
  ASSERT_TRUE(e.ok());
  storage::Batch b(**e);
  b.Put(storage::Column::kMeta, storage::meta::kCurrentRev.key, "123");
  ASSERT_TRUE((*e)->Write(b, false).ok());
  auto kv = KvStore::Open(**e);
  ASSERT_FALSE(kv.ok());
  EXPECT_EQ(kv.status().code(), Code::kDataLoss);

  storage::Batch c(**e);
  c.Put(storage::Column::kMeta, storage::meta::kCurrentRev.key, storage::EncodeFixed64BE(0));
  ASSERT_TRUE((*e)->Write(c, false).ok());
  EXPECT_EQ(KvStore::Open(**e).status().code(), Code::kDataLoss);

  storage::Batch d(**e);
  d.Put(storage::Column::kMeta, storage::meta::kCurrentRev.key, storage::EncodeFixed64BE(5));
  d.Put(storage::Column::kMeta, storage::meta::kScheduledCompactRev.key,
        storage::EncodeFixed64BE(3));
  d.Put(storage::Column::kMeta, storage::meta::kFinishedCompactRev.key,
        storage::EncodeFixed64BE(4));
  ASSERT_TRUE((*e)->Write(d, false).ok());
  auto bad = KvStore::Open(**e);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kDataLoss);
  EXPECT_EQ(bad.status().message(),
            "store compaction records are inconsistent (current 5, scheduled 3, finished 4)");
}

// --- key ranges and revision keys --------------------------------------------------------------

TEST(KeyRangeTest, FromRequest) {
  auto single = KeyRange::FromRequest("k", "");
  EXPECT_EQ(single.kind, KeyRange::Kind::kSingle);
  EXPECT_TRUE(single.Contains("k"));
  EXPECT_FALSE(single.Contains(std::string("k\0", 2)));
  EXPECT_FALSE(single.IsEmpty());
  auto from = KeyRange::FromRequest("k", std::string(1, '\0'));
  EXPECT_EQ(from.kind, KeyRange::Kind::kFromKey);
  EXPECT_TRUE(from.Contains("k"));
  EXPECT_TRUE(from.Contains("\xff"));
  EXPECT_FALSE(from.Contains("j"));
  auto range = KeyRange::FromRequest("b", "d");
  EXPECT_EQ(range.kind, KeyRange::Kind::kRange);
  EXPECT_TRUE(range.Contains("b"));
  EXPECT_TRUE(range.Contains("c\xff"));
  EXPECT_FALSE(range.Contains("d"));
  EXPECT_FALSE(range.Contains("a"));
  EXPECT_TRUE(KeyRange::FromRequest("d", "b").IsEmpty());
  EXPECT_TRUE(KeyRange::FromRequest("b", "b").IsEmpty());
  // "\0\0" is an ordinary end, not "from key".
  EXPECT_EQ(KeyRange::FromRequest("", std::string(2, '\0')).kind, KeyRange::Kind::kRange);
  // Bytes compare unsigned.
  EXPECT_TRUE(KeyRange::FromRequest("a", "\xff").Contains("\x80"));
}

TEST(KeyRangeTest, PrefixRangeEnd) {
  EXPECT_EQ(PrefixRangeEnd("a"), "b");
  EXPECT_EQ(PrefixRangeEnd("abc"), "abd");
  EXPECT_EQ(PrefixRangeEnd("a\xff"), "b");
  EXPECT_EQ(PrefixRangeEnd("a\xff\xff"), "b");
  EXPECT_EQ(PrefixRangeEnd("\x7f"), "\x80");
  EXPECT_EQ(PrefixRangeEnd("\xff"), std::string(1, '\0'));
  EXPECT_EQ(PrefixRangeEnd("\xff\xff"), std::string(1, '\0'));
  EXPECT_EQ(PrefixRangeEnd(""), std::string(1, '\0'));
}

TEST(RevisionTest, KeysSortInRevisionOrder) {
  std::string a = EncodeRevisionKey({1, 5}), b = EncodeRevisionKey({2, 0}),
              c = EncodeRevisionKey({256, 0}), d = EncodeRevisionKey({256, 1});
  EXPECT_EQ(a.size(), 16u);
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
  EXPECT_EQ(DecodeRevisionKey(d), (Revision{256, 1}));
  EXPECT_EQ(RevisionLowerBound(256), c);
  EXPECT_LT(Revision({1, 9}), Revision({2, 0}));
}

}  // namespace
}  // namespace etcdw::mvcc
