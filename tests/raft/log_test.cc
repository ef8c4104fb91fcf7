// The Raft log (storage + unstable tail) and its unstable part.
#include "etcdw/raft/log.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "raft/raft_test_util.h"

namespace etcdw::raft {
namespace {

using namespace rafttest;  // NOLINT(google-build-using-namespace)

constexpr uint64_t kNoLimit = UINT64_MAX;

// ---------------------------------------------------------------------------------------------
// Unstable

TEST(Unstable, MaybeFirstIndex) {
  Unstable u{.entries = {E(5, 1)}, .offset = 5};
  EXPECT_FALSE(u.MaybeFirstIndex());
  Unstable empty{.offset = 0};
  EXPECT_FALSE(empty.MaybeFirstIndex());
  Unstable with_snap{.snapshot = Snap(4, 1, {1}), .entries = {E(5, 1)}, .offset = 5};
  EXPECT_EQ(with_snap.MaybeFirstIndex(), 5u);
  Unstable only_snap{.snapshot = Snap(4, 1, {1}), .offset = 5};
  EXPECT_EQ(only_snap.MaybeFirstIndex(), 5u);
}

TEST(Unstable, MaybeLastIndex) {
  Unstable u{.entries = {E(5, 1)}, .offset = 5};
  EXPECT_EQ(u.MaybeLastIndex(), 5u);
  Unstable with_snap{.snapshot = Snap(4, 1, {1}), .entries = {E(5, 1)}, .offset = 5};
  EXPECT_EQ(with_snap.MaybeLastIndex(), 5u);
  Unstable only_snap{.snapshot = Snap(4, 1, {1}), .offset = 5};
  EXPECT_EQ(only_snap.MaybeLastIndex(), 4u);
  Unstable empty{.offset = 0};
  EXPECT_FALSE(empty.MaybeLastIndex());
}

TEST(Unstable, MaybeTerm) {
  Unstable u{.entries = {E(5, 1)}, .offset = 5};
  EXPECT_EQ(u.MaybeTerm(5), 1u);
  EXPECT_FALSE(u.MaybeTerm(6));
  EXPECT_FALSE(u.MaybeTerm(4));
  Unstable with_snap{.snapshot = Snap(4, 1, {1}), .entries = {E(5, 1)}, .offset = 5};
  EXPECT_EQ(with_snap.MaybeTerm(5), 1u);
  EXPECT_FALSE(with_snap.MaybeTerm(6));
  EXPECT_EQ(with_snap.MaybeTerm(4), 1u);
  EXPECT_FALSE(with_snap.MaybeTerm(3));
  Unstable only_snap{.snapshot = Snap(4, 1, {1}), .offset = 5};
  EXPECT_FALSE(only_snap.MaybeTerm(5));
  EXPECT_EQ(only_snap.MaybeTerm(4), 1u);
  EXPECT_FALSE(only_snap.MaybeTerm(3));
  Unstable empty{.offset = 0};
  EXPECT_FALSE(empty.MaybeTerm(5));
}

TEST(Unstable, Restore) {
  Unstable u{.snapshot = Snap(4, 1, {1}), .entries = {E(5, 1)}, .offset = 5};
  u.Restore(Snap(6, 2, {1}));
  EXPECT_EQ(u.offset, 7u);
  EXPECT_TRUE(u.entries.empty());
  ASSERT_TRUE(u.snapshot);
  EXPECT_EQ(u.snapshot->metadata().index(), 6u);
}

TEST(Unstable, StableTo) {
  struct Case {
    std::vector<Entry> entries;
    uint64_t offset;
    std::optional<raftpb::Snapshot> snap;
    uint64_t index, term;
    uint64_t want_offset;
    size_t want_len;
  };
  std::vector<Case> cases = {
      {{}, 0, std::nullopt, 5, 1, 0, 0},
      {{E(5, 1)}, 5, std::nullopt, 5, 1, 6, 0},  // stable to the first entry
      {Terms(5, {1, 1}), 5, std::nullopt, 5, 1, 6, 1},
      {{E(6, 2)}, 6, std::nullopt, 6, 1, 6, 1},  // the term changed meanwhile: keep it
      {{E(5, 1)}, 5, std::nullopt, 4, 1, 5, 1},  // below the unstable range
      {{E(5, 1)}, 5, std::nullopt, 4, 2, 5, 1},
      // with a snapshot
      {{E(5, 1)}, 5, Snap(4, 1, {1}), 5, 1, 6, 0},
      {Terms(5, {1, 1}), 5, Snap(4, 1, {1}), 5, 1, 6, 1},
      {{E(6, 2)}, 6, Snap(5, 1, {1}), 6, 1, 6, 1},
      {{E(5, 1)}, 5, Snap(4, 1, {1}), 4, 1, 5, 1},  // the snapshot's index: not an entry
      {{E(5, 2)}, 5, Snap(4, 2, {1}), 4, 1, 5, 1},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    Unstable u{.snapshot = c.snap, .entries = c.entries, .offset = c.offset};
    u.StableTo(c.index, c.term);
    EXPECT_EQ(u.offset, c.want_offset) << "case " << i;
    EXPECT_EQ(u.entries.size(), c.want_len) << "case " << i;
  }
}

TEST(Unstable, TruncateAndAppend) {
  struct Case {
    std::vector<Entry> entries;
    uint64_t offset;
    std::vector<Entry> append;
    uint64_t want_offset;
    std::vector<Entry> want;
  };
  std::vector<Case> cases = {
      // append to the end
      {{E(5, 1)}, 5, Terms(6, {1, 1}), 5, Terms(5, {1, 1, 1})},
      // replace all unstable entries
      {{E(5, 1)}, 5, Terms(5, {2, 2}), 5, Terms(5, {2, 2})},
      {{E(5, 1)}, 5, Terms(4, {2, 2, 2}), 4, Terms(4, {2, 2, 2})},
      // truncate the suffix and append
      {Terms(5, {1, 1, 1}), 5, {E(6, 2)}, 5, Terms(5, {1, 2})},
      {Terms(5, {1, 1, 1}), 5, Terms(7, {2, 2}), 5, Terms(5, {1, 1, 2, 2})},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    Unstable u{.entries = c.entries, .offset = c.offset};
    u.TruncateAndAppend(c.append);
    EXPECT_EQ(u.offset, c.want_offset) << "case " << i;
    EXPECT_TRUE(EntriesEq(u.entries, c.want)) << "case " << i;
  }
}

TEST(Unstable, SliceOutOfBoundsIsFatal) {
  Unstable u{.entries = Terms(5, {1, 1}), .offset = 5};
  EXPECT_TRUE(EntriesEq(u.Slice(5, 7), Terms(5, {1, 1})));
  EXPECT_THROW(u.Slice(4, 6), std::logic_error);
  EXPECT_THROW(u.Slice(5, 8), std::logic_error);
  EXPECT_THROW(u.Slice(6, 5), std::logic_error);
}

// ---------------------------------------------------------------------------------------------
// Log

struct LogFixture {
  explicit LogFixture(const std::vector<Entry>& stored = {}, uint64_t max_next_size = kNoLimit) {
    EXPECT_TRUE(storage.Append(stored).ok());
    log = std::make_unique<Log>(&storage, max_next_size);
  }
  MemoryStorage storage;
  std::unique_ptr<Log> log;
};

TEST(Log, FindConflict) {
  auto previous = Terms(1, {1, 2, 3});
  struct Case {
    std::vector<Entry> ents;
    uint64_t want;
  };
  std::vector<Case> cases = {
      // no conflict, empty
      {{}, 0},
      // no conflict
      {Terms(1, {1, 2, 3}), 0},
      {Terms(2, {2, 3}), 0},
      {Terms(3, {3}), 0},
      // no conflict, but new entries
      {Terms(1, {1, 2, 3, 4, 4}), 4},
      {Terms(2, {2, 3, 4, 4}), 4},
      {Terms(3, {3, 4, 4}), 4},
      {Terms(4, {4, 4}), 4},
      // conflicts with existing entries
      {Terms(1, {4, 4}), 1},
      {Terms(2, {1, 4, 4}), 2},
      {Terms(3, {1, 2, 4, 4}), 3},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    LogFixture f;
    f.log->Append(previous);
    EXPECT_EQ(f.log->FindConflict(cases[i].ents), cases[i].want) << "case " << i;
  }
}

TEST(Log, FindConflictByTerm) {
  struct Case {
    std::vector<Entry> ents;  // after a dummy entry at index ents[0].index - 1
    uint64_t index, term;
    uint64_t want_index, want_term;
  };
  std::vector<Case> cases = {
      // log: [1/2 2/2 3/5 4/5 5/5]
      {Terms(1, {2, 2, 5, 5, 5}), 100, 2, 100, 0},  // beyond the log: the hint is unchanged
      {Terms(1, {2, 2, 5, 5, 5}), 5, 6, 5, 5},     {Terms(1, {2, 2, 5, 5, 5}), 5, 5, 5, 5},
      {Terms(1, {2, 2, 5, 5, 5}), 5, 4, 2, 2},     {Terms(1, {2, 2, 5, 5, 5}), 5, 2, 2, 2},
      {Terms(1, {2, 2, 5, 5, 5}), 5, 1, 0, 0},     {Terms(1, {2, 2, 5, 5, 5}), 1, 2, 1, 2},
      {Terms(1, {2, 2, 5, 5, 5}), 1, 1, 0, 0},     {Terms(1, {2, 2, 5, 5, 5}), 0, 0, 0, 0},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    LogFixture f(cases[i].ents);
    auto [idx, term] = f.log->FindConflictByTerm(cases[i].index, cases[i].term);
    EXPECT_EQ(idx, cases[i].want_index) << "case " << i;
    EXPECT_EQ(term, cases[i].want_term) << "case " << i;
  }
  // With a compacted prefix (snapshot at 10, term 3): below it the term is unknown.
  MemoryStorage s;
  ASSERT_TRUE(s.ApplySnapshot(Snap(10, 3, {1})).ok());
  ASSERT_TRUE(s.Append(Terms(11, {3, 4, 4})).ok());
  Log l(&s, kNoLimit);
  EXPECT_EQ(l.FindConflictByTerm(13, 3), (std::pair<uint64_t, uint64_t>(11, 3)));
  EXPECT_EQ(l.FindConflictByTerm(13, 2).second, 0u);
  EXPECT_LE(l.FindConflictByTerm(13, 2).first, 10u);
}

TEST(Log, IsUpToDate) {
  LogFixture f;
  f.log->Append(Terms(1, {1, 2, 3}));
  struct Case {
    uint64_t last_index, term;
    bool want;
  };
  std::vector<Case> cases = {
      // greater term: up to date whatever the index
      {2, 4, true},
      {3, 4, true},
      {4, 4, true},
      // smaller term: never
      {2, 2, false},
      {3, 2, false},
      {4, 2, false},
      // equal term: the longer (or equal) log is
      {2, 3, false},
      {3, 3, true},
      {4, 3, true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(f.log->IsUpToDate(c.last_index, c.term), c.want) << c.last_index << "/" << c.term;
  }
}

TEST(Log, Append) {
  struct Case {
    std::vector<Entry> ents;
    uint64_t want_last;
    std::vector<Entry> want;
    uint64_t want_offset;  // of the unstable part
  };
  std::vector<Case> cases = {
      {{}, 2, Terms(1, {1, 2}), 3},
      {{E(3, 2)}, 3, Terms(1, {1, 2, 2}), 3},
      // conflicts with index 1
      {{E(1, 2)}, 1, Terms(1, {2}), 1},
      // conflicts with index 2
      {Terms(2, {3, 3}), 3, Terms(1, {1, 3, 3}), 2},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    LogFixture f(Terms(1, {1, 2}));
    EXPECT_EQ(f.log->Append(cases[i].ents), cases[i].want_last) << "case " << i;
    EXPECT_TRUE(EntriesEq(AllEntries(*f.log), cases[i].want)) << "case " << i;
    auto unstable = f.log->UnstableEntries();
    uint64_t offset = unstable.empty() ? f.log->LastIndex() + 1 : unstable.front().index();
    EXPECT_EQ(offset, cases[i].want_offset) << "case " << i;
  }
}

// MaybeAppend: append only when (index, log_term) matches; truncate from the first conflict;
// advance commit to min(leader commit, last new index); a conflict with a committed entry is a
// broken invariant.
TEST(Log, MaybeAppend) {
  auto previous = Terms(1, {1, 2, 3});
  const uint64_t last_index = 3, last_term = 3, commit = 1;
  struct Case {
    uint64_t log_term, index, committed;
    std::vector<Entry> ents;
    std::optional<uint64_t> want_last;
    uint64_t want_commit;
    bool fatal;
  };
  std::vector<Case> cases = {
      // not match: term is different
      {last_term - 1, last_index, last_index, {E(last_index + 1, 4)}, std::nullopt, commit, false},
      // not match: index out of bound
      {last_term, last_index + 1, last_index, {E(last_index + 2, 4)}, std::nullopt, commit, false},
      // match with the last existing entry
      {last_term, last_index, last_index, {}, last_index, last_index, false},
      {last_term, last_index, last_index + 1, {}, last_index, last_index, false},  // capped
      {last_term, last_index, last_index - 1, {}, last_index, last_index - 1, false},
      {last_term, last_index, 0, {}, last_index, commit, false},  // commit never decreases
      {0, 0, last_index, {}, 0, commit, false},
      {last_term,
       last_index,
       last_index,
       {E(last_index + 1, 4)},
       last_index + 1,
       last_index,
       false},
      {last_term,
       last_index,
       last_index + 1,
       {E(last_index + 1, 4)},
       last_index + 1,
       last_index + 1,
       false},
      {last_term,
       last_index,
       last_index + 2,
       {E(last_index + 1, 4)},
       last_index + 1,
       last_index + 1,
       false},
      {last_term, last_index, last_index + 2, Terms(last_index + 1, {4, 4}), last_index + 2,
       last_index + 2, false},
      // match with an entry in the middle
      {last_term - 1,
       last_index - 1,
       last_index,
       {E(last_index, 4)},
       last_index,
       last_index,
       false},
      {last_term - 2,
       last_index - 2,
       last_index,
       {E(last_index - 1, 4)},
       last_index - 1,
       last_index - 1,
       false},
      // conflict with a committed entry
      {last_term - 3, last_index - 3, last_index, {E(last_index - 2, 4)}, std::nullopt, 0, true},
      {last_term - 2, last_index - 2, last_index, Terms(last_index - 1, {4, 4}), last_index,
       last_index, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    LogFixture f;
    f.log->Append(previous);
    f.log->CommitTo(commit);
    if (c.fatal) {
      EXPECT_THROW(f.log->MaybeAppend(c.index, c.log_term, c.committed, c.ents), std::logic_error)
          << "case " << i;
      continue;
    }
    auto last = f.log->MaybeAppend(c.index, c.log_term, c.committed, c.ents);
    EXPECT_EQ(last, c.want_last) << "case " << i;
    EXPECT_EQ(f.log->committed(), c.want_commit) << "case " << i;
    if (last && !c.ents.empty()) {
      auto got =
          f.log->Slice(f.log->LastIndex() - c.ents.size() + 1, f.log->LastIndex() + 1, kNoLimit);
      ASSERT_TRUE(got.ok());
      EXPECT_TRUE(EntriesEq(got.value(), c.ents)) << "case " << i;
    }
  }
}

// Compacting the storage under the log keeps indexes and terms of the remaining entries and the
// unstable ones.
TEST(Log, CompactionSideEffects) {
  const uint64_t last_index = 1000, unstable_index = 750, last_term = last_index;
  LogFixture f;
  for (uint64_t i = 1; i <= unstable_index; ++i) ASSERT_TRUE(f.storage.Append({E(i, i)}).ok());
  f.log = std::make_unique<Log>(&f.storage, kNoLimit);
  for (uint64_t i = unstable_index; i < last_index; ++i) f.log->Append({E(i + 1, i + 1)});
  ASSERT_TRUE(f.log->MaybeCommit(last_index, last_term));
  f.log->AppliedTo(f.log->committed());
  const uint64_t offset = 500;
  ASSERT_TRUE(f.storage.Compact(offset).ok());
  EXPECT_EQ(f.log->LastIndex(), last_index);
  for (uint64_t j = offset; j <= last_index; ++j) EXPECT_EQ(f.log->TermOrZero(j), j);
  for (uint64_t j = offset; j <= last_index; ++j) EXPECT_TRUE(f.log->MatchTerm(j, j));
  auto unstable = f.log->UnstableEntries();
  ASSERT_EQ(unstable.size(), 250u);
  EXPECT_EQ(unstable[0].index(), 751u);
  uint64_t prev = f.log->LastIndex();
  f.log->Append({E(prev + 1, prev + 1)});
  EXPECT_EQ(f.log->LastIndex(), prev + 1);
  auto ents = f.log->Entries(f.log->LastIndex(), kNoLimit);
  ASSERT_TRUE(ents.ok());
  EXPECT_EQ(ents->size(), 1u);
  EXPECT_TRUE(IsCompacted(f.log->Entries(offset, kNoLimit).status()));
}

TEST(Log, NextCommittedEntries) {
  // Snapshot at 3, entries 4..6, committed 5.
  struct Case {
    uint64_t applied;
    bool has;
    std::vector<Entry> want;
  };
  std::vector<Case> cases = {
      {0, true, Terms(4, {1, 1})},
      {3, true, Terms(4, {1, 1})},
      {4, true, {E(5, 1)}},
      {5, false, {}},
  };
  for (const auto& c : cases) {
    MemoryStorage s;
    ASSERT_TRUE(s.ApplySnapshot(Snap(3, 1, {1})).ok());
    Log l(&s, kNoLimit);
    l.Append(Terms(4, {1, 1, 1}));
    ASSERT_TRUE(l.MaybeCommit(5, 1));
    if (c.applied > 3) l.AppliedTo(c.applied);
    EXPECT_EQ(l.HasNextCommittedEntries(), c.has) << c.applied;
    EXPECT_TRUE(EntriesEq(l.NextCommittedEntries(), c.want)) << c.applied;
  }
}

TEST(Log, NextCommittedEntriesRespectsSizeLimit) {
  auto ents = Terms(1, {1, 1, 1, 1});
  uint64_t two = ents[0].ByteSizeLong() * 2;
  LogFixture f(ents, two);
  f.log->CommitTo(4);
  EXPECT_EQ(f.log->NextCommittedEntries().size(), 2u);
  f.log->AppliedTo(2);
  EXPECT_TRUE(EntriesEq(f.log->NextCommittedEntries(), Terms(3, {1, 1})));
  f.log->AppliedTo(4);
  EXPECT_FALSE(f.log->HasNextCommittedEntries());
}

TEST(Log, UnstableEntriesAndStableTo) {
  auto previous = Terms(1, {1, 2});
  for (size_t unstable = 0; unstable <= previous.size(); ++unstable) {
    MemoryStorage s;
    ASSERT_TRUE(s.Append({previous.begin(), previous.end() - static_cast<long>(unstable)}).ok());
    Log l(&s, kNoLimit);
    l.Append({previous.end() - static_cast<long>(unstable), previous.end()});
    auto ents = l.UnstableEntries();
    ASSERT_EQ(ents.size(), unstable);
    if (!ents.empty()) {
      ASSERT_TRUE(s.Append(ents).ok());
      l.StableTo(ents.back().index(), ents.back().term());
    }
    EXPECT_TRUE(l.UnstableEntries().empty());
    EXPECT_TRUE(EntriesEq(AllEntries(l), previous));
  }
}

TEST(Log, StableToIgnoresStaleOrUnknown) {
  struct Case {
    uint64_t index, term;
    size_t want_unstable;
  };
  std::vector<Case> cases = {{1, 1, 1}, {2, 2, 0}, {2, 1, 2}, {3, 1, 2}};
  for (const auto& c : cases) {
    LogFixture f;
    f.log->Append(Terms(1, {1, 2}));
    f.log->StableTo(c.index, c.term);
    EXPECT_EQ(f.log->UnstableEntries().size(), c.want_unstable) << c.index << "/" << c.term;
  }
}

TEST(Log, StableToWithSnapshot) {
  const uint64_t snapi = 5, snapt = 2;
  struct Case {
    uint64_t index, term;
    std::vector<Entry> new_ents;
    size_t want_unstable;
  };
  std::vector<Case> cases = {
      {snapi + 1, snapt, {}, 0},
      {snapi, snapt, {}, 0},
      {snapi - 1, snapt, {}, 0},
      {snapi + 1, snapt + 1, {}, 0},
      {snapi, snapt + 1, {}, 0},
      {snapi - 1, snapt + 1, {}, 0},
      {snapi + 1, snapt, {E(snapi + 1, snapt)}, 0},
      {snapi, snapt, {E(snapi + 1, snapt)}, 1},
      {snapi - 1, snapt, {E(snapi + 1, snapt)}, 1},
      {snapi + 1, snapt + 1, {E(snapi + 1, snapt)}, 1},
      {snapi, snapt + 1, {E(snapi + 1, snapt)}, 1},
      {snapi - 1, snapt + 1, {E(snapi + 1, snapt)}, 1},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    MemoryStorage s;
    ASSERT_TRUE(s.ApplySnapshot(Snap(snapi, snapt, {1})).ok());
    Log l(&s, kNoLimit);
    l.Append(cases[i].new_ents);
    l.StableTo(cases[i].index, cases[i].term);
    EXPECT_EQ(l.UnstableEntries().size(), cases[i].want_unstable) << "case " << i;
  }
}

TEST(Log, CommitTo) {
  auto previous = Terms(1, {1, 2, 3});
  for (uint64_t to : {3, 1}) {
    LogFixture f;
    f.log->Append(previous);
    f.log->CommitTo(2);
    f.log->CommitTo(to);
    EXPECT_EQ(f.log->committed(), std::max<uint64_t>(to, 2)) << "never decreases";
  }
  LogFixture f;
  f.log->Append(previous);
  EXPECT_THROW(f.log->CommitTo(4), std::logic_error);  // beyond the log
}

TEST(Log, AppliedTo) {
  LogFixture f(Terms(1, {1, 1, 1}));
  f.log->CommitTo(2);
  f.log->AppliedTo(1);
  EXPECT_EQ(f.log->applied(), 1u);
  EXPECT_THROW(f.log->AppliedTo(3), std::logic_error);  // beyond commit
  f.log->AppliedTo(2);
  EXPECT_THROW(f.log->AppliedTo(1), std::logic_error);  // backwards
  f.log->AppliedTo(0);                                  // no-op
  EXPECT_EQ(f.log->applied(), 2u);
}

TEST(Log, MaybeCommitOnlyWithMatchingTerm) {
  LogFixture f(Terms(1, {1, 2, 2}));
  EXPECT_FALSE(f.log->MaybeCommit(3, 1));  // entry 3 is of term 2
  EXPECT_EQ(f.log->committed(), 0u);
  EXPECT_TRUE(f.log->MaybeCommit(3, 2));
  EXPECT_EQ(f.log->committed(), 3u);
  EXPECT_FALSE(f.log->MaybeCommit(2, 2));  // not forward
  EXPECT_EQ(f.log->committed(), 3u);
}

TEST(Log, Compaction) {
  struct Case {
    uint64_t last_index;
    std::vector<uint64_t> compact;
    std::vector<uint64_t> want_left;
    bool want_ok;
  };
  std::vector<Case> cases = {
      // beyond the applied index
      {1000, {1001}, {}, false},
      {1000, {300, 500, 800, 900}, {700, 500, 200, 100}, true},
      // below the last compaction
      {1000, {300, 299}, {700, 700}, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    MemoryStorage s;
    for (uint64_t j = 1; j <= c.last_index; ++j) ASSERT_TRUE(s.Append({E(j, 0)}).ok());
    Log l(&s, kNoLimit);
    ASSERT_TRUE(l.MaybeCommit(c.last_index, 0));
    l.AppliedTo(l.committed());
    for (size_t j = 0; j < c.compact.size(); ++j) {
      Status st = s.Compact(c.compact[j]);
      if (!st.ok()) {
        EXPECT_FALSE(c.want_ok) << "case " << i;
        continue;
      }
      EXPECT_EQ(AllEntries(l).size(), c.want_left[j]) << "case " << i;
    }
  }
}

TEST(Log, Restore) {
  const uint64_t index = 1000, term = 1000;
  MemoryStorage s;
  ASSERT_TRUE(s.ApplySnapshot(Snap(index, term, {1})).ok());
  Log l(&s, kNoLimit);
  EXPECT_TRUE(AllEntries(l).empty());
  EXPECT_EQ(l.FirstIndex(), index + 1);
  EXPECT_EQ(l.committed(), index);
  EXPECT_EQ(l.applied(), index);
  EXPECT_EQ(l.UnstableEntries().size(), 0u);
  EXPECT_EQ(l.TermOrZero(index), term);
  // Restoring a newer snapshot into the log (unstable) moves everything past it.
  l.Append(Terms(index + 1, {term, term}));
  l.Restore(Snap(2000, 1001, {1}));
  EXPECT_EQ(l.FirstIndex(), 2001u);
  EXPECT_EQ(l.LastIndex(), 2000u);
  EXPECT_EQ(l.committed(), 2000u);
  EXPECT_EQ(l.TermOrZero(2000), 1001u);
  EXPECT_TRUE(l.UnstableSnapshot());
  EXPECT_FALSE(l.HasNextCommittedEntries());
  EXPECT_EQ(l.Snapshot()->metadata().index(), 2000u);
}

TEST(Log, Term) {
  const uint64_t offset = 100, num = 100;
  MemoryStorage s;
  ASSERT_TRUE(s.ApplySnapshot(Snap(offset, 1, {1})).ok());
  Log l(&s, kNoLimit);
  for (uint64_t i = 1; i < num; ++i) l.Append({E(offset + i, i)});
  struct Case {
    uint64_t index, want;
  };
  std::vector<Case> cases = {{offset - 1, 0},
                             {offset, 1},
                             {offset + num / 2, num / 2},
                             {offset + num - 1, num - 1},
                             {offset + num, 0}};
  for (const auto& c : cases) EXPECT_EQ(l.TermOrZero(c.index), c.want) << c.index;
}

TEST(Log, TermWithUnstableSnapshot) {
  const uint64_t storagesnapi = 100, unstablesnapi = storagesnapi + 5;
  MemoryStorage s;
  ASSERT_TRUE(s.ApplySnapshot(Snap(storagesnapi, 1, {1})).ok());
  Log l(&s, kNoLimit);
  l.Restore(Snap(unstablesnapi, 1, {1}));
  struct Case {
    uint64_t index, want;
  };
  std::vector<Case> cases = {// cannot get the term from storage below the unstable snapshot
                             {storagesnapi, 0},
                             {storagesnapi + 1, 0},
                             {unstablesnapi - 1, 0},
                             // from the unstable snapshot
                             {unstablesnapi, 1}};
  for (const auto& c : cases) EXPECT_EQ(l.TermOrZero(c.index), c.want) << c.index;
}

TEST(Log, Slice) {
  const uint64_t offset = 100, num = 100, last = offset + num, half = offset + num / 2;
  const Entry halfe = E(half, half);
  MemoryStorage s;
  ASSERT_TRUE(s.ApplySnapshot(Snap(offset, 0, {1})).ok());
  for (uint64_t i = 1; i < num / 2; ++i) ASSERT_TRUE(s.Append({E(offset + i, offset + i)}).ok());
  Log l(&s, kNoLimit);
  for (uint64_t i = num / 2; i < num; ++i) l.Append({E(offset + i, offset + i)});
  struct Case {
    uint64_t from, to, limit;
    std::vector<Entry> want;
    bool compacted;
    bool fatal;
  };
  uint64_t hs = halfe.ByteSizeLong();
  std::vector<Case> cases = {
      // test no limit
      {offset - 1, offset + 1, kNoLimit, {}, true, false},
      {offset, offset + 1, kNoLimit, {}, true, false},
      {half - 1, half + 1, kNoLimit, {E(half - 1, half - 1), E(half, half)}, false, false},
      {half, half + 1, kNoLimit, {E(half, half)}, false, false},
      {last - 1, last, kNoLimit, {E(last - 1, last - 1)}, false, false},
      {last, last + 1, kNoLimit, {}, false, true},
      // test limit
      {half - 1, half + 1, 0, {E(half - 1, half - 1)}, false, false},
      {half - 1, half + 1, hs + 1, {E(half - 1, half - 1)}, false, false},
      {half - 2, half + 1, hs + 1, {E(half - 2, half - 2)}, false, false},
      {half - 1, half + 1, hs * 2, {E(half - 1, half - 1), E(half, half)}, false, false},
      {half - 1,
       half + 2,
       hs * 3,
       {E(half - 1, half - 1), E(half, half), E(half + 1, half + 1)},
       false,
       false},
      {half, half + 2, hs, {E(half, half)}, false, false},
      {half, half + 2, hs * 2, {E(half, half), E(half + 1, half + 1)}, false, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if (c.fatal) {
      EXPECT_THROW((void)l.Slice(c.from, c.to, c.limit), std::logic_error) << "case " << i;
      continue;
    }
    auto r = l.Slice(c.from, c.to, c.limit);
    if (c.compacted) {
      EXPECT_TRUE(IsCompacted(r.status())) << "case " << i;
      continue;
    }
    ASSERT_TRUE(r.ok()) << "case " << i << ": " << r.status().ToString();
    EXPECT_TRUE(EntriesEq(r.value(), c.want)) << "case " << i;
  }
}

TEST(Log, AppendBelowCommitIsFatal) {
  LogFixture f(Terms(1, {1, 1, 1}));
  f.log->CommitTo(2);
  EXPECT_THROW(f.log->Append({E(2, 2)}), std::logic_error);
  f.log->Append({E(3, 2)});
  EXPECT_EQ(f.log->TermOrZero(3), 2u);
}

}  // namespace
}  // namespace etcdw::raft
