#include "etcdw/storage/raft_log.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/scratch_dir.h"

namespace etcdw::storage {
namespace {

raftpb::Entry E(uint64_t index, uint64_t term, const std::string& data = "") {
  raftpb::Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_data(data.empty() ? "data-" + std::to_string(index) + "-" + std::to_string(term) : data);
  return e;
}

std::vector<raftpb::Entry> Range(uint64_t lo, uint64_t hi, uint64_t term) {
  std::vector<raftpb::Entry> out;
  for (uint64_t i = lo; i < hi; ++i) out.push_back(E(i, term));
  return out;
}

class RaftLogTest : public testing::Test {
 protected:
  void SetUp() override {
    EngineOptions o;
    o.in_memory = true;
    auto e = Engine::Open("/mem/raftlog", o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
    log_ = std::make_unique<RaftLog>(*engine_);
    ASSERT_TRUE(log_->Load().ok());
  }

  void Append(const std::vector<raftpb::Entry>& entries) {
    Batch b(*engine_);
    log_->StageAppend(b, entries);
    ASSERT_TRUE(engine_->Write(b, true).ok());
    log_->CommittedAppend(entries);
  }

  void Compact(uint64_t index, uint64_t term) {
    Batch b(*engine_);
    log_->StageCompact(b, index, term);
    ASSERT_TRUE(engine_->Write(b, true).ok());
    log_->CommittedCompact(index, term);
  }

  // Indexes and terms of Entries(lo, hi, max_bytes).
  std::vector<std::pair<uint64_t, uint64_t>> Read(uint64_t lo, uint64_t hi,
                                                  uint64_t max_bytes = UINT64_MAX) {
    auto r = log_->Entries(lo, hi, max_bytes);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::pair<uint64_t, uint64_t>> out;
    if (r.ok()) {
      for (const auto& e : *r) out.emplace_back(e.index(), e.term());
    }
    return out;
  }

  uint64_t TermOf(uint64_t index) {
    auto t = log_->Term(index);
    EXPECT_TRUE(t.ok()) << index << ": " << t.status().ToString();
    return t.ok() ? *t : UINT64_MAX;
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<RaftLog> log_;
};

using Pairs = std::vector<std::pair<uint64_t, uint64_t>>;

TEST_F(RaftLogTest, EmptyLog) {
  EXPECT_EQ(log_->FirstIndex(), 1u);
  EXPECT_EQ(log_->LastIndex(), 0u);
  EXPECT_EQ(log_->CompactedIndex(), 0u);
  EXPECT_EQ(log_->CompactedTerm(), 0u);
  EXPECT_EQ(TermOf(0), 0u);
  auto t = log_->Term(1);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kOutOfRange);
  auto none = log_->Entries(1, 1, 100);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(log_->Entries(1, 2, 100).ok());
  EXPECT_EQ(log_->hard_state().term(), 0u);
}

TEST_F(RaftLogTest, AppendTermAndEntries) {
  Append(Range(1, 4, 1));
  Append(Range(4, 6, 2));
  EXPECT_EQ(log_->FirstIndex(), 1u);
  EXPECT_EQ(log_->LastIndex(), 5u);
  EXPECT_EQ(TermOf(1), 1u);
  EXPECT_EQ(TermOf(3), 1u);
  EXPECT_EQ(TermOf(4), 2u);
  EXPECT_EQ(TermOf(5), 2u);
  EXPECT_EQ(log_->Term(6).status().code(), Code::kOutOfRange);
  EXPECT_EQ(Read(1, 6), (Pairs{{1, 1}, {2, 1}, {3, 1}, {4, 2}, {5, 2}}));
  EXPECT_EQ(Read(2, 4), (Pairs{{2, 1}, {3, 1}}));
  auto entries = log_->Entries(3, 4, UINT64_MAX);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].data(), "data-3-1");
}

TEST_F(RaftLogTest, EntriesOutsideTheLogAreOutOfRange) {
  Append(Range(1, 4, 1));
  auto past = log_->Entries(2, 5, UINT64_MAX);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), Code::kOutOfRange);
  EXPECT_EQ(past.status().message(), "raft log range [2, 5) is outside the log");
  Compact(2, 1);
  auto compacted = log_->Entries(2, 4, UINT64_MAX);
  ASSERT_FALSE(compacted.ok());
  EXPECT_EQ(compacted.status().code(), Code::kOutOfRange);
  EXPECT_EQ(Read(3, 4), (Pairs{{3, 1}}));
}

