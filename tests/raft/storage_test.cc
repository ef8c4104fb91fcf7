// MemoryStorage: the reference Storage. Its log starts with a dummy entry standing for the last
// compacted entry (or the snapshot), so Term() works one index below FirstIndex().
#include <gtest/gtest.h>

#include <vector>

#include "raft/raft_test_util.h"

namespace etcdw::raft {
namespace {

using namespace rafttest;  // NOLINT(google-build-using-namespace)

// Storage whose dummy entry is (3, 3) followed by the given entries.
std::unique_ptr<MemoryStorage> StorageFrom3(const std::vector<Entry>& rest) {
  auto s = std::make_unique<MemoryStorage>();
  EXPECT_TRUE(s->ApplySnapshot(Snap(3, 3, {1, 2, 3})).ok());
  EXPECT_TRUE(s->Append(rest).ok());
  return s;
}

std::vector<Entry> Log(const MemoryStorage& s) {
  auto r = s.Entries(s.FirstIndex(), s.LastIndex() + 1, UINT64_MAX);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : std::vector<Entry>{};
}

TEST(MemoryStorage, Empty) {
  MemoryStorage s;
  EXPECT_EQ(s.FirstIndex(), 1u);
  EXPECT_EQ(s.LastIndex(), 0u);
  EXPECT_EQ(s.Term(0).value(), 0u);
  EXPECT_EQ(s.Term(1).status().code(), Code::kNotFound);
  auto init = s.InitialState();
  ASSERT_TRUE(init.ok());
  EXPECT_TRUE(IsEmptyHardState(init->first));
  EXPECT_EQ(init->second.voters_size(), 0);
  EXPECT_EQ(s.Snapshot()->metadata().index(), 0u);
}

TEST(MemoryStorage, Term) {
  auto s = StorageFrom3(Terms(4, {4, 5}));
  EXPECT_TRUE(IsCompacted(s->Term(2).status()));
  EXPECT_EQ(s->Term(3).value(), 3u);
  EXPECT_EQ(s->Term(4).value(), 4u);
  EXPECT_EQ(s->Term(5).value(), 5u);
  EXPECT_EQ(s->Term(6).status().code(), Code::kNotFound);
}

TEST(MemoryStorage, Entries) {
  auto s = StorageFrom3(Terms(4, {4, 5, 6}));
  EXPECT_TRUE(IsCompacted(s->Entries(2, 6, UINT64_MAX).status()));
  EXPECT_TRUE(IsCompacted(s->Entries(3, 4, UINT64_MAX).status()));
  EXPECT_TRUE(EntriesEq(s->Entries(4, 5, UINT64_MAX).value(), {E(4, 4)}));
  EXPECT_TRUE(EntriesEq(s->Entries(4, 6, UINT64_MAX).value(), Terms(4, {4, 5})));
  EXPECT_TRUE(EntriesEq(s->Entries(4, 7, UINT64_MAX).value(), Terms(4, {4, 5, 6})));
  EXPECT_TRUE(s->Entries(5, 5, UINT64_MAX).value().empty());
  EXPECT_EQ(s->Entries(4, 8, UINT64_MAX).status().code(), Code::kNotFound);
  // Size limits: always at least one entry; otherwise stop before exceeding the limit.
  uint64_t one = E(4, 4).ByteSizeLong();
  uint64_t two = one + E(5, 5).ByteSizeLong();
  uint64_t three = two + E(6, 6).ByteSizeLong();
  EXPECT_TRUE(EntriesEq(s->Entries(4, 7, 0).value(), {E(4, 4)}));
  EXPECT_TRUE(EntriesEq(s->Entries(4, 7, one).value(), {E(4, 4)}));
  EXPECT_TRUE(EntriesEq(s->Entries(4, 7, two - 1).value(), {E(4, 4)}));
  EXPECT_TRUE(EntriesEq(s->Entries(4, 7, two).value(), Terms(4, {4, 5})));
  EXPECT_TRUE(EntriesEq(s->Entries(4, 7, three - 1).value(), Terms(4, {4, 5})));
  EXPECT_TRUE(EntriesEq(s->Entries(4, 7, three).value(), Terms(4, {4, 5, 6})));
}

TEST(MemoryStorage, FirstAndLastIndex) {
  auto s = StorageFrom3(Terms(4, {4, 5}));
  EXPECT_EQ(s->FirstIndex(), 4u);
  EXPECT_EQ(s->LastIndex(), 5u);
  ASSERT_TRUE(s->Append({E(6, 5)}).ok());
  EXPECT_EQ(s->LastIndex(), 6u);
  ASSERT_TRUE(s->Compact(4).ok());
  EXPECT_EQ(s->FirstIndex(), 5u);
  EXPECT_EQ(s->LastIndex(), 6u);
}

TEST(MemoryStorage, Compact) {
  struct Case {
    uint64_t index;
    bool compacted;
    uint64_t dummy_term;
    size_t remaining;  // entries after the dummy
  };
  std::vector<Case> cases = {{2, true, 3, 2}, {3, true, 3, 2}, {4, false, 4, 1}, {5, false, 5, 0}};
  for (const auto& c : cases) {
    auto s = StorageFrom3(Terms(4, {4, 5}));
    Status st = s->Compact(c.index);
    EXPECT_EQ(IsCompacted(st), c.compacted) << c.index << ": " << st.ToString();
    uint64_t dummy = s->FirstIndex() - 1;
    EXPECT_EQ(s->Term(dummy).value(), c.dummy_term) << c.index;
    EXPECT_EQ(s->LastIndex() - dummy, c.remaining) << c.index;
  }
  auto s = StorageFrom3(Terms(4, {4, 5}));
  EXPECT_FALSE(s->Compact(6).ok());  // beyond the last entry
  EXPECT_EQ(s->LastIndex(), 5u);
}

TEST(MemoryStorage, CreateSnapshot) {
  raftpb::ConfState cs;
  cs.add_voters(1);
  cs.add_voters(2);
  cs.add_learners(3);
  auto s = StorageFrom3(Terms(4, {4, 5}));
  auto snap = s->CreateSnapshot(4, &cs);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->metadata().index(), 4u);
  EXPECT_EQ(snap->metadata().term(), 4u);
  EXPECT_EQ(snap->metadata().conf_state().learners_size(), 1);
  EXPECT_EQ(s->Snapshot()->metadata().index(), 4u);
  // The conf state is kept when none is given.
  snap = s->CreateSnapshot(5, nullptr);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->metadata().term(), 5u);
  EXPECT_EQ(snap->metadata().conf_state().voters_size(), 2);
  // Not older than the current one, not beyond the log.
  EXPECT_FALSE(s->CreateSnapshot(5, nullptr).ok());
  EXPECT_FALSE(s->CreateSnapshot(4, nullptr).ok());
  ASSERT_TRUE(s->Append({E(6, 5)}).ok());
  EXPECT_FALSE(s->CreateSnapshot(7, nullptr).ok());
  EXPECT_EQ(s->Snapshot()->metadata().index(), 5u);
}

