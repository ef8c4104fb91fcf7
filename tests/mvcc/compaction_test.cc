#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/mvcc/compactor.h"
#include "etcdw/mvcc/hash.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/storage/versioned_key.h"
#include "mvcc/mvcc_test_util.h"

namespace etcdw::mvcc {
namespace {

using testutil::RangeReq;
using testutil::Store;
using Keys = std::vector<std::string>;

// Every stored version of every key: "key@rev" for puts, "key@rev-" for tombstones.
std::vector<std::string> StoredVersions(storage::Engine& e) {
  std::vector<std::string> out;
  auto it = e.NewIterator(storage::Column::kKeys);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    out.push_back(std::string(storage::UserKeyOf(it->key())) + "@" +
                  std::to_string(storage::VersionOf(it->key())) + (it->value().empty() ? "-" : ""));
  }
  return out;
}

// The revision log: "main.sub:p|d:key".
std::vector<std::string> RevisionLog(storage::Engine& e) {
  std::vector<std::string> out;
  auto it = e.NewIterator(storage::Column::kRevisions);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    Revision r = DecodeRevisionKey(it->key());
    out.push_back(std::to_string(r.main) + "." + std::to_string(r.sub) + ":" +
                  std::string(it->value().substr(0, 1)) + ":" + std::string(it->value().substr(1)));
  }
  return out;
}

// Every range answer at every revision in [from, to], serialized, for before/after comparisons.
std::vector<std::string> AllAnswers(Store& s, int64_t from, int64_t to) {
  std::vector<std::string> out;
  for (int64_t rev = from; rev <= to; ++rev) {
    auto r = s.Range(RangeReq(std::string(1, '\0'), std::string(1, '\0'), rev));
    EXPECT_TRUE(r.ok()) << rev << ": " << r.status().ToString();
    if (r.ok()) {
      r->mutable_header()->clear_revision();
      out.push_back(r->SerializeAsString());
    }
  }
  return out;
}

class CompactionTest : public testing::Test {
 protected:
  void SetUp() override {
    s_ = Store::InMemory();
    ASSERT_NE(s_, nullptr);
    s_->Put("a", "a2");   // 2
    s_->Put("b", "b3");   // 3
    s_->Put("a", "a4");   // 4
    s_->Delete("b");      // 5
    s_->Put("c", "c6");   // 6
    s_->Put("a", "a7");   // 7
    s_->Put("d", "d8");   // 8
    s_->Delete("d");      // 9
    s_->Put("c", "c10");  // 10
  }
  KvStore& kv() { return s_->kv(); }
  std::unique_ptr<Store> s_;
};

TEST_F(CompactionTest, CompactRequestErrors) {
  EXPECT_EQ(s_->Compact(11), errors::FutureRev());
  EXPECT_EQ(kv().CompactRev(), -1);
  ASSERT_TRUE(s_->Compact(5).ok());
  EXPECT_EQ(kv().CompactRev(), 5);
  EXPECT_EQ(kv().ScheduledCompactRev(), 5);
  EXPECT_EQ(s_->Compact(5), errors::Compacted());  // the same revision again
  EXPECT_EQ(s_->Compact(3), errors::Compacted());
  EXPECT_EQ(s_->Compact(5).message(), "etcdserver: mvcc: required revision has been compacted");
  EXPECT_TRUE(s_->Compact(10).ok());  // the current revision may be compacted
  EXPECT_EQ(kv().CompactRev(), 10);
  EXPECT_EQ(kv().Rev(), 10);  // compaction does not change the revision
}

TEST_F(CompactionTest, TwoCompactionsInOneBatch) {
  auto batch = kv().BeginApply();
  ASSERT_TRUE(kv().Compact(*batch, 4).ok());
  EXPECT_EQ(kv().Compact(*batch, 4), errors::Compacted());
  ASSERT_TRUE(kv().Compact(*batch, 6).ok());
  EXPECT_EQ(batch->compaction(), 6);
  // Not visible before the commit.
  EXPECT_EQ(kv().CompactRev(), -1);
  ASSERT_TRUE(kv().Commit(*batch, 100).ok());
  EXPECT_EQ(kv().CompactRev(), 6);
}

