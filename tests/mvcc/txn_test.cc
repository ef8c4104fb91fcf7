#include "etcdw/mvcc/txn.h"

#include <gtest/gtest.h>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/mvcc/lease_table.h"
#include "mvcc/mvcc_test_util.h"

namespace etcdw::mvcc {
namespace {

using etcdserverpb::Compare;
using etcdserverpb::RequestOp;
using etcdserverpb::TxnRequest;
using etcdserverpb::TxnResponse;
using testutil::KeysOf;
using testutil::OpDelete;
using testutil::OpPut;
using testutil::OpRange;
using testutil::OpTxn;
using testutil::Store;
using Keys = std::vector<std::string>;

Compare Cmp(const std::string& key, Compare::CompareTarget target, Compare::CompareResult result) {
  Compare c;
  c.set_key(key);
  c.set_target(target);
  c.set_result(result);
  return c;
}
Compare ValueCmp(const std::string& key, Compare::CompareResult result, const std::string& v) {
  Compare c = Cmp(key, Compare::VALUE, result);
  c.set_value(v);
  return c;
}
Compare VersionCmp(const std::string& key, Compare::CompareResult result, int64_t v) {
  Compare c = Cmp(key, Compare::VERSION, result);
  c.set_version(v);
  return c;
}
Compare CreateCmp(const std::string& key, Compare::CompareResult result, int64_t v) {
  Compare c = Cmp(key, Compare::CREATE, result);
  c.set_create_revision(v);
  return c;
}
Compare ModCmp(const std::string& key, Compare::CompareResult result, int64_t v) {
  Compare c = Cmp(key, Compare::MOD, result);
  c.set_mod_revision(v);
  return c;
}
Compare LeaseCmp(const std::string& key, Compare::CompareResult result, int64_t v) {
  Compare c = Cmp(key, Compare::LEASE, result);
  c.set_lease(v);
  return c;
}

TxnRequest MakeTxn(std::vector<Compare> compares, std::vector<RequestOp> success,
                   std::vector<RequestOp> failure = {}) {
  TxnRequest t;
  for (auto& c : compares) *t.add_compare() = std::move(c);
  for (auto& op : success) *t.add_success() = std::move(op);
  for (auto& op : failure) *t.add_failure() = std::move(op);
  return t;
}

class TxnTest : public testing::Test {
 protected:
  void SetUp() override {
    s_ = Store::InMemory();
    ASSERT_NE(s_, nullptr);
    ASSERT_TRUE(s_->Grant(9, 60).ok());
    s_->Put("a", "10");     // rev 2
    s_->Put("b", "20", 9);  // rev 3
    s_->Put("a", "11");     // rev 4: a version 2, create 2, mod 4
    s_->Put("c", "30");     // rev 5
  }
  // Evaluates one compare on the current state.
  bool Eval(const Compare& c) {
    auto view = s_->kv().NewReadView();
    auto r = EvaluateCompare(*view, c);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && *r;
  }
  TxnResponse MustTxn(const TxnRequest& t) {
    auto r = s_->Txn(t);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value() : TxnResponse();
  }
  std::unique_ptr<Store> s_;
};

// --- compares ---------------------------------------------------------------------------------

TEST_F(TxnTest, ValueCompares) {
  EXPECT_TRUE(Eval(ValueCmp("a", Compare::EQUAL, "11")));
  EXPECT_FALSE(Eval(ValueCmp("a", Compare::EQUAL, "10")));
  EXPECT_TRUE(Eval(ValueCmp("a", Compare::NOT_EQUAL, "10")));
  EXPECT_TRUE(Eval(ValueCmp("a", Compare::GREATER, "1")));
  EXPECT_TRUE(Eval(ValueCmp("a", Compare::GREATER, "100")));  // bytewise, not numeric
  EXPECT_FALSE(Eval(ValueCmp("a", Compare::GREATER, "2")));
  EXPECT_TRUE(Eval(ValueCmp("a", Compare::LESS, "2")));
  EXPECT_FALSE(Eval(ValueCmp("a", Compare::LESS, "11")));
  // No value set compares with the empty value.
  EXPECT_TRUE(Eval(Cmp("a", Compare::VALUE, Compare::GREATER)));
  EXPECT_FALSE(Eval(Cmp("a", Compare::VALUE, Compare::EQUAL)));
}

TEST_F(TxnTest, ValueComparesAreUnsigned) {
  s_->Put("bin", "\x80");
  EXPECT_TRUE(Eval(ValueCmp("bin", Compare::GREATER, "\x7f")));
  EXPECT_TRUE(Eval(ValueCmp("bin", Compare::LESS, "\xff")));
}

TEST_F(TxnTest, ValueCompareOnAMissingKeyIsAlwaysFalse) {
  for (auto r : {Compare::EQUAL, Compare::NOT_EQUAL, Compare::GREATER, Compare::LESS}) {
    EXPECT_FALSE(Eval(ValueCmp("missing", r, ""))) << r;
    EXPECT_FALSE(Eval(ValueCmp("missing", r, "x"))) << r;
  }
}

TEST_F(TxnTest, OtherComparesOnAMissingKeyUseZero) {
  EXPECT_TRUE(Eval(VersionCmp("missing", Compare::EQUAL, 0)));
  EXPECT_TRUE(Eval(CreateCmp("missing", Compare::EQUAL, 0)));
  EXPECT_TRUE(Eval(ModCmp("missing", Compare::LESS, 1)));
  EXPECT_TRUE(Eval(LeaseCmp("missing", Compare::EQUAL, 0)));
  EXPECT_FALSE(Eval(VersionCmp("missing", Compare::GREATER, 0)));
  EXPECT_TRUE(Eval(VersionCmp("missing", Compare::NOT_EQUAL, 3)));
  // A deleted key is missing.
  s_->Delete("c");
  EXPECT_TRUE(Eval(VersionCmp("c", Compare::EQUAL, 0)));
  EXPECT_FALSE(Eval(ValueCmp("c", Compare::NOT_EQUAL, "30")));
}

TEST_F(TxnTest, RevisionVersionAndLeaseCompares) {
  EXPECT_TRUE(Eval(VersionCmp("a", Compare::EQUAL, 2)));
  EXPECT_TRUE(Eval(VersionCmp("a", Compare::GREATER, 1)));
  EXPECT_TRUE(Eval(VersionCmp("a", Compare::LESS, 3)));
  EXPECT_TRUE(Eval(CreateCmp("a", Compare::EQUAL, 2)));
  EXPECT_FALSE(Eval(CreateCmp("a", Compare::EQUAL, 4)));
  EXPECT_TRUE(Eval(ModCmp("a", Compare::EQUAL, 4)));
  EXPECT_TRUE(Eval(ModCmp("a", Compare::NOT_EQUAL, 2)));
  EXPECT_TRUE(Eval(ModCmp("a", Compare::LESS, 5)));
  EXPECT_TRUE(Eval(LeaseCmp("b", Compare::EQUAL, 9)));
  EXPECT_TRUE(Eval(LeaseCmp("a", Compare::EQUAL, 0)));
  EXPECT_TRUE(Eval(LeaseCmp("b", Compare::GREATER, 8)));
  // Without a target value the compare is against 0.
  EXPECT_TRUE(Eval(Cmp("a", Compare::MOD, Compare::GREATER)));
  EXPECT_TRUE(Eval(Cmp("a", Compare::CREATE, Compare::NOT_EQUAL)));
  // A value of another target's kind does not count either.
  Compare mismatched = Cmp("a", Compare::VERSION, Compare::EQUAL);
  mismatched.set_mod_revision(2);
  EXPECT_FALSE(Eval(mismatched));
  mismatched.set_result(Compare::GREATER);
  EXPECT_TRUE(Eval(mismatched));
}

TEST_F(TxnTest, RangeComparesNeedEveryKeyToMatch) {
  Compare all = ModCmp("a", Compare::GREATER, 1);
  all.set_range_end("d");
  EXPECT_TRUE(Eval(all));
  Compare some = ModCmp("a", Compare::GREATER, 3);  // b has mod 3
  some.set_range_end("d");
  EXPECT_FALSE(Eval(some));
  Compare from = VersionCmp("b", Compare::EQUAL, 1);
  from.set_range_end(std::string(1, '\0'));
  EXPECT_TRUE(Eval(from));  // b and c
  Compare prefix_all = VersionCmp("a", Compare::LESS, 3);
  prefix_all.set_range_end(PrefixRangeEnd("a"));
  EXPECT_TRUE(Eval(prefix_all));
  // An empty range behaves like a missing key.
  Compare empty = VersionCmp("x", Compare::EQUAL, 0);
  empty.set_range_end("z");
  EXPECT_TRUE(Eval(empty));
  Compare empty_value = ValueCmp("x", Compare::NOT_EQUAL, "q");
  empty_value.set_range_end("z");
  EXPECT_FALSE(Eval(empty_value));
}

// --- transactions -----------------------------------------------------------------------------

TEST_F(TxnTest, SuccessBranch) {
  auto resp = MustTxn(MakeTxn({ValueCmp("a", Compare::EQUAL, "11")},
                              {OpPut("x", "1"), OpRange("a"), OpDelete("c")}, {OpPut("y", "1")}));
  EXPECT_TRUE(resp.succeeded());
  EXPECT_EQ(resp.header().revision(), 6);
  ASSERT_EQ(resp.responses_size(), 3);
  EXPECT_TRUE(resp.responses(0).has_response_put());
  EXPECT_EQ(resp.responses(0).response_put().header().revision(), 6);
  ASSERT_TRUE(resp.responses(1).has_response_range());
  EXPECT_EQ(resp.responses(1).response_range().kvs(0).value(), "11");
  EXPECT_EQ(resp.responses(1).response_range().header().revision(), 6);
  ASSERT_TRUE(resp.responses(2).has_response_delete_range());
  EXPECT_EQ(resp.responses(2).response_delete_range().deleted(), 1);
  EXPECT_EQ(s_->Value("x"), "1");
  EXPECT_EQ(s_->Value("y"), "<none>");
  EXPECT_EQ(s_->Value("c"), "<none>");
  EXPECT_EQ(s_->kv().Rev(), 6);  // one revision for the whole transaction
  ASSERT_EQ(s_->last_events().size(), 1u);
  ASSERT_EQ(s_->last_events()[0].events.size(), 2u);
  EXPECT_EQ(s_->last_events()[0].events[0].kv().key(), "x");
  EXPECT_EQ(s_->last_events()[0].events[1].kv().key(), "c");
}

TEST_F(TxnTest, FailureBranch) {
  auto resp =
      MustTxn(MakeTxn({ValueCmp("a", Compare::EQUAL, "11"), VersionCmp("b", Compare::EQUAL, 5)},
                      {OpPut("x", "1")}, {OpPut("y", "1"), OpRange("x")}));
  EXPECT_FALSE(resp.succeeded());
  ASSERT_EQ(resp.responses_size(), 2);
  EXPECT_TRUE(resp.responses(0).has_response_put());
  EXPECT_EQ(resp.responses(1).response_range().kvs_size(), 0);
  EXPECT_EQ(s_->Value("y"), "1");
  EXPECT_EQ(s_->Value("x"), "<none>");
}

TEST_F(TxnTest, NoComparesMeansSuccess) {
  auto resp = MustTxn(MakeTxn({}, {OpPut("x", "1")}, {OpPut("y", "1")}));
  EXPECT_TRUE(resp.succeeded());
  EXPECT_EQ(s_->Value("x"), "1");
}

TEST_F(TxnTest, ReadsInsideATransactionSeeItsWrites) {
  auto resp = MustTxn(
      MakeTxn({}, {OpRange("a"), OpPut("a", "new"), OpRange("a"), OpDelete("a"), OpRange("a")}));
  ASSERT_EQ(resp.responses_size(), 5);
  EXPECT_EQ(resp.responses(0).response_range().kvs(0).value(), "11");
  EXPECT_EQ(resp.responses(0).response_range().header().revision(), 5);  // before any change
  EXPECT_EQ(resp.responses(2).response_range().kvs(0).value(), "new");
  EXPECT_EQ(resp.responses(2).response_range().kvs(0).version(), 3);
  EXPECT_EQ(resp.responses(2).response_range().header().revision(), 6);
  EXPECT_EQ(resp.responses(4).response_range().kvs_size(), 0);
  EXPECT_EQ(resp.header().revision(), 6);
}

TEST_F(TxnTest, ReadOnlyTransactionKeepsTheRevision) {
  auto resp = MustTxn(MakeTxn({VersionCmp("a", Compare::EQUAL, 2)}, {OpRange("a", "z")}));
  EXPECT_TRUE(resp.succeeded());
  EXPECT_EQ(resp.header().revision(), 5);
  EXPECT_EQ(s_->kv().Rev(), 5);
  EXPECT_EQ(KeysOf(resp.responses(0).response_range()), (Keys{"a", "b", "c"}));
  // A transaction whose writes change nothing does not use a revision either.
  auto del = MustTxn(MakeTxn({}, {OpDelete("nothing")}));
  EXPECT_EQ(del.header().revision(), 5);
  EXPECT_EQ(s_->kv().Rev(), 5);
  auto empty = MustTxn(MakeTxn({}, {}));
  EXPECT_TRUE(empty.succeeded());
  EXPECT_EQ(empty.responses_size(), 0);
  EXPECT_EQ(empty.header().revision(), 5);
}

TEST_F(TxnTest, ExecuteReadTxnOnAView) {
  auto view = s_->kv().NewReadView();
  s_->Put("a", "later");  // not visible to the view
  auto t = MakeTxn({ValueCmp("a", Compare::EQUAL, "11")}, {OpRange("a"), OpRange("b", "", 3)},
                   {OpRange("c")});
  ASSERT_TRUE(IsTxnReadOnly(t));
  auto r = ExecuteReadTxn(*view, t);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->succeeded());
  EXPECT_EQ(r->header().revision(), 5);
  EXPECT_EQ(r->responses(0).response_range().kvs(0).value(), "11");
  EXPECT_EQ(r->responses(1).response_range().kvs(0).value(), "20");
  auto future = ExecuteReadTxn(*view, MakeTxn({}, {OpRange("a", "", 6)}));
  EXPECT_EQ(future.status(), errors::FutureRev());
}

TEST_F(TxnTest, NestedTransactions) {
  TxnRequest inner = MakeTxn({VersionCmp("b", Compare::EQUAL, 1)}, {OpPut("in-then", "1")},
                             {OpPut("in-else", "1")});
  TxnRequest inner_else = MakeTxn({VersionCmp("b", Compare::EQUAL, 7)}, {OpPut("x-then", "1")},
                                  {OpPut("x-else", "1"), OpRange("in-then")});
  auto resp = MustTxn(MakeTxn({}, {OpPut("outer", "1"), OpTxn(inner), OpTxn(inner_else)}));
  EXPECT_TRUE(resp.succeeded());
  EXPECT_EQ(resp.header().revision(), 6);
  ASSERT_EQ(resp.responses_size(), 3);
  ASSERT_TRUE(resp.responses(1).has_response_txn());
  const TxnResponse& r1 = resp.responses(1).response_txn();
  EXPECT_TRUE(r1.succeeded());
  EXPECT_EQ(r1.header().revision(), 0);  // nested responses carry an empty header
  ASSERT_EQ(r1.responses_size(), 1);
  EXPECT_EQ(r1.responses(0).response_put().header().revision(), 6);
  const TxnResponse& r2 = resp.responses(2).response_txn();
  EXPECT_FALSE(r2.succeeded());
  ASSERT_EQ(r2.responses_size(), 2);
  // The nested range sees the write of the earlier nested transaction.
  EXPECT_EQ(r2.responses(1).response_range().kvs_size(), 1);
  for (const char* k : {"outer", "in-then", "x-else"}) EXPECT_EQ(s_->Value(k), "1") << k;
  for (const char* k : {"in-else", "x-then"}) EXPECT_EQ(s_->Value(k), "<none>") << k;
  EXPECT_EQ(s_->kv().Rev(), 6);
}

TEST_F(TxnTest, NestedComparesAreEvaluatedBeforeAnyWrite) {
  // etcd decides every branch against the state before the transaction: the nested compare
  // does not see the put that precedes it.
  TxnRequest inner = MakeTxn({ValueCmp("new", Compare::EQUAL, "1")}, {OpPut("saw-it", "1")},
                             {OpPut("did-not", "1")});
  auto resp = MustTxn(MakeTxn({}, {OpPut("new", "1"), OpTxn(inner)}));
  EXPECT_FALSE(resp.responses(1).response_txn().succeeded());
  EXPECT_EQ(s_->Value("did-not"), "1");
  EXPECT_EQ(s_->Value("saw-it"), "<none>");
}

TEST_F(TxnTest, DeeplyNestedPathFollowsEachLevel) {
  TxnRequest l3 =
      MakeTxn({VersionCmp("a", Compare::EQUAL, 2)}, {OpPut("l3", "then")}, {OpPut("l3", "else")});
  TxnRequest l2a = MakeTxn({VersionCmp("a", Compare::EQUAL, 99)}, {OpPut("l2a", "then")},
                           {OpTxn(l3), OpPut("l2a", "else")});
  TxnRequest l2b = MakeTxn({}, {OpPut("l2b", "then")}, {});
  auto resp = MustTxn(MakeTxn({ModCmp("c", Compare::EQUAL, 5)}, {OpTxn(l2a), OpTxn(l2b)}));
  EXPECT_TRUE(resp.succeeded());
  const auto& ra = resp.responses(0).response_txn();
  EXPECT_FALSE(ra.succeeded());
  EXPECT_TRUE(ra.responses(0).response_txn().succeeded());
  EXPECT_TRUE(resp.responses(1).response_txn().succeeded());
  EXPECT_EQ(s_->Value("l3"), "then");
  EXPECT_EQ(s_->Value("l2a"), "else");
  EXPECT_EQ(s_->Value("l2b"), "then");
}

TEST_F(TxnTest, FailedChecksWriteNothing) {
  const int64_t rev = s_->kv().Rev();
  auto ignore = testutil::PutReq("missing", "");
  ignore.set_ignore_value(true);
  RequestOp bad_put;
  *bad_put.mutable_request_put() = ignore;
  auto r = s_->Txn(MakeTxn({}, {OpPut("x", "1"), bad_put}));
  EXPECT_EQ(r.status(), errors::KeyNotFound());
  EXPECT_EQ(s_->Value("x"), "<none>");
  EXPECT_EQ(s_->kv().Rev(), rev);

  auto lease = s_->Txn(MakeTxn({}, {OpPut("x", "1"), OpPut("y", "1", 12345)}));
  EXPECT_EQ(lease.status(), errors::LeaseNotFound());
  EXPECT_EQ(s_->Value("x"), "<none>");

  auto future = s_->Txn(MakeTxn({}, {OpPut("x", "1"), OpRange("a", "", rev + 5)}));
  EXPECT_EQ(future.status(), errors::FutureRev());
  EXPECT_EQ(s_->Value("x"), "<none>");

  // Checks look only at the branch taken.
  auto other_branch = s_->Txn(MakeTxn({}, {OpPut("x", "1")}, {bad_put}));
  EXPECT_TRUE(other_branch.ok()) << other_branch.status().ToString();
  EXPECT_EQ(s_->kv().Rev(), rev + 1);

  // Nested branches are checked too.
  TxnRequest inner = MakeTxn({}, {OpPut("z", "1", 777)});
  auto nested = s_->Txn(MakeTxn({}, {OpPut("w", "1"), OpTxn(inner)}));
  EXPECT_EQ(nested.status(), errors::LeaseNotFound());
  EXPECT_EQ(s_->Value("w"), "<none>");
}

TEST_F(TxnTest, RangeAtACompactedRevisionFailsTheTransaction) {
  ASSERT_TRUE(s_->Compact(4).ok());
  auto r = s_->Txn(MakeTxn({}, {OpPut("x", "1"), OpRange("a", "", 3)}));
  EXPECT_EQ(r.status(), errors::Compacted());
  EXPECT_EQ(s_->Value("x"), "<none>");
  auto ok = s_->Txn(MakeTxn({}, {OpRange("a", "", 4)}));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->responses(0).response_range().kvs(0).value(), "11");
}

