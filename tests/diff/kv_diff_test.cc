// Differential tests of KV: Range, Put, DeleteRange, Compact.
#include "diff_fixture.h"

namespace etcdw::testing {
namespace {

using etcdserverpb::RangeRequest;

TEST_F(DiffTest, PutThenGetMatchesEtcd) {
  StartBoth();
  Put("a", "1");
  Put("b", "2");
  Put("a", "3", 0, /*prev_kv=*/true);
  Get("a");
  Get("a", "", 2);  // historical
  Get("a", "c");
  Get("missing");
}

TEST_F(DiffTest, EmptyKeyIsRejectedLikeEtcd) {
  StartBoth();
  Outcome o = Put("", "x");
  EXPECT_EQ(o.code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(o.message, "etcdserver: key is not provided");
  Get("");
  Delete("");
  RangeRequest r;
  r.set_range_end("z");
  Range(r);
}

TEST_F(DiffTest, FutureAndCompactedRevisionsMatchEtcd) {
  StartBoth();
  for (int i = 0; i < 5; ++i) Put("k", std::to_string(i));
  Outcome f = Get("k", "", 100);
  EXPECT_EQ(f.message, "etcdserver: mvcc: required revision is a future revision");
  Get("k", "", 7);  // current + 1
  Get("k", "", 6);  // current
  Compact(4);
  Outcome c = Get("k", "", 3);
  EXPECT_EQ(c.message, "etcdserver: mvcc: required revision has been compacted");
  EXPECT_EQ(c.code, grpc::StatusCode::OUT_OF_RANGE);
  Get("k", "", 4);   // the compaction revision itself is still readable
  Get("k", "", -1);  // negative: current
  Compact(4);
  Compact(2);
  Compact(100);
}

TEST_F(DiffTest, RangeEndConventionsMatchEtcd) {
  StartBoth();
  for (const char* k : {"a", "ab", "abc", "abd", "b", "ba", "c", "z\xff", "z\xff\xff", "\xff"}) {
    Put(k, std::string("v-") + k);
  }
  Get("a");           // single key
  Get("ab");          // single key that is a prefix of others
  Get("a", kZero);    // from key
  Get("abd", kZero);  // from key, in the middle
  Get("a", "b");      // prefix a
  Get("ab", "ac");    // prefix ab
  Get(kZero, kZero);  // everything
  Get(kZero, "b");    // everything below b
  Get("b", "a");      // end before key: empty
  Get("a", "a");      // end == key: empty
  Get(kZero);         // the single key "\0" (absent)
  Get("z\xff", "{");  // prefix z\xff... via the next byte
  Get("z\xff", kZero);
  Get("\xff", kZero);  // last key onwards
  Get("\xfe", "\xff");
  Get("\xff\xff");  // absent
  Get("c", "c\x01");
  Delete("ab", "ac");
  Get("a", "b");
  Get(kZero, kZero);
}

TEST_F(DiffTest, RangeLimitMoreAndCountMatchEtcd) {
  StartBoth();
  for (int i = 0; i < 6; ++i) Put("k" + std::to_string(i), std::string(i + 1, 'x'));
  Put("other", "y");
  for (int64_t limit : {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{2}, int64_t{5}, int64_t{6},
                        int64_t{7}, int64_t{100}, INT64_MAX}) {
    RangeRequest r = RangeReq("k", "l");
    r.set_limit(limit);
    Range(r);
    r.set_keys_only(true);
    Range(r);
    r.set_keys_only(false);
    r.set_count_only(true);
    Range(r);
    r.set_count_only(false);
    r.set_range_end(kZero);
    Range(r);
    r.set_revision(4);
    Range(r);
  }
  RangeRequest r = RangeReq("k3");
  r.set_count_only(true);
  Range(r);
  r.set_keys_only(true);
  Range(r);
  r = RangeReq("missing", "missinh");
  r.set_count_only(true);
  Range(r);
}

TEST_F(DiffTest, HistoricalRevisionsMatchEtcd) {
  StartBoth();
  Put("a", "1");
  Put("b", "1");
  Put("a", "2");
  Delete("b");
  Put("b", "again");
  Put("c", "1");
  Delete("a", "c");
  Put("a", "3");
  int64_t rev = SameRevision();
  for (int64_t r = 0; r <= rev + 1; ++r) {
    Get("a", "", r);
    Get("b", "", r);
    Get(kZero, kZero, r);
    RangeRequest req = RangeReq("a", "z", r);
    req.set_count_only(true);
    Range(req);
  }
}

TEST_F(DiffTest, SortOrdersAndTargetsMatchEtcd) {
  StartBoth();
  // Versions, create and mod revisions and values in varied order, with ties (at most 12 keys:
  // etcd's sort is not stable beyond that, see report).
  Put("k1", "m");
  Put("k2", "c");
  Put("k3", "m");
  Put("k2", "z");
  Put("k4", "a");
  Put("k1", "b");
  Put("k1", "m");
  Put("k5", "c");
  Put("k3", "q");
  Put("k6", "a");
  using R = RangeRequest;
  for (auto order : {R::NONE, R::ASCEND, R::DESCEND}) {
    for (auto target : {R::KEY, R::VERSION, R::CREATE, R::MOD, R::VALUE}) {
      R r = RangeReq("k", "l");
      r.set_sort_order(order);
      r.set_sort_target(target);
      Range(r);
      r.set_limit(3);
      Range(r);
      r.set_keys_only(true);  // etcd sorts on the values before dropping them
      Range(r);
      r.set_limit(0);
      Range(r);
      r.set_keys_only(false);
      r.set_revision(6);
      Range(r);
      r.set_min_mod_revision(3);
      r.set_limit(2);
      Range(r);
    }
  }
  // An order etcd does not know: fetched whole and cut, but not sorted.
  R r = RangeReq("k", "l");
  r.set_sort_order(static_cast<R::SortOrder>(7));
  r.set_sort_target(R::VALUE);
  r.set_limit(4);
  Range(r);
}

TEST_F(DiffTest, SerializableKeysOnlyCountOnlyMatchEtcd) {
  StartBoth();
  Put("a", "1");
  Put("b", "22");
  Put("c", "333");
  for (bool ser : {false, true}) {
    for (bool keys : {false, true}) {
      for (bool count : {false, true}) {
        RangeRequest r = RangeReq("a", kZero);
        r.set_serializable(ser);
        r.set_keys_only(keys);
        r.set_count_only(count);
        Range(r);
        r.set_revision(3);
        Range(r);
        r.set_limit(1);
        Range(r);
      }
    }
  }
  RangeRequest r = RangeReq("a", "", 100);
  r.set_serializable(true);
  Range(r);
}

TEST_F(DiffTest, RevisionFiltersMatchEtcd) {
  StartBoth();
  Put("a", "1");  // 2
  Put("b", "1");  // 3
  Put("c", "1");  // 4
  Put("a", "2");  // 5
  Put("d", "1");  // 6
  Put("b", "2");  // 7
  Put("e", "1");  // 8
  for (int64_t lo : {0, 1, 3, 5, 9}) {
    for (int64_t hi : {0, 2, 4, 7, 10}) {
      RangeRequest r = RangeReq("a", "z");
      r.set_min_mod_revision(lo);
      r.set_max_mod_revision(hi);
      Range(r);
      r = RangeReq("a", "z");
      r.set_min_create_revision(lo);
      r.set_max_create_revision(hi);
      Range(r);
      r.set_limit(1);
      Range(r);
      r.set_count_only(true);
      Range(r);
    }
  }
  RangeRequest r = RangeReq("a", "z");
  r.set_min_mod_revision(4);
  r.set_max_create_revision(5);
  r.set_sort_order(RangeRequest::DESCEND);
  r.set_sort_target(RangeRequest::MOD);
  Range(r);
  r.set_revision(6);
  Range(r);
}

TEST_F(DiffTest, PutOptionsAndErrorsMatchEtcd) {
  StartBoth();
  LeaseGrant(100, 600);
  LeaseGrant(200, 600);
  Put("a", "1", 0, /*prev_kv=*/true);  // no previous version
  Put("a", "2", 0, /*prev_kv=*/true);
  Put("a", "2", 0, /*prev_kv=*/true);  // same value again: new version
  Put("l", "1", 100, true);
  Get("l");
  Outcome o = Put("x", "1", 999);
  EXPECT_EQ(o.code, grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(o.message, "etcdserver: requested lease not found");
  Get("x");

  etcdserverpb::PutRequest p;
  p.set_key("l");
  p.set_ignore_value(true);
  PutReq(p);  // keeps the value, drops the lease (lease 0 given)
  Get("l");
  p.set_lease(200);
  PutReq(p);  // keeps the value, new lease
  p.set_lease(0);
  p.set_ignore_lease(true);
  p.set_prev_kv(true);
  PutReq(p);  // keeps both
  p.set_ignore_value(false);
  p.set_value("new");
  PutReq(p);  // new value, keeps the lease
  Get("l");

  // Errors detected before proposing.
  p = etcdserverpb::PutRequest();
  p.set_key("l");
  p.set_value("v");
  p.set_ignore_value(true);
  o = PutReq(p);
  EXPECT_EQ(o.message, "etcdserver: value is provided");
  p.clear_value();
  p.set_lease(100);
  p.set_ignore_lease(true);
  o = PutReq(p);
  EXPECT_EQ(o.message, "etcdserver: lease is provided");
  p.set_ignore_value(false);
  p.set_value("v");
  PutReq(p);

  // Errors detected when applying.
  p = etcdserverpb::PutRequest();
  p.set_key("missing");
  p.set_ignore_value(true);
  o = PutReq(p);
  EXPECT_EQ(o.message, "etcdserver: key not found");
  p.set_ignore_value(false);
  p.set_ignore_lease(true);
  o = PutReq(p);
  EXPECT_EQ(o.message, "etcdserver: key not found");
  p.set_ignore_lease(false);
  p.set_ignore_value(true);
  p.set_lease(999);
  o = PutReq(p);  // the lease is checked first
  EXPECT_EQ(o.message, "etcdserver: requested lease not found");
  p.set_key("a");
  PutReq(p);
  p.set_lease(100);
  p.set_prev_kv(true);
  PutReq(p);
  Get(kZero, kZero);
  SameRevision();
}

TEST_F(DiffTest, DeleteRangeMatchesEtcd) {
  StartBoth();
  for (const char* k : {"a", "ab", "abc", "b", "c", "d", "e"}) Put(k, std::string("v") + k);
  Delete("missing");
  Delete("missing", "", true);
  Delete("a", "", true);
  Delete("a", "", true);  // already gone
  Delete("ab", "b", true);
  Delete("c", "a", true);  // empty range
  Delete("d", kZero, false);
  Get(kZero, kZero);
  Put("x", "1");
  Put("y", "1");
  Delete(kZero, kZero, true);
  Get(kZero, kZero);
  Get("a", "", 3);
  SameRevision();
}

TEST_F(DiffTest, CompactionMatchesEtcd) {
  StartBoth();
  for (int i = 0; i < 6; ++i) Put("k", std::to_string(i));
  Put("gone", "1");
  Delete("gone");
  Outcome o = Compact(0);  // etcd accepts compacting at 0 once
  Compact(0);
  o = Compact(-1);
  EXPECT_EQ(o.message, "etcdserver: mvcc: required revision has been compacted");
  o = Compact(100);
  EXPECT_EQ(o.message, "etcdserver: mvcc: required revision is a future revision");
  Compact(SameRevision() + 1);
  Compact(3);
  Get("k", "", 2);
  Get("k", "", 3);
  Compact(3);  // twice
  Compact(2);  // below
  Compact(5, /*physical=*/true);
  Compact(5, true);
  Get("k", "", 4);
  Get("k", "", 5);
  Get("gone", "", 8);
  Get("gone", "", 7);
  Compact(9, true);  // after the deletion of "gone": only the newest version of k stays
  for (int64_t r = 8; r <= 10; ++r) Get(kZero, kZero, r);
  Put("k", "after");
  Get(kZero, kZero);
  Compact(SameRevision(), true);  // the current revision
  Get("k");
  RangeRequest r = RangeReq("k", "", 10);
  r.set_serializable(true);
  Range(r);
}

TEST_F(DiffTest, BinaryKeysMatchEtcd) {
  StartBoth();
  const std::vector<std::string> keys = {std::string("a"),
                                         std::string("a\0", 2),
                                         std::string("a\0\0", 3),
                                         std::string("a\0b", 3),
                                         std::string("a\x01"),
                                         std::string("a\xff"),
                                         std::string("a\xff\xff"),
                                         std::string("b"),
                                         std::string("\x01"),
                                         std::string("\xff\xff\xff"),
                                         kZero + "x"};
  for (const auto& k : keys) Put(k, "v:" + k);
  Get(kZero, kZero);
  for (const auto& k : keys) {
    Get(k);
    Get(k, kZero);
    Get(k, k + kZero);  // exactly k
    Get(k + kZero);
  }
  Get("a", std::string("a\0\x01", 3));
  Get(std::string("a\0", 2), "a\x01");
  Get("a", "b");
  Delete(std::string("a\0", 2), "a\x01", true);
  Get(kZero, kZero);
  Put(std::string("a\0", 2), "again");
  Get("a", "b", 3);
  Get("a", "b");
  RangeRequest r = RangeReq(kZero, kZero);
  r.set_sort_order(RangeRequest::DESCEND);
  Range(r);
}

TEST_F(DiffTest, LargeValuesMatchEtcd) {
  StartBoth();  // default max-request-bytes: 1.5 MiB
  Put("big", std::string(1400 * 1024, 'b'));
  Get("big");
  RangeRequest r = RangeReq("big");
  r.set_keys_only(true);
  Range(r);
  Outcome o = Put("bigger", std::string(1600 * 1024, 'b'));
  EXPECT_EQ(o.message, "etcdserver: request is too large");
  Put("big", std::string(1024 * 1024, 'c'), 0, /*prev_kv=*/true);
  Delete("big", "", true);
  SameRevision();
}

}  // namespace
}  // namespace etcdw::testing