TEST_F(CompactionTest, CompactionUpToAWriteEarlierInTheBatch) {
  auto batch = kv().BeginApply();
  auto txn = batch->Begin();
  ASSERT_TRUE(ExecutePut(*txn, testutil::PutReq("e", "e11")).ok());
  batch->End(std::move(txn));
  EXPECT_EQ(kv().Compact(*batch, 12), errors::FutureRev());
  EXPECT_TRUE(kv().Compact(*batch, 11).ok());
  ASSERT_TRUE(kv().Commit(*batch, 100).ok());
  EXPECT_EQ(kv().CompactRev(), 11);
}

TEST_F(CompactionTest, ReadsBelowTheCompactionRevisionFail) {
  ASSERT_TRUE(s_->Compact(6).ok());
  EXPECT_EQ(s_->Value("a", 5), "error: etcdserver: mvcc: required revision has been compacted");
  EXPECT_EQ(s_->Value("a", 6), "a4");
  EXPECT_EQ(s_->Value("a", 7), "a7");
}

TEST_F(CompactionTest, ViewsTakenBeforeACompactionKeepTheirRevisions) {
  auto view = kv().NewReadView();
  ASSERT_TRUE(s_->Compact(6).ok());
  ASSERT_TRUE(Compactor::CompactTo(kv(), 6).ok());
  auto r = ExecuteRange(*view, RangeReq("b", "", 3));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->kvs_size(), 1);
  EXPECT_EQ(r->kvs(0).value(), "b3");
}

TEST_F(CompactionTest, PhysicalCompactionKeepsTheNewestVersionAtOrBelowTheRevision) {
  const auto answers = AllAnswers(*s_, 6, 10);
  ASSERT_TRUE(s_->Compact(6).ok());
  ASSERT_TRUE(Compactor::CompactTo(kv(), 6).ok());
  EXPECT_EQ(kv().FinishedCompactRev(), 6);
  // a: a4 (newest <= 6) survives, a2 goes; a7 is above. b: deleted at 5, everything goes.
  // c: c6 survives, c10 above. d: untouched (all above 6).
  EXPECT_EQ(StoredVersions(s_->engine()), (Keys{"a@7", "a@4", "c@10", "c@6", "d@9-", "d@8"}));
  // History from the compaction revision on is intact.
  EXPECT_EQ(AllAnswers(*s_, 6, 10), answers);
  EXPECT_EQ(s_->Value("b", 6), "<none>");
  EXPECT_EQ(s_->Value("d", 8), "d8");
}

TEST_F(CompactionTest, ADeletionAtTheCompactionRevisionGoesWithItsKey) {
  ASSERT_TRUE(s_->Compact(9).ok());
  ASSERT_TRUE(Compactor::CompactTo(kv(), 9).ok());
  EXPECT_EQ(StoredVersions(s_->engine()), (Keys{"a@7", "c@10", "c@6"}));
  EXPECT_EQ(s_->Keys(std::string(1, '\0'), std::string(1, '\0'), 9), (Keys{"a", "c"}));
}

TEST_F(CompactionTest, RevisionLogIsTrimmedBelowTheCompactionRevision) {
  ASSERT_TRUE(s_->Compact(6).ok());
  ASSERT_TRUE(Compactor::CompactTo(kv(), 6).ok());
  // Kept: the put at 6 (a watch may start there) and everything after.
  EXPECT_EQ(RevisionLog(s_->engine()),
            (Keys{"6.0:p:c", "7.0:p:a", "8.0:p:d", "9.0:d:d", "10.0:p:c"}));
  ASSERT_TRUE(s_->Compact(9).ok());
  ASSERT_TRUE(Compactor::CompactTo(kv(), 9).ok());
  // A deletion at the compaction revision is dropped with its version.
  EXPECT_EQ(RevisionLog(s_->engine()), (Keys{"10.0:p:c"}));
}

