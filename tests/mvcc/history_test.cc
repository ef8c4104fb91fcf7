#include "etcdw/mvcc/history.h"

#include <gtest/gtest.h>

#include <atomic>

#include "etcdw/mvcc/compactor.h"
#include "mvcc/mvcc_test_util.h"

namespace etcdw::mvcc {
namespace {

using testutil::OpDelete;
using testutil::OpPut;
using testutil::Store;

// "PUT k=v (prev p)" / "DELETE k (prev p)" descriptions of a history's events, by revision.
std::vector<std::string> Describe(const HistoryResult& h) {
  std::vector<std::string> out;
  for (const auto& rc : h.revisions) {
    for (const auto& ev : rc.events) {
      std::string d = std::to_string(rc.rev) + " ";
      if (ev.type() == mvccpb::Event::PUT) {
        d += "PUT " + ev.kv().key() + "=" + ev.kv().value();
        EXPECT_EQ(ev.kv().mod_revision(), rc.rev);
      } else {
        d += "DELETE " + ev.kv().key();
        EXPECT_EQ(ev.kv().mod_revision(), rc.rev);
        EXPECT_EQ(ev.kv().value(), "");
      }
      if (ev.has_prev_kv()) d += " (prev " + ev.prev_kv().value() + ")";
      out.push_back(d);
    }
  }
  return out;
}

class HistoryTest : public testing::Test {
 protected:
  void SetUp() override {
    s_ = Store::InMemory();
    ASSERT_NE(s_, nullptr);
    s_->Put("a", "1");           // 2
    s_->Put("b", "1");           // 3
    s_->Put("a", "2");           // 4
    s_->Delete("b");             // 5
    etcdserverpb::TxnRequest t;  // 6: three events in one revision
    *t.add_success() = OpPut("c", "1");
    *t.add_success() = OpPut("a", "3");
    *t.add_success() = OpDelete("zz");  // deletes nothing: no event
    *t.add_success() = OpPut("d", "1");
    ASSERT_TRUE(s_->Txn(t).ok());
    s_->Put("b", "again");  // 7: recreated after a deletion
  }
  HistoryResult Read(int64_t from, int64_t to, size_t max_events = 1000) {
    auto h = ReadHistory(s_->kv(), from, to, max_events);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h.value() : HistoryResult();
  }
  std::unique_ptr<Store> s_;
};

TEST_F(HistoryTest, EventsWithPreviousVersions) {
  auto h = Read(1, 7);
  EXPECT_FALSE(h.compacted);
  EXPECT_EQ(h.compact_rev, -1);
  EXPECT_EQ(h.next_rev, 8);
  EXPECT_EQ(Describe(h), (std::vector<std::string>{
                             "2 PUT a=1", "3 PUT b=1", "4 PUT a=2 (prev 1)", "5 DELETE b (prev 1)",
                             "6 PUT c=1", "6 PUT a=3 (prev 2)", "6 PUT d=1",
                             "7 PUT b=again",  // the previous version is a deletion
                         }));
  ASSERT_EQ(h.revisions.size(), 6u);
  EXPECT_EQ(h.revisions[4].rev, 6);
  EXPECT_EQ(h.revisions[4].events.size(), 3u);
  // Full key-values: create revision and version.
  const auto& a3 = h.revisions[4].events[1];
  EXPECT_EQ(a3.kv().create_revision(), 2);
  EXPECT_EQ(a3.kv().version(), 3);
  EXPECT_EQ(a3.prev_kv().mod_revision(), 4);
}

TEST_F(HistoryTest, MatchesTheEventsTheWritesProduced) {
  // The live events of a write equal what ReadHistory reconstructs for its revision.
  auto p = s_->Put("a", "4");  // 8
  auto live = s_->last_events();
  auto h = Read(8, 8);
  ASSERT_EQ(h.revisions.size(), 1u);
  ASSERT_EQ(live.size(), 1u);
  ASSERT_EQ(h.revisions[0].events.size(), live[0].events.size());
  ASSERT_TRUE(h.revisions[0].events[0].has_prev_kv());
  EXPECT_EQ(h.revisions[0].events[0].SerializeAsString(),
            s_->LastEventWithPrev(0, 0).SerializeAsString());
  s_->Delete("a", "c");  // 9: a and b
  live = s_->last_events();
  h = Read(9, 9);
  ASSERT_EQ(h.revisions.size(), 1u);
  ASSERT_EQ(h.revisions[0].events.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(h.revisions[0].events[i].SerializeAsString(), live[0].events[i].SerializeAsString());
  }
}

TEST_F(HistoryTest, SubRanges) {
  EXPECT_EQ(Describe(Read(4, 5)),
            (std::vector<std::string>{"4 PUT a=2 (prev 1)", "5 DELETE b (prev 1)"}));
  auto h = Read(4, 5);
  EXPECT_EQ(h.next_rev, 6);
  auto one = Read(7, 7);
  EXPECT_EQ(Describe(one), (std::vector<std::string>{"7 PUT b=again"}));
  EXPECT_EQ(one.next_rev, 8);
}

TEST_F(HistoryTest, EmptyRanges) {
  auto past_end = Read(8, 7);
  EXPECT_TRUE(past_end.revisions.empty());
  EXPECT_EQ(past_end.next_rev, 8);
  auto backwards = Read(5, 3);
  EXPECT_TRUE(backwards.revisions.empty());
  EXPECT_EQ(backwards.next_rev, 5);
  // Revision 1 has no changes.
  auto first = Read(1, 1);
  EXPECT_TRUE(first.revisions.empty());
  EXPECT_EQ(first.next_rev, 2);
}

TEST_F(HistoryTest, MaxEventsStopsAtARevisionBoundary) {
  auto h = Read(2, 7, 1);
  EXPECT_EQ(Describe(h), (std::vector<std::string>{"2 PUT a=1"}));
  EXPECT_EQ(h.next_rev, 3);
  // The limit is reached inside revision 6: the whole revision is returned.
  h = Read(5, 7, 2);
  EXPECT_EQ(h.revisions.size(), 2u);
  EXPECT_EQ(h.revisions[1].rev, 6);
  EXPECT_EQ(h.revisions[1].events.size(), 3u);
  EXPECT_EQ(h.next_rev, 7);
  // Continuing from next_rev reads the rest without gaps or repeats.
  std::vector<std::string> all;
  int64_t from = 1;
  int rounds = 0;
  while (from <= 7 && ++rounds < 20) {
    auto part = Read(from, 7, 2);
    ASSERT_GT(part.next_rev, from);
    for (auto& d : Describe(part)) all.push_back(d);
    from = part.next_rev;
  }
  EXPECT_EQ(all, Describe(Read(1, 7)));
}

TEST_F(HistoryTest, ZeroMaxEventsReadsNothing) {
  auto h = Read(2, 7, 0);
  EXPECT_TRUE(h.revisions.empty());
  EXPECT_EQ(h.next_rev, 2) << "nothing was read, so nothing may be skipped";
}

TEST_F(HistoryTest, CompactedHistory) {
  ASSERT_TRUE(s_->Compact(4).ok());
  auto below = Read(3, 7);
  EXPECT_TRUE(below.compacted);
  EXPECT_EQ(below.compact_rev, 4);
  EXPECT_TRUE(below.revisions.empty());
  auto at = Read(4, 7);
  EXPECT_FALSE(at.compacted);
  EXPECT_EQ(at.compact_rev, 4);
  // The events from the compaction revision on remain. The versions older than it are
  // compacted, so the event at the compaction revision has no prev_kv (as etcd, which reads
  // prev_kv at the revision before the event, finds it compacted).
  const std::vector<std::string> expected = {
      "4 PUT a=2",          "5 DELETE b (prev 1)", "6 PUT c=1",
      "6 PUT a=3 (prev 2)", "6 PUT d=1",           "7 PUT b=again",
  };
  EXPECT_EQ(Describe(at), expected);
  // The answer does not depend on whether the physical compaction has run.
  ASSERT_TRUE(Compactor::CompactTo(s_->kv(), 4).ok());
  auto after = Read(4, 7);
  EXPECT_FALSE(after.compacted);
  EXPECT_EQ(Describe(after), expected);
  EXPECT_EQ(after.next_rev, 8);
}

TEST_F(HistoryTest, HistoryAfterCompactingADeletion) {
  ASSERT_TRUE(s_->Compact(5).ok());
  // The deletion at the compaction revision goes with its key's versions.
  const std::vector<std::string> expected = {
      "6 PUT c=1",
      "6 PUT a=3 (prev 2)",
      "6 PUT d=1",
      "7 PUT b=again",
  };
  auto before = Read(5, 7);
  EXPECT_EQ(Describe(before), expected);
  EXPECT_EQ(before.next_rev, 8);
  ASSERT_TRUE(Compactor::CompactTo(s_->kv(), 5).ok());
  auto h = Read(5, 7);
  EXPECT_EQ(Describe(h), expected);
  EXPECT_EQ(h.next_rev, 8);
  auto only = Read(5, 5);
  EXPECT_TRUE(only.revisions.empty());
  EXPECT_EQ(only.next_rev, 6);
}

TEST(HistoryCompactionTest, ReadableWhileACompactionIsInterrupted) {
  // A key deleted at the compaction revision, first seen early in the revision log: the
  // compactor removes its versions in the first chunk and the log entry of the deletion in a
  // later one. Reading history between the two must not fail.
  auto s = Store::InMemory();
  s->Put("x", "1");  // 2
  for (int i = 0; i < 1200; ++i) s->Put("k" + std::to_string(i % 10), std::to_string(i));
  s->Delete("x");        // 1203
  s->Put("y", "after");  // 1204
  const int64_t c = 1203;
  ASSERT_EQ(s->kv().Rev(), 1204);
  ASSERT_TRUE(s->Compact(c).ok());
  auto before = ReadHistory(s->kv(), c, 1204, 100);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  std::atomic<bool> stop{true};  // stop after the first chunk
  Status st = Compactor::CompactTo(s->kv(), c, &stop);
  ASSERT_EQ(st.code(), Code::kCanceled) << st.ToString();
  EXPECT_EQ(s->kv().FinishedCompactRev(), -1);
  auto during = ReadHistory(s->kv(), c, 1204, 100);
  ASSERT_TRUE(during.ok()) << during.status().ToString();
  ASSERT_TRUE(Compactor::CompactTo(s->kv(), c).ok());
  auto after = ReadHistory(s->kv(), c, 1204, 100);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(Describe(*before), (std::vector<std::string>{"1204 PUT y=after"}));
  EXPECT_EQ(Describe(*during), Describe(*before));
  EXPECT_EQ(Describe(*after), Describe(*before));
}

}  // namespace
}  // namespace etcdw::mvcc