TEST_F(TxnTest, CompactionEarlierInTheSameBatchCounts) {
  // Members group log entries into apply batches differently; a compaction must affect the
  // requests after it the same way whether or not they share its batch.
  auto batch = s_->kv().BeginApply();
  ASSERT_TRUE(s_->kv().Compact(*batch, 4).ok());
  auto txn = batch->Begin();
  EXPECT_EQ(txn->CompactRev(), 4);
  auto r = ExecuteTxn(*txn, MakeTxn({}, {OpPut("x", "1"), OpRange("a", "", 3)}));
  EXPECT_EQ(r.status(), errors::Compacted());
  auto range = ExecuteRange(*txn, testutil::RangeReq("a", "", 2));
  EXPECT_EQ(range.status(), errors::Compacted());
  EXPECT_FALSE(txn->changed());
  batch->End(std::move(txn));
  ASSERT_TRUE(s_->kv().Commit(*batch, 1000).ok());
  EXPECT_EQ(s_->kv().CompactRev(), 4);
}

TEST_F(TxnTest, PutPrevKvAndIgnoreFlagsInsideTransactions) {
  auto put = testutil::PutReq("b", "21");
  put.set_prev_kv(true);
  put.set_ignore_lease(true);
  RequestOp op;
  *op.mutable_request_put() = put;
  auto resp = MustTxn(MakeTxn({}, {op}));
  const auto& p = resp.responses(0).response_put();
  ASSERT_TRUE(p.has_prev_kv());
  EXPECT_EQ(p.prev_kv().value(), "20");
  auto now = s_->Range(testutil::RangeReq("b"));
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->kvs(0).value(), "21");
  EXPECT_EQ(now->kvs(0).lease(), 9);
}