TEST_F(CompactionTest, IncrementalCompactionsEqualOneBigCompaction) {
  auto other = Store::InMemory();
  // Replay the same history into a second store and compact it in one step.
  other->Put("a", "a2");
  other->Put("b", "b3");
  other->Put("a", "a4");
  other->Delete("b");
  other->Put("c", "c6");
  other->Put("a", "a7");
  other->Put("d", "d8");
  other->Delete("d");
  other->Put("c", "c10");
  for (int64_t rev : {3, 5, 8}) {
    ASSERT_TRUE(s_->Compact(rev).ok());
    ASSERT_TRUE(Compactor::CompactTo(kv(), rev).ok());
  }
  ASSERT_TRUE(other->Compact(8).ok());
  ASSERT_TRUE(Compactor::CompactTo(other->kv(), 8).ok());
  EXPECT_EQ(StoredVersions(s_->engine()), StoredVersions(other->engine()));
  EXPECT_EQ(StoredVersions(s_->engine()), (Keys{"a@7", "c@10", "c@6", "d@9-", "d@8"}));
  EXPECT_EQ(RevisionLog(s_->engine()), RevisionLog(other->engine()));
}

TEST_F(CompactionTest, KeysRecreatedAfterACompactedDeletionAreKept) {
  s_->Put("b", "b11");  // 11: b was deleted at 5
  ASSERT_TRUE(s_->Compact(10).ok());
  ASSERT_TRUE(Compactor::CompactTo(kv(), 10).ok());
  EXPECT_EQ(s_->Value("b"), "b11");
  auto r = s_->Range(RangeReq("b"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kvs(0).create_revision(), 11);
  EXPECT_EQ(r->kvs(0).version(), 1);
  // Writing after compaction keeps create revision and version of surviving keys.
  s_->Put("a", "a12");
  r = s_->Range(RangeReq("a"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kvs(0).create_revision(), 2);
  EXPECT_EQ(r->kvs(0).version(), 4);
}

TEST(CompactionChunksTest, ManyChangesAcrossSeveralChunks) {
  auto s = Store::InMemory();
  std::mt19937 rng(3);
  // Over 2,500 revision-log entries: several compaction chunks.
  for (int i = 0; i < 2600; ++i) {
    std::string key = "k" + std::to_string(rng() % 40);
    if (rng() % 7 == 0) {
      s->Delete(key);
    } else {
      s->Put(key, "v" + std::to_string(i));
    }
  }
  const int64_t rev = s->kv().Rev();
  const int64_t at = rev - 300;
  const auto answers = AllAnswers(*s, at, rev);
  auto hash_before = HashKV(s->kv(), 0);
  ASSERT_TRUE(hash_before.ok());
  ASSERT_TRUE(s->Compact(at).ok());
  auto hash_logical = HashKV(s->kv(), 0);
  ASSERT_TRUE(Compactor::CompactTo(s->kv(), at).ok());
  EXPECT_EQ(AllAnswers(*s, at, rev), answers);
  auto hash_after = HashKV(s->kv(), 0);
  ASSERT_TRUE(hash_logical.ok() && hash_after.ok());
  EXPECT_EQ(hash_logical->hash, hash_after->hash);
  // Nothing at or below `at` is left but the newest live version of each key.
  std::map<std::string, int> old_versions;
  auto it = s->engine().NewIterator(storage::Column::kKeys);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (static_cast<int64_t>(storage::VersionOf(it->key())) > at) continue;
    EXPECT_FALSE(it->value().empty()) << "tombstone at or below the compaction revision";
    EXPECT_EQ(++old_versions[std::string(storage::UserKeyOf(it->key()))], 1);
  }
  auto rit = s->engine().NewIterator(storage::Column::kRevisions);
  rit->SeekToFirst();
  ASSERT_TRUE(rit->Valid());
  EXPECT_GE(DecodeRevisionKey(rit->key()).main, at);
}

// --- the compactor thread -------------------------------------------------------------------

TEST_F(CompactionTest, CompactorThreadRunsScheduledCompactions) {
  Compactor compactor(kv());
  ASSERT_TRUE(s_->Compact(6).ok());
  compactor.Schedule(6);
  ASSERT_TRUE(compactor.WaitFinished(6).ok());
  EXPECT_EQ(kv().FinishedCompactRev(), 6);
  EXPECT_EQ(StoredVersions(s_->engine()), (Keys{"a@7", "a@4", "c@10", "c@6", "d@9-", "d@8"}));
  ASSERT_TRUE(s_->Compact(9).ok());
  compactor.Schedule(9);
  compactor.Schedule(7);  // stale: already covered by the later compaction
  ASSERT_TRUE(compactor.WaitFinished(9).ok());
  EXPECT_EQ(kv().FinishedCompactRev(), 9);
  EXPECT_TRUE(compactor.WaitFinished(8).ok());  // an earlier revision is finished too
}

TEST(CompactorConcurrencyTest, CompactsWhileWritesAndReadsContinue) {
  auto s = Store::InMemory();
  Compactor compactor(s->kv());
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      auto view = s->kv().NewReadView();
      // Every revision the view allows is readable and shows all ten keys once written.
      int64_t rev = std::max<int64_t>(view->CompactRev(), view->Rev() - 5);
      auto r = ExecuteRange(*view, RangeReq("k", "l", std::max<int64_t>(rev, 1)));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (rev > 11) {
        EXPECT_EQ(r->count(), 10);
      }
    }
  });
  for (int i = 0; i < 1500; ++i) {
    s->Put("k" + std::to_string(i % 10), std::to_string(i));
    if (i % 100 == 99) {
      int64_t target = s->kv().Rev() - 20;
      ASSERT_TRUE(s->Compact(target).ok());
      compactor.Schedule(target);
    }
  }
  const int64_t last = s->kv().ScheduledCompactRev();
  ASSERT_TRUE(compactor.WaitFinished(last).ok());
  done = true;
  reader.join();
  EXPECT_EQ(s->kv().FinishedCompactRev(), last);
  // Only the survivor at the compaction revision and the newer versions remain.
  size_t versions = 0;
  auto it = s->engine().NewIterator(storage::Column::kKeys);
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++versions;
  EXPECT_LE(versions, 10u + static_cast<size_t>(s->kv().Rev() - last));
}

