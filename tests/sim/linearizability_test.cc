// The linearizability checker on histories whose verdict is known.
#include "sim/linearizability.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace etcdw::sim {
namespace {

constexpr uint64_t kX = kNeverReturned;

Operation Put(uint64_t id, int64_t v, uint64_t call, uint64_t ret, const std::string& key = "a") {
  return Operation{id, OpKind::kPut, key, v, call, ret};
}
Operation Get(uint64_t id, int64_t v, uint64_t call, uint64_t ret, const std::string& key = "a") {
  return Operation{id, OpKind::kGet, key, v, call, ret};
}

// A compare-and-set from `expected` to `v`; `ok` is what it answered (ignored when ret is kX).
Operation Cas(uint64_t id, int64_t expected, int64_t v, bool ok, uint64_t call, uint64_t ret) {
  Operation op{id, OpKind::kCas, "a", v, call, ret};
  op.expected = expected;
  op.succeeded = ok;
  return op;
}

Verdict Check(const std::vector<Operation>& h) { return CheckLinearizable(h).verdict; }

TEST(Linearizability, EmptyAndSequential) {
  EXPECT_EQ(Check({}), Verdict::kLinearizable);
  EXPECT_EQ(Check({Get(1, 0, 1, 2)}), Verdict::kLinearizable);
  EXPECT_EQ(Check({Put(1, 5, 1, 2), Get(2, 5, 3, 4), Put(3, 6, 5, 6), Get(4, 6, 7, 8)}),
            Verdict::kLinearizable);
}

TEST(Linearizability, ReadOfInitialValueAfterWriteIsStale) {
  EXPECT_EQ(Check({Put(1, 5, 1, 2), Get(2, 0, 3, 4)}), Verdict::kNotLinearizable);
}

TEST(Linearizability, StaleReadOfOverwrittenValue) {
  EXPECT_EQ(Check({Put(1, 1, 1, 2), Put(2, 2, 3, 4), Get(3, 1, 5, 6)}), Verdict::kNotLinearizable);
}

TEST(Linearizability, ReadOfValueNeverWritten) {
  EXPECT_EQ(Check({Put(1, 1, 1, 2), Get(2, 7, 3, 4)}), Verdict::kNotLinearizable);
}

TEST(Linearizability, ReadBeforeTheWriteWasCalled) {
  EXPECT_EQ(Check({Get(1, 5, 1, 2), Put(2, 5, 3, 4)}), Verdict::kNotLinearizable);
}

// A get concurrent with a put may see either value.
TEST(Linearizability, ConcurrentReadSeesEither) {
  EXPECT_EQ(Check({Put(1, 5, 1, 4), Get(2, 0, 2, 3)}), Verdict::kLinearizable);
  EXPECT_EQ(Check({Put(1, 5, 1, 4), Get(2, 5, 2, 3)}), Verdict::kLinearizable);
  EXPECT_EQ(Check({Put(1, 5, 2, 3), Get(2, 5, 1, 4)}), Verdict::kLinearizable);
}

// Two sequential gets, both concurrent with a put: once one saw the new value, a later one must
// not see the old one (the new-old inversion).
TEST(Linearizability, NewOldInversion) {
  EXPECT_EQ(Check({Put(1, 5, 1, 10), Get(2, 5, 2, 3), Get(3, 0, 4, 5)}), Verdict::kNotLinearizable);
  EXPECT_EQ(Check({Put(1, 5, 1, 10), Get(2, 0, 2, 3), Get(3, 5, 4, 5)}), Verdict::kLinearizable);
}

// Concurrent puts may land in either order, but every later reader sees the same last one.
TEST(Linearizability, ConcurrentWritesOrderConsistently) {
  EXPECT_EQ(Check({Put(1, 1, 1, 4), Put(2, 2, 2, 3), Get(3, 1, 5, 6), Get(4, 1, 7, 8)}),
            Verdict::kLinearizable);
  EXPECT_EQ(Check({Put(1, 1, 1, 4), Put(2, 2, 2, 3), Get(3, 1, 5, 6), Get(4, 2, 7, 8)}),
            Verdict::kNotLinearizable);
}

// An indeterminate put may take effect at any point after its call, or never.
TEST(Linearizability, IndeterminatePut) {
  // Never observed.
  EXPECT_EQ(Check({Put(1, 5, 1, kX), Get(2, 0, 2, 3), Get(3, 0, 10, 11)}), Verdict::kLinearizable);
  // Observed long after its call.
  EXPECT_EQ(Check({Put(1, 5, 1, kX), Get(2, 0, 2, 3), Get(3, 5, 100, 101)}),
            Verdict::kLinearizable);
  // Took effect between two completed writes.
  EXPECT_EQ(
      Check({Put(1, 5, 1, kX), Put(2, 6, 2, 3), Get(3, 5, 4, 5), Put(4, 7, 6, 7), Get(5, 7, 8, 9)}),
      Verdict::kLinearizable);
  // Observed, then unobserved: it cannot take effect twice.
  EXPECT_EQ(Check({Put(1, 5, 1, kX), Get(2, 5, 2, 3), Get(3, 0, 4, 5)}), Verdict::kNotLinearizable);
  // Observed before its call.
  EXPECT_EQ(Check({Get(1, 5, 1, 2), Put(2, 5, 3, kX)}), Verdict::kNotLinearizable);
  // A later write overwrote it; seeing it again afterwards is stale.
  EXPECT_EQ(Check({Put(1, 5, 1, kX), Get(2, 5, 2, 3), Put(3, 6, 4, 5), Get(4, 5, 6, 7)}),
            Verdict::kNotLinearizable);
}

TEST(Linearizability, CompareAndSet) {
  // Succeeds on the value it compared, fails on another.
  EXPECT_EQ(Check({Cas(1, 0, 5, true, 1, 2), Cas(2, 0, 6, false, 3, 4), Cas(3, 5, 7, true, 5, 6),
                   Get(4, 7, 7, 8)}),
            Verdict::kLinearizable);
  // Two CASes from the same value cannot both succeed.
  EXPECT_EQ(Check({Cas(1, 0, 5, true, 1, 2), Cas(2, 0, 6, true, 3, 4)}), Verdict::kNotLinearizable);
  // Concurrent, both succeeding: one after the other, each comparing the other's start.
  EXPECT_EQ(Check({Cas(1, 0, 5, true, 1, 4), Cas(2, 5, 6, true, 2, 3), Get(3, 6, 5, 6)}),
            Verdict::kLinearizable);
  // A failure on the value the register holds is wrong.
  EXPECT_EQ(Check({Put(1, 5, 1, 2), Cas(2, 5, 6, false, 3, 4)}), Verdict::kNotLinearizable);
  // A success that a later read does not show is lost.
  EXPECT_EQ(Check({Cas(1, 0, 5, true, 1, 2), Get(2, 0, 3, 4)}), Verdict::kNotLinearizable);
}

TEST(Linearizability, IndeterminateCompareAndSet) {
  // Never observed: it may not have happened.
  EXPECT_EQ(Check({Cas(1, 0, 5, false, 1, kX), Get(2, 0, 2, 3)}), Verdict::kLinearizable);
  // Observed by a read: it happened.
  EXPECT_EQ(Check({Cas(1, 0, 5, false, 1, kX), Get(2, 5, 2, 3)}), Verdict::kLinearizable);
  // Its taking effect is what explains another CAS's failure on the same start value: kept, and
  // found to have written.
  EXPECT_EQ(Check({Cas(1, 0, 5, false, 1, kX), Cas(2, 0, 6, false, 2, 3)}), Verdict::kLinearizable);
  // It cannot have written when the register did not hold what it compared.
  EXPECT_EQ(Check({Put(1, 9, 1, 2), Cas(2, 0, 5, false, 3, kX), Get(3, 5, 4, 5)}),
            Verdict::kNotLinearizable);
  // An unknown put explains a failed CAS too.
  EXPECT_EQ(Check({Put(1, 5, 1, kX), Cas(2, 0, 6, false, 2, 3)}), Verdict::kLinearizable);
  // Observed, then gone without another write: impossible.
  EXPECT_EQ(Check({Cas(1, 0, 5, false, 1, kX), Get(2, 5, 2, 3), Get(3, 0, 4, 5)}),
            Verdict::kNotLinearizable);
}

// Keys are independent registers; a violation on one key is found and named.
TEST(Linearizability, KeysArePartitioned) {
  std::vector<Operation> h = {Put(1, 1, 1, 2, "a"), Put(2, 2, 3, 4, "b"), Get(3, 1, 5, 6, "a"),
                              Get(4, 0, 7, 8, "a")};
  // Key b alone is fine; key a reads 1 then the initial value.
  CheckResult r = CheckLinearizable(h);
  EXPECT_EQ(r.verdict, Verdict::kNotLinearizable);
  EXPECT_EQ(r.key, "a");
  EXPECT_NE(r.detail.find("get 0"), std::string::npos) << r.detail;
  // A get of key b finding a's value is wrong for b only.
  EXPECT_EQ(Check({Put(1, 1, 1, 2, "a"), Get(2, 1, 3, 4, "b")}), Verdict::kNotLinearizable);
  EXPECT_EQ(Check({Put(1, 1, 1, 2, "a"), Get(2, 0, 3, 4, "b")}), Verdict::kLinearizable);
}

// A large history built from a sequential execution with overlapping intervals (so it is
// linearizable by construction) is accepted quickly; changing one read's value into a value
// overwritten long before makes it non-linearizable.
TEST(Linearizability, LargeHistories) {
  std::mt19937_64 rng(7);
  std::vector<Operation> h;
  int64_t value = 0;
  uint64_t t = 0;
  int64_t old_value = 0;
  for (uint64_t id = 1; id <= 3000; ++id) {
    // Each operation takes effect at time 10*id; its interval stretches around that point.
    uint64_t at = 10 * id + 100;
    uint64_t call = at - std::uniform_int_distribution<uint64_t>(1, 25)(rng);
    uint64_t ret = at + std::uniform_int_distribution<uint64_t>(1, 25)(rng);
    t = ret;
    if (id % 3 == 0) {
      value = static_cast<int64_t>(id);
      if (id == 300) old_value = value;
      h.push_back(Put(id, value, call, id % 7 == 0 ? kX : ret));
    } else {
      h.push_back(Get(id, value, call, ret));
    }
  }
  CheckResult ok = CheckLinearizable(h);
  EXPECT_EQ(ok.verdict, Verdict::kLinearizable) << ok.detail;
  // A read at the end that returns a value overwritten 2700 operations earlier.
  h.push_back(Get(99999, old_value, t + 10, t + 11));
  CheckResult bad = CheckLinearizable(h);
  EXPECT_EQ(bad.verdict, Verdict::kNotLinearizable);
}

// The search gives up (kUnknown) instead of running away when its budget is exhausted.
TEST(Linearizability, BudgetExhaustion) {
  std::vector<Operation> h;
  // Many fully concurrent puts and a read that rules out every order: exponential search.
  for (uint64_t id = 1; id <= 40; ++id) h.push_back(Put(id, static_cast<int64_t>(id), 1, 100));
  h.push_back(Get(41, 1000, 1, 100));
  CheckResult r = CheckLinearizable(h, 1000);
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
  EXPECT_GE(r.steps, 1000u);
}

}  // namespace
}  // namespace etcdw::sim