TEST(MemoryStorage, CreateSnapshotBelowCompactedPrefixFails) {
  // Entries compacted past the last snapshot: a snapshot there has no term to record.
  auto s = StorageFrom3(Terms(4, {4, 5, 6}));
  ASSERT_TRUE(s->Compact(5).ok());
  auto snap = s->CreateSnapshot(4, nullptr);
  EXPECT_FALSE(snap.ok());
  EXPECT_TRUE(IsCompacted(snap.status()));
  EXPECT_EQ(s->Snapshot()->metadata().index(), 3u);
  // At the compaction point itself it works (the dummy entry has the term).
  snap = s->CreateSnapshot(5, nullptr);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->metadata().term(), 5u);
}

TEST(MemoryStorage, Append) {
  struct Case {
    std::vector<Entry> ents;
    bool ok;
    std::vector<Entry> want;  // after the dummy (3, 3)
  };
  std::vector<Case> cases = {
      {Terms(3, {3, 4, 5}), true, Terms(4, {4, 5})},
      {Terms(3, {3, 6, 6}), true, Terms(4, {6, 6})},
      {Terms(3, {3, 4, 5, 5}), true, Terms(4, {4, 5, 5})},
      // the compacted part of the new entries is skipped, the conflicting suffix replaced
      {Terms(2, {3, 3, 5}), true, Terms(4, {5})},
      // truncate the existing entries and append
      {{E(4, 5)}, true, {E(4, 5)}},
      // direct append
      {{E(6, 5)}, true, Terms(4, {4, 5, 5})},
      // a gap is refused
      {{E(7, 5)}, false, Terms(4, {4, 5})},
      // everything already compacted: nothing to do
      {Terms(1, {1, 1}), true, Terms(4, {4, 5})},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    auto s = StorageFrom3(Terms(4, {4, 5}));
    EXPECT_EQ(s->Append(cases[i].ents).ok(), cases[i].ok) << "case " << i;
    EXPECT_TRUE(EntriesEq(Log(*s), cases[i].want)) << "case " << i;
  }
}

TEST(MemoryStorage, ApplySnapshot) {
  MemoryStorage s;
  ASSERT_TRUE(s.Append(Terms(1, {1, 1, 2})).ok());
  ASSERT_TRUE(s.ApplySnapshot(Snap(4, 4, {1, 2, 3})).ok());
  EXPECT_EQ(s.FirstIndex(), 5u);
  EXPECT_EQ(s.LastIndex(), 4u);
  EXPECT_EQ(s.Term(4).value(), 4u);
  EXPECT_TRUE(IsCompacted(s.Term(3).status()));
  EXPECT_EQ(s.InitialState()->second.voters_size(), 3);
  // An older (or the same) snapshot is refused and changes nothing.
  EXPECT_FALSE(s.ApplySnapshot(Snap(3, 3, {1})).ok());
  EXPECT_FALSE(s.ApplySnapshot(Snap(4, 4, {1})).ok());
  EXPECT_EQ(s.InitialState()->second.voters_size(), 3);
  // Entries continue after it.
  ASSERT_TRUE(s.Append({E(5, 4)}).ok());
  EXPECT_EQ(s.LastIndex(), 5u);
}

TEST(MemoryStorage, HardState) {
  MemoryStorage s;
  s.SetHardState(HS(3, 2, 1));
  auto init = s.InitialState();
  ASSERT_TRUE(init.ok());
  EXPECT_TRUE(HardStateEqual(init->first, HS(3, 2, 1)));
}

TEST(MemoryStorage, LimitSize) {
  auto ents = Terms(1, {1, 1, 1});
  uint64_t one = ents[0].ByteSizeLong();
  auto a = ents;
  LimitSize(a, 0);
  EXPECT_EQ(a.size(), 1u);
  auto b = ents;
  LimitSize(b, 2 * one);
  EXPECT_EQ(b.size(), 2u);
  auto c = ents;
  LimitSize(c, UINT64_MAX);
  EXPECT_EQ(c.size(), 3u);
  std::vector<Entry> none;
  LimitSize(none, 0);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(EntriesSize(ents), 3 * one);
}

}  // namespace
}  // namespace etcdw::raft