TEST_F(TxnTest, DeleteInsideTransactionWithPrevKv) {
  auto del = testutil::DeleteReq("a", "c");
  del.set_prev_kv(true);
  RequestOp op;
  *op.mutable_request_delete_range() = del;
  auto resp = MustTxn(MakeTxn({}, {op}));
  const auto& d = resp.responses(0).response_delete_range();
  EXPECT_EQ(d.deleted(), 2);
  ASSERT_EQ(d.prev_kvs_size(), 2);
  EXPECT_EQ(d.prev_kvs(0).key(), "a");
  EXPECT_EQ(d.prev_kvs(1).value(), "20");
  EXPECT_EQ(d.header().revision(), 6);
}

TEST_F(TxnTest, TxnKinds) {
  EXPECT_TRUE(IsTxnReadOnly(MakeTxn({}, {})));
  EXPECT_TRUE(
      IsTxnReadOnly(MakeTxn({VersionCmp("a", Compare::EQUAL, 1)}, {OpRange("a")}, {OpRange("b")})));
  EXPECT_FALSE(IsTxnReadOnly(MakeTxn({}, {OpRange("a")}, {OpPut("b", "1")})));
  EXPECT_FALSE(IsTxnReadOnly(MakeTxn({}, {OpDelete("a")})));
  // A nested transaction counts as a write, even if it only reads (as in etcd).
  EXPECT_FALSE(IsTxnReadOnly(MakeTxn({}, {OpTxn(MakeTxn({}, {OpRange("a")}))})));
  auto ser = OpRange("a");
  ser.mutable_request_range()->set_serializable(true);
  EXPECT_TRUE(IsTxnSerializable(MakeTxn({}, {ser}, {ser})));
  EXPECT_FALSE(IsTxnSerializable(MakeTxn({}, {ser}, {OpRange("b")})));
  EXPECT_FALSE(IsTxnSerializable(MakeTxn({}, {OpPut("a", "1")})));
}