TEST_F(CompactionTest, CompactorStopsWithoutWork) {
  auto compactor = std::make_unique<Compactor>(kv());
  compactor.reset();  // joins an idle worker
  EXPECT_EQ(kv().FinishedCompactRev(), -1);
}

TEST(CompactorRestartTest, UnfinishedCompactionResumesAfterRestart) {
  testutil::TempDir dir;
  auto s = Store::OnDisk(dir.path() + "/db");
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 5; ++i) s->Put("k", std::to_string(i));  // revs 2..6
  s->Put("gone", "x");                                         // 7
  s->Delete("gone");                                           // 8
  ASSERT_TRUE(s->Compact(8).ok());                             // acknowledged, never physically run
  EXPECT_GT(s->kv().ScheduledCompactRev(), s->kv().FinishedCompactRev());
  s->Reopen();
  EXPECT_EQ(s->kv().CompactRev(), 8);  // readers treat it as done at once
  EXPECT_EQ(s->kv().ScheduledCompactRev(), 8);
  EXPECT_EQ(s->kv().FinishedCompactRev(), -1);
  {
    Compactor compactor(s->kv());  // picks up the unfinished work
    ASSERT_TRUE(compactor.WaitFinished(8).ok());
  }
  EXPECT_EQ(s->kv().FinishedCompactRev(), 8);
  EXPECT_EQ(StoredVersions(s->engine()), (Keys{"k@6"}));
  s->Reopen();
  EXPECT_EQ(s->kv().FinishedCompactRev(), 8);
  EXPECT_EQ(s->Value("k"), "4");
}

