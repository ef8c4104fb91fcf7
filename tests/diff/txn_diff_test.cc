// Differential tests of Txn: compares, branches, nesting, limits, overlap rules and errors.
#include "diff_fixture.h"

namespace etcdw::testing {
namespace {

using etcdserverpb::Compare;
using etcdserverpb::RequestOp;
using etcdserverpb::TxnRequest;

// A read-only transaction whose branch shows the compare's outcome.
TxnRequest Probe(const Compare& c) {
  TxnRequest t;
  *t.add_compare() = c;
  *t.add_success() = OpRange("yes");
  *t.add_failure() = OpRange("no");
  return t;
}

TEST_F(DiffTest, TxnCompareTargetsAndResultsMatchEtcd) {
  StartBoth();
  LeaseGrant(7, 600);
  Put("yes", "branch");
  Put("no", "branch");
  Put("k", "m", 7);  // version 1, create 4, mod 4, value m, lease 7
  Put("k", "m", 7);  // version 2, mod 5
  Put("other", "x");
  const auto results = {Compare::EQUAL, Compare::NOT_EQUAL, Compare::GREATER, Compare::LESS};
  for (const std::string key : {"k", "missing"}) {
    for (auto res : results) {
      for (int64_t v : {0, 1, 2, 3}) Txn(Probe(CmpVersion(key, res, v)));
      for (int64_t v : {0, 3, 4, 5}) Txn(Probe(CmpCreate(key, res, v)));
      for (int64_t v : {0, 4, 5, 6}) Txn(Probe(CmpMod(key, res, v)));
      for (int64_t v : {0, 6, 7, 8}) Txn(Probe(CmpLease(key, res, v)));
      for (const std::string v : {"", "a", "m", "z", "mm"}) Txn(Probe(CmpValue(key, res, v)));
    }
  }
  // A target whose union member is not set compares against zero / the empty value.
  Compare c = CmpVersion("k", Compare::GREATER, 0);
  c.clear_target_union();
  Txn(Probe(c));
  c.set_value("zzz");  // the wrong member: ignored, compares against 0
  Txn(Probe(c));
  c = CmpValue("k", Compare::GREATER, "");
  c.clear_target_union();
  Txn(Probe(c));
  // An unknown result enum value is always true.
  c = CmpVersion("k", static_cast<Compare::CompareResult>(9), 100);
  Txn(Probe(c));
  // Several compares: all must hold.
  TxnRequest t = Probe(CmpVersion("k", Compare::EQUAL, 2));
  *t.add_compare() = CmpValue("other", Compare::EQUAL, "x");
  Txn(t);
  *t.add_compare() = CmpValue("other", Compare::EQUAL, "y");
  Txn(t);
  // A compare with an empty key is rejected.
  t = Probe(CmpVersion("", Compare::EQUAL, 0));
  Outcome o = Txn(t);
  EXPECT_EQ(o.message, "etcdserver: key is not provided");
}

TEST_F(DiffTest, TxnRangeComparesMatchEtcd) {
  StartBoth();
  Put("yes", "branch");
  Put("no", "branch");
  Put("p/a", "1");
  Put("p/b", "2");
  Put("p/c", "3");
  Put("p/b", "2");
  for (const std::string& end :
       std::vector<std::string>{"p0", kZero, "p/c", "p/b\x01", "p/", "p/a"}) {
    Txn(Probe(CmpVersion("p/", Compare::GREATER, 0, end)));
    Txn(Probe(CmpVersion("p/", Compare::EQUAL, 1, end)));
    Txn(Probe(CmpVersion("p/", Compare::LESS, 3, end)));
    Txn(Probe(CmpCreate("p/", Compare::GREATER, 3, end)));
    Txn(Probe(CmpMod("p/", Compare::LESS, 7, end)));
    Txn(Probe(CmpValue("p/", Compare::GREATER, "0", end)));
    Txn(Probe(CmpValue("p/", Compare::NOT_EQUAL, "2", end)));
    Txn(Probe(CmpLease("p/", Compare::EQUAL, 0, end)));
  }
  // Empty ranges behave like a missing key (value compares always fail).
  Txn(Probe(CmpVersion("q/", Compare::EQUAL, 0, "q0")));
  Txn(Probe(CmpValue("q/", Compare::NOT_EQUAL, "x", "q0")));
  Txn(Probe(CmpCreate("z", Compare::EQUAL, 0, "a")));
}

TEST_F(DiffTest, TxnBranchesAndResponsesMatchEtcd) {
  StartBoth();
  Put("a", "1");
  Put("b", "1");
  TxnRequest t;
  *t.add_compare() = CmpValue("a", Compare::EQUAL, "1");
  *t.add_success() = OpPut("a", "2", 0, true);
  *t.add_success() = OpRange("a");  // sees the put of this transaction
  *t.add_success() = OpDelete("b", "", true);
  *t.add_success() = OpRange(kZero, kZero);
  *t.add_success() = OpPut("c", "new", 0, true);
  *t.add_failure() = OpPut("f", "failed");
  Txn(t);  // success
  Txn(t);  // failure now
  Get(kZero, kZero);
  // Nothing to do in the chosen branch.
  TxnRequest empty;
  Txn(empty);
  *empty.add_compare() = CmpValue("a", Compare::EQUAL, "nope");
  *empty.add_success() = OpPut("never", "x");
  Txn(empty);  // write transaction, failure branch empty: no new revision
  // A write transaction that changes nothing.
  TxnRequest noop;
  *noop.add_success() = OpDelete("missing");
  *noop.add_success() = OpRange("a");
  Txn(noop);
  // Delete then range inside one transaction.
  TxnRequest dr;
  *dr.add_success() = OpDelete("a", "z", true);
  *dr.add_success() = OpRange("a", "z");
  RequestOp counted = OpRange("a", "z", 0);
  counted.mutable_request_range()->set_count_only(true);
  *dr.add_success() = counted;
  Txn(dr);
  // Ranges with options inside a transaction.
  Put("s1", "b");
  Put("s2", "a");
  Put("s3", "c");
  TxnRequest ro;
  RequestOp sorted = OpRange("s", "t");
  sorted.mutable_request_range()->set_sort_target(etcdserverpb::RangeRequest::VALUE);
  sorted.mutable_request_range()->set_limit(2);
  *ro.add_success() = sorted;
  sorted.mutable_request_range()->set_keys_only(true);
  sorted.mutable_request_range()->set_revision(SameRevision() - 1);
  *ro.add_success() = sorted;
  Txn(ro);
  *ro.add_success() = OpPut("s4", "d");
  Txn(ro);
  SameRevision();
}

TEST_F(DiffTest, NestedTxnsMatchEtcd) {
  StartBoth();
  Put("x", "1");
  TxnRequest inner_ok;
  *inner_ok.add_compare() = CmpValue("x", Compare::EQUAL, "1");
  *inner_ok.add_success() = OpPut("i1", "s");
  *inner_ok.add_success() = OpRange("x");
  *inner_ok.add_failure() = OpPut("i1", "f");
  TxnRequest inner_fail = inner_ok;
  inner_fail.mutable_compare(0)->set_value("2");
  TxnRequest deeper;
  *deeper.add_success() = OpTxn(inner_fail);
  *deeper.add_success() = OpDelete("x", "", true);
  TxnRequest outer;
  *outer.add_compare() = CmpVersion("x", Compare::GREATER, 0);
  *outer.add_success() = OpPut("o", "1");
  *outer.add_success() = OpTxn(inner_ok);
  *outer.add_success() = OpTxn(deeper);
  *outer.add_success() = OpRange(kZero, kZero);
  *outer.add_failure() = OpTxn(inner_ok);
  Txn(outer);
  Get(kZero, kZero);
  Txn(outer);  // x is gone: the failure branch, whose nested transaction fails too
  Get(kZero, kZero);
  // Read-only nested transactions.
  TxnRequest ro;
  TxnRequest ro_inner;
  *ro_inner.add_compare() = CmpVersion("o", Compare::EQUAL, 1);
  *ro_inner.add_success() = OpRange("o");
  *ro_inner.add_failure() = OpRange("i1");
  *ro.add_success() = OpTxn(ro_inner);
  *ro.add_success() = OpRange("i1");
  Txn(ro);
  SameRevision();
}

TEST_F(DiffTest, TxnOperationLimitsMatchEtcd) {
  StartBoth();
  auto many = [](int n, const std::string& prefix) {
    TxnRequest t;
    for (int i = 0; i < n; ++i) *t.add_success() = OpPut(prefix + std::to_string(i), "v");
    return t;
  };
  Outcome o = Txn(many(129, "a"));
  EXPECT_EQ(o.message, "etcdserver: too many operations in txn request");
  EXPECT_EQ(o.code, grpc::StatusCode::INVALID_ARGUMENT);
  Txn(many(128, "a"));
  TxnRequest f;
  for (int i = 0; i < 129; ++i) *f.add_failure() = OpRange("x");
  Txn(f);
  TxnRequest c;
  for (int i = 0; i < 129; ++i) *c.add_compare() = CmpVersion("x", Compare::EQUAL, 0);
  Txn(c);
  c.mutable_compare()->RemoveLast();
  Txn(c);
  // Nested budget: a nested transaction may use what the levels above left.
  TxnRequest outer;
  for (int i = 0; i < 100; ++i) *outer.add_compare() = CmpVersion("x", Compare::EQUAL, 0);
  *outer.add_success() = OpTxn(many(28, "n"));
  Txn(outer);
  *outer.mutable_success(0) = OpTxn(many(29, "n"));
  Txn(outer);
  TxnRequest mid;
  for (int i = 0; i < 10; ++i) *mid.add_compare() = CmpVersion("x", Compare::EQUAL, 0);
  *mid.add_success() = OpTxn(many(18, "m"));
  *outer.mutable_success(0) = OpTxn(mid);
  Txn(outer);  // 100 + 10 + 18 = 128
  *mid.mutable_success(0) = OpTxn(many(19, "m"));
  *outer.mutable_success(0) = OpTxn(mid);
  Txn(outer);  // 129
  // With a smaller configured limit.
  SameRevision();
}

TEST_F(DiffTest, TxnMaxOpsSettingMatchesEtcd) {
  StartBoth({{"max-txn-ops", "3"}});
  TxnRequest t;
  for (int i = 0; i < 3; ++i) *t.add_success() = OpPut("k" + std::to_string(i), "v");
  Txn(t);
  *t.add_success() = OpPut("k3", "v");
  Outcome o = Txn(t);
  EXPECT_EQ(o.message, "etcdserver: too many operations in txn request");
}

TEST_F(DiffTest, TxnDuplicateKeyRulesMatchEtcd) {
  StartBoth();
  Put("a", "0");
  Put("c", "0");
  auto txn = [](std::vector<RequestOp> ops, std::vector<RequestOp> failure = {}) {
    TxnRequest t;
    for (auto& op : ops) *t.add_success() = op;
    for (auto& op : failure) *t.add_failure() = op;
    return t;
  };
  auto nested = [](std::vector<RequestOp> then_ops, std::vector<RequestOp> else_ops) {
    TxnRequest t;
    for (auto& op : then_ops) *t.add_success() = op;
    for (auto& op : else_ops) *t.add_failure() = op;
    return OpTxn(t);
  };
  std::vector<TxnRequest> cases = {
      txn({OpPut("a", "1"), OpPut("a", "2")}),        // same key twice
      txn({OpPut("a", "1"), OpPut("b", "2")}),        // fine
      txn({OpPut("a", "1")}, {OpPut("a", "2")}),      // branches are separate
      txn({OpDelete("a"), OpPut("a", "1")}),          // delete + put
      txn({OpPut("b", "1"), OpDelete("a", "c")}),     // put inside deleted range
      txn({OpPut("c", "1"), OpDelete("a", "c")}),     // end is exclusive
      txn({OpDelete("a", "c"), OpDelete("b", "d")}),  // overlapping deletes
      txn({OpDelete("a"), OpDelete("a")}),            // same delete twice
      txn({OpPut("b", "1"), OpDelete("a", kZero)}),   // from-key delete: not seen
      txn({OpPut("b", "1"), OpDelete(kZero, kZero)}),
      txn({OpRange("a"), OpPut("a", "1"), OpRange("a")}),     // ranges never conflict
      txn({nested({OpPut("a", "1")}, {OpPut("a", "2")})}),    // then/else of one txn
      txn({nested({OpPut("a", "1")}, {}), OpPut("a", "2")}),  // nested put + outer put
      txn({nested({}, {OpPut("a", "1")}), OpPut("a", "2")}),
      txn({nested({OpPut("a", "1")}, {}), nested({OpPut("a", "2")}, {})}),
      txn({nested({OpPut("a", "1")}, {}), nested({}, {OpPut("a", "2")})}),
      txn({nested({OpPut("b", "1")}, {}), OpDelete("a", "c")}),  // nested put in outer delete
      txn({nested({OpDelete("a", "c")}, {}), OpPut("b", "1")}),  // nested delete, outer put
      txn({nested({OpDelete("a", "c")}, {}), nested({OpPut("b", "1")}, {})}),
      txn({nested({OpPut("b", "1")}, {}), nested({OpDelete("a", "c")}, {})}),
      txn({nested({OpPut("b", "1")}, {OpDelete("b")})}),
      txn({nested({nested({OpPut("a", "1")}, {})}, {}), OpPut("a", "1")}),
      txn({nested({nested({OpPut("a", "1")}, {OpPut("a", "2")})}, {OpPut("a", "3")})}),
  };
  // What etcd 3.4 answers (checked so that this test cannot pass by both failing alike).
  const std::vector<bool> duplicate = {true,  false, false, true,  true,  false, false, false,
                                       false, false, false, false, true,  true,  true,  true,
                                       true,  true,  true,  false, false, true,  false};
  ASSERT_EQ(cases.size(), duplicate.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    Outcome o = Txn(cases[i]);
    if (duplicate[i]) {
      EXPECT_EQ(o.message, "etcdserver: duplicate key given in txn request") << "case " << i;
    } else {
      EXPECT_TRUE(o.ok()) << "case " << i << ": " << o.ToString();
    }
  }
  Get(kZero, kZero);
}

TEST_F(DiffTest, TxnRequestErrorsMatchEtcd) {
  StartBoth();
  LeaseGrant(5, 600);
  Put("a", "1");
  Put("a", "2");
  Put("a", "3");
  Compact(3);
  Put("b", "1");
  auto txn = [](std::vector<RequestOp> ops, std::vector<RequestOp> failure = {}) {
    TxnRequest t;
    for (auto& op : ops) *t.add_success() = op;
    for (auto& op : failure) *t.add_failure() = op;
    return t;
  };
  RequestOp empty_op;
  RequestOp ignore_value = OpPut("missing", "");
  ignore_value.mutable_request_put()->set_ignore_value(true);
  RequestOp ignore_lease = OpPut("missing", "v");
  ignore_lease.mutable_request_put()->set_ignore_lease(true);
  RequestOp value_given = OpPut("a", "v");
  value_given.mutable_request_put()->set_ignore_value(true);
  RequestOp ignore_existing = OpPut("a", "");
  ignore_existing.mutable_request_put()->set_ignore_value(true);
  ignore_existing.mutable_request_put()->set_prev_kv(true);
  const int64_t rev = SameRevision();
  std::vector<TxnRequest> cases = {
      txn({empty_op}),  // etcdserver: key not found
      txn({OpRange("a")}, {empty_op}),
      txn({OpPut("", "v")}),  // key is not provided
      txn({OpRange("")}),
      txn({OpDelete("")}),
      txn({value_given}),                           // value is provided
      txn({OpPut("x", "v", 999)}),                  // lease not found
      txn({OpPut("x", "v", 5)}),                    // fine
      txn({OpRange("a")}, {OpPut("x", "v", 999)}),  // branch not taken: fine
      txn({ignore_value}),                          // key not found (when applied)
      txn({ignore_lease}),
      txn({ignore_existing}),             // fine
      txn({OpRange("a", "", rev + 10)}),  // future revision
      txn({OpRange("a", "", rev + 10), OpPut("y", "v")}),
      txn({OpRange("a", "", 2)}),  // compacted
      txn({OpRange("a", "", 2), OpPut("y", "v")}),
      txn({OpRange("a", "", 3), OpPut("y", "v")}),              // fine
      txn({OpRange("a", "", rev + 10), OpPut("z", "v", 999)}),  // put checks come first
      txn({OpRange("a", "", 2), ignore_value}),
      txn({OpTxn(txn({ignore_value}))}),  // nested
      txn({OpTxn(txn({OpRange("a", "", 2)}))}),
      txn({OpTxn(txn({OpRange("a", "", 2)})), OpPut("n", "v")}),
      txn({OpTxn(txn({OpPut("n", "v", 999)}))}),
  };
  const std::string kKeyNotFound = "etcdserver: key not found";
  const std::string kNoKey = "etcdserver: key is not provided";
  const std::string kNoLease = "etcdserver: requested lease not found";
  const std::string kFuture = "etcdserver: mvcc: required revision is a future revision";
  const std::string kCompacted = "etcdserver: mvcc: required revision has been compacted";
  const std::vector<std::string> expected = {
      kKeyNotFound, kKeyNotFound, kNoKey,
      kNoKey,       kNoKey,       "etcdserver: value is provided",
      kNoLease,     "",           "",
      kKeyNotFound, kKeyNotFound, "",
      kFuture,      kFuture,      kCompacted,
      kCompacted,   "",           kNoLease,
      kKeyNotFound, kKeyNotFound, kCompacted,
      kCompacted,   kNoLease};
  ASSERT_EQ(cases.size(), expected.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    Outcome o = Txn(cases[i]);
    EXPECT_EQ(o.message, expected[i]) << "case " << i;
  }
  // Compared against a missing key, then the failure branch with an invalid op.
  TxnRequest t;
  *t.add_compare() = CmpVersion("missing", Compare::GREATER, 0);
  *t.add_success() = OpRange("a");
  *t.add_failure() = ignore_value;
  Txn(t);
  Get(kZero, kZero);
  SameRevision();
}

}  // namespace
}  // namespace etcdw::testing