// --- request checks ---------------------------------------------------------------------------

std::vector<RequestOp> Puts(int n, const std::string& prefix = "k") {
  std::vector<RequestOp> ops;
  for (int i = 0; i < n; ++i) ops.push_back(OpPut(prefix + std::to_string(i), "v"));
  return ops;
}

TEST(CheckTxnRequestTest, OperationLimit) {
  EXPECT_TRUE(CheckTxnRequest(MakeTxn({}, Puts(128)), 128).ok());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, Puts(129)), 128), errors::TooManyOps());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {}, Puts(129)), 128).message(),
            "etcdserver: too many operations in txn request");
  std::vector<Compare> compares;
  for (int i = 0; i < 129; ++i) compares.push_back(VersionCmp("k", Compare::EQUAL, 0));
  EXPECT_EQ(CheckTxnRequest(MakeTxn(compares, {}), 128), errors::TooManyOps());
  // The count is the largest of compares, success and failure, not their sum.
  compares.resize(100);
  EXPECT_TRUE(CheckTxnRequest(MakeTxn(compares, Puts(100, "s"), Puts(100, "f")), 128).ok());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, Puts(3)), 2), errors::TooManyOps());
}

TEST(CheckTxnRequestTest, NestedTransactionsShareTheBudget) {
  // A nested transaction may use what its parent leaves: max_txn_ops - parent's count.
  TxnRequest inner = MakeTxn({}, Puts(5, "in"));
  std::vector<RequestOp> outer = Puts(5, "out");
  outer.push_back(OpTxn(inner));  // the parent counts 6
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, outer), 10), errors::TooManyOps());
  EXPECT_TRUE(CheckTxnRequest(MakeTxn({}, outer), 11).ok());
  // The budget applies to the failure branch's nested transactions too.
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {}, outer), 10), errors::TooManyOps());
}