TEST_F(RaftLogTest, MaxBytesLimitsTheTotalButReturnsAtLeastOneEntry) {
  std::vector<raftpb::Entry> entries;
  for (uint64_t i = 1; i <= 5; ++i) entries.push_back(E(i, 1, std::string(100, 'x')));
  Append(entries);
  const uint64_t size = entries[0].ByteSizeLong();  // every entry has the same size
  // etcd's limitSize: entries are returned while the total stays within max_bytes...
  EXPECT_EQ(Read(1, 6, 3 * size).size(), 3u);
  EXPECT_EQ(Read(1, 6, 3 * size + 1).size(), 3u);
  EXPECT_EQ(Read(1, 6, 3 * size - 1).size(), 2u);
  EXPECT_EQ(Read(1, 6, 5 * size).size(), 5u);
  // ...but the first entry is returned whatever its size.
  EXPECT_EQ(Read(1, 6, 0).size(), 1u);
  EXPECT_EQ(Read(2, 6, 1).size(), 1u);
  EXPECT_EQ(Read(2, 6, size).size(), 1u);
}

TEST_F(RaftLogTest, AppendReplacesAConflictingSuffix) {
  Append(Range(1, 6, 1));
  // A new leader overwrites entries 3.. with a shorter suffix of term 2.
  Append(Range(3, 5, 2));
  EXPECT_EQ(log_->LastIndex(), 4u);
  EXPECT_EQ(Read(1, 5), (Pairs{{1, 1}, {2, 1}, {3, 2}, {4, 2}}));
  EXPECT_EQ(log_->Term(5).status().code(), Code::kOutOfRange);
  // The dropped entry is gone from storage, not only from the in-memory bounds.
  RaftLog reloaded(*engine_);
  ASSERT_TRUE(reloaded.Load().ok());
  EXPECT_EQ(reloaded.LastIndex(), 4u);
  // A longer replacement.
  Append(Range(2, 8, 3));
  EXPECT_EQ(log_->LastIndex(), 7u);
  EXPECT_EQ(Read(1, 8), (Pairs{{1, 1}, {2, 3}, {3, 3}, {4, 3}, {5, 3}, {6, 3}, {7, 3}}));
}

TEST_F(RaftLogTest, CompactDropsThePrefixAndRemembersItsTerm) {
  Append(Range(1, 4, 1));
  Append(Range(4, 7, 2));
  Compact(4, 2);
  EXPECT_EQ(log_->FirstIndex(), 5u);
  EXPECT_EQ(log_->LastIndex(), 6u);
  EXPECT_EQ(log_->CompactedIndex(), 4u);
  EXPECT_EQ(log_->CompactedTerm(), 2u);
  EXPECT_EQ(TermOf(4), 2u);  // the compacted entry's term is still known
  EXPECT_EQ(log_->Term(3).status().code(), Code::kOutOfRange);
  EXPECT_EQ(Read(5, 7), (Pairs{{5, 2}, {6, 2}}));
  // Compacting to an index below the first does nothing.
  Compact(2, 1);
  EXPECT_EQ(log_->FirstIndex(), 5u);
  EXPECT_EQ(log_->CompactedTerm(), 2u);
  // The entries are deleted from storage.
  auto it = engine_->NewIterator(Column::kRaftLog);
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(DecodeFixed64BE(it->key().data()), 5u);
}

TEST_F(RaftLogTest, CompactEverythingThenAppend) {
  Append(Range(1, 4, 1));
  Compact(3, 1);
  EXPECT_EQ(log_->FirstIndex(), 4u);
  EXPECT_EQ(log_->LastIndex(), 3u);
  EXPECT_EQ(TermOf(3), 1u);
  auto empty = log_->Entries(4, 4, 10);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  Append(Range(4, 6, 2));
  EXPECT_EQ(Read(4, 6), (Pairs{{4, 2}, {5, 2}}));
}