// --- hashes -------------------------------------------------------------------------------------

TEST_F(CompactionTest, HashKVIsStableAcrossPhysicalCompaction) {
  ASSERT_TRUE(s_->Compact(6).ok());
  auto before = HashKV(kv(), 0);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->rev, 10);
  EXPECT_EQ(before->compact_rev, 6);
  auto before_at = HashKV(kv(), 8);
  ASSERT_TRUE(before_at.ok());
  ASSERT_TRUE(Compactor::CompactTo(kv(), 6).ok());
  auto after = HashKV(kv(), 0);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->hash, before->hash);
  auto after_at = HashKV(kv(), 8);
  ASSERT_TRUE(after_at.ok());
  EXPECT_EQ(after_at->hash, before_at->hash);
  EXPECT_NE(after_at->hash, after->hash);  // revisions 9 and 10 changed things
}

TEST_F(CompactionTest, HashKVErrors) {
  EXPECT_EQ(HashKV(kv(), 11).status(), errors::FutureRev());
  ASSERT_TRUE(s_->Compact(6).ok());
  EXPECT_EQ(HashKV(kv(), 6).status(), errors::Compacted());
  EXPECT_EQ(HashKV(kv(), 5).status(), errors::Compacted());
  EXPECT_TRUE(HashKV(kv(), 7).ok());
  auto cur = HashKV(kv(), 0);
  auto explicit_cur = HashKV(kv(), 10);
  ASSERT_TRUE(cur.ok() && explicit_cur.ok());
  EXPECT_EQ(cur->hash, explicit_cur->hash);
}

TEST(HashTest, IdenticalHistoriesHashEqualAndDifferentOnesDont) {
  auto build = [](const std::string& last_value) {
    auto s = Store::InMemory();
    s->Put("a", "1");
    s->Put("b", "2");
    s->Delete("a");
    s->Put("b", last_value);
    return s;
  };
  auto x = build("3"), y = build("3"), z = build("4");
  auto hx = HashKV(x->kv(), 0), hy = HashKV(y->kv(), 0), hz = HashKV(z->kv(), 0);
  ASSERT_TRUE(hx.ok() && hy.ok() && hz.ok());
  EXPECT_EQ(hx->hash, hy->hash);
  EXPECT_NE(hx->hash, hz->hash);
  // At a revision before the difference the hashes agree again.
  auto hx3 = HashKV(x->kv(), 4), hz3 = HashKV(z->kv(), 4);
  ASSERT_TRUE(hx3.ok() && hz3.ok());
  EXPECT_EQ(hx3->hash, hz3->hash);
  auto ax = HashAll(x->engine()), ay = HashAll(y->engine()), az = HashAll(z->engine());
  ASSERT_TRUE(ax.ok() && ay.ok() && az.ok());
  EXPECT_EQ(*ax, *ay);
  EXPECT_NE(*ax, *az);
}

TEST(HashTest, CompactedAndUncompactedMembersAgree) {
  // One member compacted physically, the other only logically: same HashKV.
  auto build = [] {
    auto s = Store::InMemory();
    for (int i = 0; i < 30; ++i) s->Put("k" + std::to_string(i % 4), std::to_string(i));
    s->Delete("k1");
    s->Put("k9", "x");
    return s;
  };
  auto x = build(), y = build();
  ASSERT_TRUE(x->Compact(20).ok());
  ASSERT_TRUE(y->Compact(20).ok());
  ASSERT_TRUE(Compactor::CompactTo(x->kv(), 20).ok());
  auto hx = HashKV(x->kv(), 0), hy = HashKV(y->kv(), 0);
  ASSERT_TRUE(hx.ok() && hy.ok());
  EXPECT_EQ(hx->hash, hy->hash);
  EXPECT_EQ(hx->compact_rev, 20);
}

}  // namespace
}  // namespace etcdw::mvcc