TEST(CheckTxnRequestTest, EmptyKeysAndEmptyOps) {
  EXPECT_EQ(CheckTxnRequest(MakeTxn({VersionCmp("", Compare::EQUAL, 0)}, {}), 128),
            errors::EmptyKey());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpPut("", "v")}), 128), errors::EmptyKey());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {}, {OpRange("")}), 128), errors::EmptyKey());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpDelete("")}), 128), errors::EmptyKey());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpTxn(MakeTxn({}, {OpPut("", "v")}))}), 128),
            errors::EmptyKey());
  EXPECT_EQ(
      CheckTxnRequest(MakeTxn({}, {OpTxn(MakeTxn({VersionCmp("", Compare::EQUAL, 0)}, {}))}), 128),
      errors::EmptyKey());
  auto iv = OpPut("k", "v");
  iv.mutable_request_put()->set_ignore_value(true);
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {iv}), 128), errors::ValueProvided());
  // An operation with nothing set is rejected as etcd does.
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {RequestOp()}), 128), errors::KeyNotFound());
  // The operation count is checked before the keys.
  std::vector<RequestOp> many = Puts(129);
  many.push_back(OpPut("", "v"));
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, many), 128), errors::TooManyOps());
}

TEST(CheckTxnRequestTest, DuplicateKeysAtOneLevel) {
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpPut("a", "1"), OpPut("a", "2")}), 128),
            errors::DuplicateKey());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpPut("a", "1"), OpPut("a", "2")}), 128).message(),
            "etcdserver: duplicate key given in txn request");
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {}, {OpPut("a", "1"), OpPut("a", "2")}), 128),
            errors::DuplicateKey());
  // A put and a delete of the same key, or of a key inside the deleted range.
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpDelete("a"), OpPut("a", "1")}), 128),
            errors::DuplicateKey());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpPut("b", "1"), OpDelete("a", "c")}), 128),
            errors::DuplicateKey());
  EXPECT_TRUE(CheckTxnRequest(MakeTxn({}, {OpPut("c", "1"), OpDelete("a", "c")}), 128).ok());
  EXPECT_TRUE(CheckTxnRequest(MakeTxn({}, {OpPut("a", "1"), OpDelete("a\x01")}), 128).ok());
  // Deletes may overlap each other, ranges may read anything, and success and failure are
  // checked separately.
  EXPECT_TRUE(CheckTxnRequest(MakeTxn({}, {OpDelete("a", "c"), OpDelete("b")}), 128).ok());
  EXPECT_TRUE(CheckTxnRequest(MakeTxn({}, {OpPut("a", "1"), OpRange("a")}), 128).ok());
  EXPECT_TRUE(CheckTxnRequest(MakeTxn({}, {OpPut("a", "1")}, {OpPut("a", "2")}), 128).ok());
  // etcd's interval check treats a "\0" range end literally: a delete from "a" to the end does
  // not conflict with a put of "b".
  EXPECT_TRUE(
      CheckTxnRequest(MakeTxn({}, {OpDelete("a", std::string(1, '\0')), OpPut("b", "1")}), 128)
          .ok());
}