// Term() answers from memory for entries this object appended: through appends that replace a
// suffix, compactions, resets and reloads it must agree with a model and with a freshly loaded
// log (which reads every term from the engine).
TEST_F(RaftLogTest, TermsFromMemoryAgreeWithTheStoredEntries) {
  std::mt19937 rng(42);
  std::map<uint64_t, uint64_t> model;  // index -> term of the entries held
  uint64_t term = 1;
  for (int step = 0; step < 400; ++step) {
    int op = static_cast<int>(rng() % 10);
    uint64_t first = log_->FirstIndex(), last = log_->LastIndex();
    if (op < 6) {  // append 1..5 entries at a random point, replacing what follows
      uint64_t from = first + rng() % (last - first + 2);
      if (rng() % 3 == 0) ++term;
      std::vector<raftpb::Entry> es;
      for (uint64_t i = from; i < from + 1 + rng() % 5; ++i) es.push_back(E(i, term));
      model.erase(model.lower_bound(from), model.end());
      for (const auto& e : es) model[e.index()] = e.term();
      Append(es);
    } else if (op < 8 && last >= first) {  // compact a prefix
      uint64_t to = first + rng() % (last - first + 1);
      Compact(to, model[to]);
      model.erase(model.begin(), model.upper_bound(to));
    } else if (op == 8) {  // reload: terms of older entries now come from the engine
      log_ = std::make_unique<RaftLog>(*engine_);
      ASSERT_TRUE(log_->Load().ok());
    } else if (last >= first) {  // reset to a snapshot point after the log
      Batch b(*engine_);
      log_->StageReset(b, last + 3, term);
      ASSERT_TRUE(engine_->Write(b, true).ok());
      log_->CommittedReset(last + 3, term);
      model.clear();
    }
    RaftLog fresh(*engine_);
    ASSERT_TRUE(fresh.Load().ok());
    ASSERT_EQ(fresh.LastIndex(), log_->LastIndex());
    for (uint64_t i = log_->FirstIndex(); i <= log_->LastIndex(); ++i) {
      ASSERT_EQ(TermOf(i), model.at(i)) << "step " << step << " index " << i;
      auto stored = fresh.Term(i);
      ASSERT_TRUE(stored.ok());
      ASSERT_EQ(*stored, model.at(i)) << "step " << step << " index " << i;
    }
  }
}

TEST_F(RaftLogTest, HardStateIsStagedWithEntries) {
  raftpb::HardState hs;
  hs.set_term(3);
  hs.set_vote(2);
  hs.set_commit(1);
  Batch b(*engine_);
  log_->StageAppend(b, Range(1, 3, 3));
  log_->StageHardState(b, hs);
  ASSERT_TRUE(engine_->Write(b, true).ok());
  log_->CommittedAppend(Range(1, 3, 3));
  log_->CommittedHardState(hs);
  EXPECT_EQ(log_->hard_state().term(), 3u);
  EXPECT_EQ(log_->hard_state().vote(), 2u);
  EXPECT_EQ(log_->hard_state().commit(), 1u);
  RaftLog reloaded(*engine_);
  ASSERT_TRUE(reloaded.Load().ok());
  EXPECT_EQ(reloaded.hard_state().vote(), 2u);
  EXPECT_EQ(reloaded.LastIndex(), 2u);
}

TEST_F(RaftLogTest, StagedChangesAreInvisibleUntilCommitted) {
  Append(Range(1, 3, 1));
  Batch b(*engine_);
  log_->StageAppend(b, Range(3, 5, 1));
  EXPECT_EQ(log_->LastIndex(), 2u);
  // Dropping the batch leaves the log as it was.
  RaftLog reloaded(*engine_);
  ASSERT_TRUE(reloaded.Load().ok());
  EXPECT_EQ(reloaded.LastIndex(), 2u);
}

TEST_F(RaftLogTest, CorruptRecordsAreDataLoss) {
  Batch b(*engine_);
  b.Put(Column::kMeta, "raft/compacted", "short");
  ASSERT_TRUE(engine_->Write(b, false).ok());
  RaftLog r(*engine_);
  Status st = r.Load();
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();

  Batch fix(*engine_);
  fix.Delete(Column::kMeta, "raft/compacted");
  fix.Put(Column::kMeta, "raft/hard_state", "\xff\xff\xff");
  ASSERT_TRUE(engine_->Write(fix, false).ok());
  RaftLog r2(*engine_);
  EXPECT_EQ(r2.Load().code(), Code::kDataLoss);
}