TEST(CheckTxnRequestTest, DuplicateKeysAcrossNestedTransactions) {
  // The two branches of a nested transaction may write the same key: only one runs.
  TxnRequest both = MakeTxn({}, {OpPut("a", "then")}, {OpPut("a", "else")});
  EXPECT_TRUE(CheckTxnRequest(MakeTxn({}, {OpTxn(both)}), 128).ok());
  // But not a key the parent writes.
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpPut("a", "p"), OpTxn(both)}), 128),
            errors::DuplicateKey());
  TxnRequest then_only = MakeTxn({}, {OpPut("b", "1")});
  TxnRequest else_only = MakeTxn({}, {}, {OpPut("b", "1")});
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpPut("b", "p"), OpTxn(else_only)}), 128),
            errors::DuplicateKey());
  // Two nested transactions at one level must not write the same key...
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpTxn(then_only), OpTxn(then_only)}), 128),
            errors::DuplicateKey());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpTxn(then_only), OpTxn(else_only)}), 128),
            errors::DuplicateKey());
  // ...even when the later one writes it in both branches: only the branches of one
  // transaction are exempt from each other.
  TxnRequest both_b = MakeTxn({}, {OpPut("b", "t")}, {OpPut("b", "e")});
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpTxn(then_only), OpTxn(both_b)}), 128),
            errors::DuplicateKey());
  EXPECT_TRUE(CheckTxnRequest(MakeTxn({}, {OpTxn(both), OpTxn(both_b)}), 128).ok());
  // A parent's delete covers the nested puts, and a nested delete covers the parent's puts.
  TxnRequest del = MakeTxn({}, {OpDelete("a", "z")});
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpDelete("a", "c"), OpTxn(then_only)}), 128),
            errors::DuplicateKey());
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpTxn(del), OpPut("m", "1")}), 128),
            errors::DuplicateKey());
  TxnRequest del_else = MakeTxn({}, {}, {OpDelete("m")});
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {OpTxn(del_else), OpPut("m", "1")}), 128),
            errors::DuplicateKey());
  // Inside one nested branch the same rules hold.
  TxnRequest dup_inside = MakeTxn({}, {OpPut("q", "1"), OpPut("q", "2")});
  EXPECT_EQ(CheckTxnRequest(MakeTxn({}, {}, {OpTxn(dup_inside)}), 128), errors::DuplicateKey());
  // A nested delete and a nested put in different branches do not conflict.
  TxnRequest put_then_del_else = MakeTxn({}, {OpPut("k", "1")}, {OpDelete("k")});
  EXPECT_TRUE(CheckTxnRequest(MakeTxn({}, {OpTxn(put_then_del_else)}), 128).ok());
}

}  // namespace
}  // namespace etcdw::mvcc

namespace etcdw::mvcc {
namespace {

etcdserverpb::LeaseGrantRequest LeaseGrantOf(int64_t id, int64_t ttl) {
  etcdserverpb::LeaseGrantRequest r;
  r.set_id(id);
  r.set_ttl(ttl);
  return r;
}

// etcd 3.4's lessor.Grant: ID 0 first, then the largest TTL; a TTL below the minimum (zero and
// negative ones too) is raised to it.
TEST(CheckLeaseGrantTest, AsEtcdsLessorGrants) {
  EXPECT_EQ(CheckLeaseGrant(LeaseGrantOf(0, 10), 2).status(), errors::LeaseNotFound());
  EXPECT_EQ(CheckLeaseGrant(LeaseGrantOf(0, kMaxLeaseTtl + 1), 2).status(),
            errors::LeaseNotFound());
  EXPECT_EQ(CheckLeaseGrant(LeaseGrantOf(7, kMaxLeaseTtl + 1), 2).status(),
            errors::LeaseTTLTooLarge());
  EXPECT_EQ(CheckLeaseGrant(LeaseGrantOf(7, INT64_MAX), 2).status(), errors::LeaseTTLTooLarge());
  EXPECT_EQ(CheckLeaseGrant(LeaseGrantOf(7, kMaxLeaseTtl), 2).value(), kMaxLeaseTtl);
  EXPECT_EQ(CheckLeaseGrant(LeaseGrantOf(7, 60), 2).value(), 60);
  EXPECT_EQ(CheckLeaseGrant(LeaseGrantOf(-7, 1), 2).value(), 2);
  EXPECT_EQ(CheckLeaseGrant(LeaseGrantOf(7, 0), 2).value(), 2);
  EXPECT_EQ(CheckLeaseGrant(LeaseGrantOf(7, -5), 2).value(), 2);
  EXPECT_EQ(CheckLeaseGrant(LeaseGrantOf(7, INT64_MIN), 2).value(), 2);
}

// etcd 3.4's updateCompactRev: at or below the compaction revision (-1 before any) is Compacted,
// above the current revision FutureRev.
TEST(CheckCompactionTest, AsEtcdsUpdateCompactRev) {
  EXPECT_TRUE(CheckCompaction(0, -1, 1).ok());  // compacting at 0 is accepted once
  EXPECT_TRUE(CheckCompaction(1, -1, 1).ok());
  EXPECT_EQ(CheckCompaction(-1, -1, 1), errors::Compacted());
  EXPECT_EQ(CheckCompaction(INT64_MIN, -1, 1), errors::Compacted());
  EXPECT_EQ(CheckCompaction(0, 0, 5), errors::Compacted());
  EXPECT_EQ(CheckCompaction(3, 3, 5), errors::Compacted());
  EXPECT_TRUE(CheckCompaction(4, 3, 5).ok());
  EXPECT_TRUE(CheckCompaction(5, 3, 5).ok());
  EXPECT_EQ(CheckCompaction(6, 3, 5), errors::FutureRev());
  EXPECT_EQ(CheckCompaction(INT64_MAX, 3, 5), errors::FutureRev());
  // Compacted first, as etcd: a revision both compacted and ahead cannot happen, but the order
  // is etcd's.
  EXPECT_EQ(CheckCompaction(2, 9, 1), errors::Compacted());
}

}  // namespace
}  // namespace etcdw::mvcc