TEST_F(RaftLogTest, AGapAtTheStartIsDataLoss) {
  // Entries must start right after the compacted index.
  Batch b(*engine_);
  b.Put(Column::kRaftLog, EncodeFixed64BE(3), E(3, 1).SerializeAsString());
  ASSERT_TRUE(engine_->Write(b, false).ok());
  RaftLog r(*engine_);
  Status st = r.Load();
  EXPECT_EQ(st.code(), Code::kDataLoss);
  EXPECT_EQ(st.message(), "raft log starts at index 3, expected 1");
}

TEST_F(RaftLogTest, AHoleInTheMiddleIsDataLoss) {
  Append(Range(1, 5, 1));
  Batch b(*engine_);
  b.Delete(Column::kRaftLog, EncodeFixed64BE(3));
  ASSERT_TRUE(engine_->Write(b, false).ok());
  auto r = log_->Entries(1, 5, UINT64_MAX);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDataLoss);
  // This object knows the terms of what it appended; a reloaded one reads them and finds the
  // hole.
  RaftLog reloaded(*engine_);
  ASSERT_TRUE(reloaded.Load().ok());
  EXPECT_EQ(reloaded.Term(3).status().code(), Code::kDataLoss);
}

TEST(RaftLogReopenTest, EntriesCompactionAndHardStateSurviveReopen) {
  testsupport::ScratchDir dir("raftlog-test");
  const std::string path = dir.path() + "/db";
  {
    auto e = Engine::Open(path, {});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    RaftLog log(**e);
    ASSERT_TRUE(log.Load().ok());
    Batch b(**e);
    auto entries = Range(1, 11, 1);
    raftpb::HardState hs;
    hs.set_term(1);
    hs.set_vote(7);
    hs.set_commit(10);
    log.StageAppend(b, entries);
    log.StageHardState(b, hs);
    ASSERT_TRUE((*e)->Write(b, true).ok());
    log.CommittedAppend(entries);
    log.CommittedHardState(hs);
    Batch c(**e);
    log.StageCompact(c, 6, 1);
    ASSERT_TRUE((*e)->Write(c, true).ok());
    log.CommittedCompact(6, 1);
  }
  auto e = Engine::Open(path, {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  RaftLog log(**e);
  ASSERT_TRUE(log.Load().ok());
  EXPECT_EQ(log.FirstIndex(), 7u);
  EXPECT_EQ(log.LastIndex(), 10u);
  EXPECT_EQ(log.CompactedIndex(), 6u);
  EXPECT_EQ(log.CompactedTerm(), 1u);
  EXPECT_EQ(log.hard_state().term(), 1u);
  EXPECT_EQ(log.hard_state().vote(), 7u);
  EXPECT_EQ(log.hard_state().commit(), 10u);
  auto entries = log.Entries(7, 11, UINT64_MAX);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 4u);
  EXPECT_EQ((*entries)[0].data(), "data-7-1");
  EXPECT_EQ((*entries)[3].index(), 10u);
}

TEST(RaftLogReopenTest, FullyCompactedLogReloads) {
  testsupport::ScratchDir dir("raftlog-test");
  const std::string path = dir.path() + "/db";
  {
    auto e = Engine::Open(path, {});
    ASSERT_TRUE(e.ok());
    RaftLog log(**e);
    ASSERT_TRUE(log.Load().ok());
    Batch b(**e);
    log.StageAppend(b, Range(1, 4, 2));
    ASSERT_TRUE((*e)->Write(b, true).ok());
    log.CommittedAppend(Range(1, 4, 2));
    Batch c(**e);
    log.StageCompact(c, 3, 2);
    ASSERT_TRUE((*e)->Write(c, true).ok());
  }
  auto e = Engine::Open(path, {});
  ASSERT_TRUE(e.ok());
  RaftLog log(**e);
  ASSERT_TRUE(log.Load().ok());
  EXPECT_EQ(log.FirstIndex(), 4u);
  EXPECT_EQ(log.LastIndex(), 3u);
  auto t = log.Term(3);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, 2u);
}

}  // namespace
}  // namespace etcdw::storage
