#include "etcdw/storage/raft_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "etcdw/storage/engine.h"
#include "storage/raft_log_format.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::storage {
namespace {

namespace fs = std::filesystem;

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

using Pairs = std::vector<std::pair<uint64_t, uint64_t>>;

// Segment files of a log directory, in order.
std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() == ".wal") out.push_back(f.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void WriteBytes(const std::string& path, uint64_t at, const std::string& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Offset of the first occurrence of `needle` in the file.
uint64_t Find(const std::string& path, const std::string& needle) {
  const std::string data = testsupport::ReadFile(path);
  const size_t at = data.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return at;
}

class RaftLogTest : public testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  std::string dir() const { return scratch_.path() + "/wal"; }

  void Reopen(uint64_t segment_bytes = 16 << 10) {
    log_.reset();
    RaftLogOptions o;
    o.segment_bytes = segment_bytes;
    log_ = std::make_unique<RaftLog>(dir(), o);
    Status st = log_->Open(nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // Opens a second log on the same directory, as the next start would.
  std::unique_ptr<RaftLog> Fresh() {
    auto r = std::make_unique<RaftLog>(dir());
    Status st = r->Open(nullptr);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return r;
  }

  void Append(const std::vector<raftpb::Entry>& entries, const raftpb::HardState* hs = nullptr,
              bool sync = true) {
    Status st = log_->Append(entries, hs, sync);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  void Compact(uint64_t index) {
    Status st = log_->Compact(index);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // Indexes and terms of Entries(lo, hi, max_bytes).
  static Pairs Read(const RaftLog& log, uint64_t lo, uint64_t hi, uint64_t max_bytes = UINT64_MAX) {
    auto r = log.Entries(lo, hi, max_bytes);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    Pairs out;
    if (r.ok()) {
      for (const auto& e : *r) out.emplace_back(e.index(), e.term());
    }
    return out;
  }
  Pairs Read(uint64_t lo, uint64_t hi, uint64_t max_bytes = UINT64_MAX) {
    return Read(*log_, lo, hi, max_bytes);
  }

  uint64_t TermOf(uint64_t index) {
    auto t = log_->Term(index);
    EXPECT_TRUE(t.ok()) << index << ": " << t.status().ToString();
    return t.ok() ? *t : UINT64_MAX;
  }

  testsupport::ScratchDir scratch_{"raftlog-test"};
  std::unique_ptr<RaftLog> log_;
};

TEST_F(RaftLogTest, EmptyLogCreatesNothingUntilTheFirstWrite) {
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
  EXPECT_FALSE(fs::exists(dir()));
  Append(Range(1, 2, 1));
  EXPECT_EQ(Segments(dir()).size(), 1u);
}

TEST_F(RaftLogTest, AppendTermAndEntriesSurviveReopen) {
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
  Reopen();
  EXPECT_EQ(Read(1, 6), (Pairs{{1, 1}, {2, 1}, {3, 1}, {4, 2}, {5, 2}}));
  Append(Range(6, 7, 2));
  EXPECT_EQ(Read(*Fresh(), 4, 7), (Pairs{{4, 2}, {5, 2}, {6, 2}}));
}

// The point of the format: appends overwrite preallocated zeros, so the file never grows.
TEST_F(RaftLogTest, AppendsStayInsideThePreallocatedSegment) {
  Append(Range(1, 2, 1));
  const auto segs = Segments(dir());
  ASSERT_EQ(segs.size(), 1u);
  const auto size = fs::file_size(segs[0]);
  EXPECT_EQ(size, 16u << 10);
  for (uint64_t i = 2; i < 40; ++i) Append(Range(i, i + 1, 1));
  EXPECT_EQ(fs::file_size(segs[0]), size);
}

TEST_F(RaftLogTest, EntriesOutsideTheLogAreOutOfRange) {
  Append(Range(1, 4, 1));
  auto past = log_->Entries(2, 5, UINT64_MAX);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), Code::kOutOfRange);
  EXPECT_EQ(past.status().message(), "raft log range [2, 5) is outside the log");
  Compact(2);
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
  // The dropped entry is gone from the files, not only from memory.
  EXPECT_EQ(Fresh()->LastIndex(), 4u);
  // A longer replacement.
  Append(Range(2, 8, 3));
  EXPECT_EQ(log_->LastIndex(), 7u);
  const Pairs want{{1, 1}, {2, 3}, {3, 3}, {4, 3}, {5, 3}, {6, 3}, {7, 3}};
  EXPECT_EQ(Read(1, 8), want);
  EXPECT_EQ(Read(*Fresh(), 1, 8), want);
  // Appending past the end or into the compacted prefix is refused.
  EXPECT_EQ(log_->Append(Range(9, 10, 3), nullptr, true).code(), Code::kInternal);
  Compact(3);
  EXPECT_EQ(log_->Append(Range(3, 4, 3), nullptr, true).code(), Code::kInternal);
}

TEST_F(RaftLogTest, CompactDropsThePrefixAndRemembersItsTerm) {
  Append(Range(1, 4, 1));
  Append(Range(4, 7, 2));
  Compact(4);
  EXPECT_EQ(log_->FirstIndex(), 5u);
  EXPECT_EQ(log_->LastIndex(), 6u);
  EXPECT_EQ(log_->CompactedIndex(), 4u);
  EXPECT_EQ(log_->CompactedTerm(), 2u);
  EXPECT_EQ(TermOf(4), 2u);  // the compacted entry's term is still known
  EXPECT_EQ(log_->Term(3).status().code(), Code::kOutOfRange);
  EXPECT_EQ(Read(5, 7), (Pairs{{5, 2}, {6, 2}}));
  // Compacting to an index below the first does nothing; beyond the last is refused.
  Compact(2);
  EXPECT_EQ(log_->FirstIndex(), 5u);
  EXPECT_EQ(log_->CompactedTerm(), 2u);
  EXPECT_EQ(log_->Compact(7).code(), Code::kInternal);
  // A segment is deleted only whole: the reopened log may hold more, never less.
  auto fresh = Fresh();
  EXPECT_LE(fresh->FirstIndex(), 5u);
  EXPECT_EQ(Read(*fresh, 5, 7), (Pairs{{5, 2}, {6, 2}}));
}

TEST_F(RaftLogTest, CheckAppliedWantsTheAppliedIndexWithinTheLog) {
  Append(Range(1, 7, 1));
  Compact(3);
  for (uint64_t applied : {3, 4, 6}) EXPECT_TRUE(log_->CheckApplied(applied).ok()) << applied;
  Status below = log_->CheckApplied(2);
  EXPECT_EQ(below.code(), Code::kDataLoss);
  EXPECT_NE(below.message().find("applied index 2 is below the raft log's compaction point 3"),
            std::string::npos)
      << below.message();
  Status beyond = log_->CheckApplied(7);
  EXPECT_EQ(beyond.code(), Code::kDataLoss);
  EXPECT_NE(beyond.message().find("applied index 7 beyond the last log entry 6"), std::string::npos)
      << beyond.message();
}

TEST_F(RaftLogTest, CompactEverythingThenAppend) {
  Append(Range(1, 4, 1));
  Compact(3);
  EXPECT_EQ(log_->FirstIndex(), 4u);
  EXPECT_EQ(log_->LastIndex(), 3u);
  EXPECT_EQ(TermOf(3), 1u);
  auto empty = log_->Entries(4, 4, 10);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  Append(Range(4, 6, 2));
  EXPECT_EQ(Read(4, 6), (Pairs{{4, 2}, {5, 2}}));
}

TEST_F(RaftLogTest, SegmentsRollOverAndCompactionDeletesWholeOnes) {
  const std::string data(1000, 'v');
  for (uint64_t i = 1; i <= 100; ++i) Append({E(i, 1 + i / 40, data)});
  const size_t segments = Segments(dir()).size();
  EXPECT_GE(segments, 6u);  // 100 KB of entries in 16 KiB segments
  EXPECT_EQ(log_->SegmentCount(), segments);
  EXPECT_EQ(Read(*Fresh(), 1, 101).size(), 100u);
  Compact(90);
  EXPECT_LE(Segments(dir()).size(), 2u);
  EXPECT_EQ(log_->SegmentCount(), Segments(dir()).size());
  auto fresh = Fresh();
  EXPECT_LE(fresh->FirstIndex(), 91u);
  EXPECT_GT(fresh->FirstIndex(), 70u);
  EXPECT_EQ(fresh->LastIndex(), 100u);
  EXPECT_EQ(Read(*fresh, 91, 101).size(), 10u);
  auto term = fresh->Term(fresh->CompactedIndex());
  ASSERT_TRUE(term.ok());
  EXPECT_EQ(*term, 1 + fresh->CompactedIndex() / 40);
}

// A write bigger than a segment lands in one (which grows), and the next starts a new one.
TEST_F(RaftLogTest, AWriteLargerThanASegment) {
  Append(Range(1, 2, 1));
  Append({E(2, 1, std::string(40 << 10, 'b')), E(3, 1)});
  Append(Range(4, 5, 1));
  auto fresh = Fresh();
  ASSERT_EQ(fresh->LastIndex(), 4u);
  auto big = fresh->Entries(2, 3, UINT64_MAX);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ((*big)[0].data().size(), 40u << 10);
}

// Conflicting suffixes reaching back across segment boundaries, compactions, reopenings and
// resets, against a model: the live log and a freshly opened one must hold the model's entries.
TEST_F(RaftLogTest, AgreesWithAModelThroughRollOversConflictsAndReopens) {
  Reopen(2048);
  std::mt19937 rng(42);
  std::map<uint64_t, uint64_t> model;  // index -> term of the entries held
  uint64_t term = 1;
  raftpb::HardState hs;
  for (int step = 0; step < 600; ++step) {
    const int op = static_cast<int>(rng() % 12);
    const uint64_t first = log_->FirstIndex(), last = log_->LastIndex();
    if (op < 7) {  // append 1..8 entries at a random point (mostly the end)
      uint64_t from = last + 1;
      if (op == 0) from = first + rng() % (last - first + 2);
      if (rng() % 3 == 0) ++term;
      std::vector<raftpb::Entry> es;
      const uint64_t n = 1 + rng() % 8;
      for (uint64_t i = from; i < from + n; ++i) {
        es.push_back(E(i, term, std::string(50 + rng() % 200, 'a' + static_cast<char>(i % 26))));
      }
      model.erase(model.lower_bound(from), model.end());
      for (const auto& e : es) model[e.index()] = e.term();
      hs.set_term(term);
      hs.set_commit(from - 1);
      // Unsynced appends too: a synced one after them syncs the whole file, one after a synced
      // append only its own write.
      Append(es, &hs, rng() % 3 != 0);
    } else if (op < 9 && last >= first) {  // compact a prefix
      const uint64_t to = first + rng() % (last - first + 1);
      Compact(to);
      model.erase(model.begin(), model.upper_bound(to));
    } else if (op < 11) {
      Reopen(2048);
    } else if (last >= first) {  // reset to a snapshot point after the log
      ASSERT_TRUE(log_->Reset(last + 3, term).ok());
      EXPECT_EQ(log_->SegmentCount(), 1u);
      model.clear();
    }
    // Both may hold more than the model below its first entry (segments go only whole).
    auto fresh = Fresh();
    ASSERT_EQ(fresh->LastIndex(), log_->LastIndex()) << "step " << step;
    ASSERT_EQ(fresh->hard_state().SerializeAsString(), log_->hard_state().SerializeAsString());
    if (model.empty()) continue;
    ASSERT_EQ(model.rbegin()->first, log_->LastIndex()) << "step " << step;
    const uint64_t lo = model.begin()->first;
    ASSERT_LE(log_->FirstIndex(), lo) << "step " << step;
    ASSERT_LE(fresh->FirstIndex(), lo) << "step " << step;
    auto mine = log_->Entries(lo, log_->LastIndex() + 1, UINT64_MAX);
    auto theirs = fresh->Entries(lo, log_->LastIndex() + 1, UINT64_MAX);
    ASSERT_TRUE(mine.ok() && theirs.ok()) << "step " << step;
    ASSERT_EQ(mine->size(), model.size()) << "step " << step;
    ASSERT_EQ(theirs->size(), model.size()) << "step " << step;
    size_t k = 0;
    for (const auto& [index, t] : model) {
      ASSERT_EQ(TermOf(index), t) << "step " << step << " index " << index;
      ASSERT_EQ((*mine)[k].term(), t);
      ASSERT_EQ((*theirs)[k].index(), index);
      ASSERT_EQ((*theirs)[k].term(), t) << "step " << step << " index " << index;
      ASSERT_EQ((*theirs)[k].data(), (*mine)[k].data());
      ++k;
    }
  }
}

TEST_F(RaftLogTest, HardStateIsWrittenWithEntriesOrAlone) {
  raftpb::HardState hs;
  hs.set_term(3);
  hs.set_vote(2);
  hs.set_commit(1);
  Append(Range(1, 3, 3), &hs);
  EXPECT_EQ(log_->hard_state().term(), 3u);
  EXPECT_EQ(log_->hard_state().vote(), 2u);
  EXPECT_EQ(log_->hard_state().commit(), 1u);
  auto fresh = Fresh();
  EXPECT_EQ(fresh->hard_state().vote(), 2u);
  EXPECT_EQ(fresh->LastIndex(), 2u);
  hs.set_commit(2);
  Append({}, &hs);
  EXPECT_EQ(Fresh()->hard_state().commit(), 2u);
  EXPECT_EQ(Fresh()->LastIndex(), 2u);
}

TEST_F(RaftLogTest, ResetRestartsTheLogAfterASnapshotPoint) {
  raftpb::HardState hs;
  hs.set_term(4);
  hs.set_vote(1);
  Append(Range(1, 30, 4), &hs);
  ASSERT_TRUE(log_->Reset(100, 5).ok());
  EXPECT_EQ(log_->FirstIndex(), 101u);
  EXPECT_EQ(log_->LastIndex(), 100u);
  EXPECT_EQ(TermOf(100), 5u);
  EXPECT_EQ(Segments(dir()).size(), 1u);
  auto fresh = Fresh();
  EXPECT_EQ(fresh->FirstIndex(), 101u);
  EXPECT_EQ(fresh->CompactedTerm(), 5u);
  EXPECT_EQ(fresh->hard_state().vote(), 1u);  // the hard state is kept
  Append(Range(101, 103, 5));
  EXPECT_EQ(Read(*Fresh(), 101, 103), (Pairs{{101, 5}, {102, 5}}));
}

// A crash in the middle of a write leaves zeroed sectors in its record: the record is dropped,
// the entries before it are kept, and the next write does not leave the remains behind.
TEST_F(RaftLogTest, ARecordTornByACrashAtTheEndIsDropped) {
  Append(Range(1, 4, 1));
  Append({E(4, 1, std::string(3000, 't'))});
  log_.reset();
  const std::string seg = Segments(dir()).back();
  const uint64_t at = Find(seg, std::string(3000, 't'));
  // Zero one whole sector in the middle of the record (the disk never wrote it).
  const uint64_t sector = (at / 512 + 2) * 512;
  WriteBytes(seg, sector, std::string(512, '\0'));
  Reopen();
  EXPECT_EQ(log_->LastIndex(), 3u);
  Append(Range(4, 5, 2));
  auto fresh = Fresh();
  EXPECT_EQ(fresh->LastIndex(), 4u);
  EXPECT_EQ(Read(*fresh, 1, 5), (Pairs{{1, 1}, {2, 1}, {3, 1}, {4, 2}}));
}

TEST_F(RaftLogTest, DamagedRecordsAreDataLoss) {
  Append(Range(1, 4, 1));
  Append({E(4, 1, "the-fourth-entry")});
  Append(Range(5, 7, 1));
  log_.reset();
  const std::string seg = Segments(dir()).back();
  ASSERT_TRUE(testsupport::FlipByte(seg, Find(seg, "the-fourth-entry") + 3, 0x5a));
  RaftLog r(dir());
  const Status st = r.Open(nullptr);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("is damaged (checksum mismatch)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(seg), std::string::npos) << st.message();
}

TEST_F(RaftLogTest, DamageInAnEarlierSegmentIsDataLossEvenWhenItLooksTorn) {
  for (uint64_t i = 1; i <= 40; ++i) Append({E(i, 1, std::string(1000, 'x'))});
  log_.reset();
  const auto segs = Segments(dir());
  ASSERT_GE(segs.size(), 2u);
  WriteBytes(segs[0], 2048, std::string(512, '\0'));
  RaftLog r(dir());
  const Status st = r.Open(nullptr);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("is cut short"), std::string::npos) << st.message();
}

TEST_F(RaftLogTest, AMissingSegmentIsDataLoss) {
  for (uint64_t i = 1; i <= 60; ++i) Append({E(i, 1, std::string(1000, 'x'))});
  log_.reset();
  const auto segs = Segments(dir());
  ASSERT_GE(segs.size(), 3u);
  fs::remove(segs[1]);
  RaftLog r(dir());
  const Status st = r.Open(nullptr);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("which the segments before it do not hold"), std::string::npos)
      << st.message();
}

// A start record whose entry before the segment is the largest index, with a good checksum,
// leaves no index for entries: the first index would wrap to 0 and Term read outside the log.
// Found by the raft_log fuzzer (fuzz/corpus/raft_log/start_at_largest_index).
TEST_F(RaftLogTest, AStartRecordAtTheLargestIndexIsDataLoss) {
  log_.reset();
  fs::create_directories(dir());
  raft_log_format::StartRecord start;
  start.prev_index = UINT64_MAX;
  start.prev_term = 3;
  std::string seg;
  raft_log_format::AppendRecord(seg, raft_log_format::kStart, raft_log_format::EncodeStart(start));
  seg.append(64, '\0');
  std::ofstream(dir() + "/" + raft_log_format::SegmentName(1, 0), std::ios::binary) << seg;
  RaftLog r(dir());
  const Status st = r.Open(nullptr);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("after which no entry can follow"), std::string::npos)
      << st.message();
}

// Data directories of earlier versions kept the log in the engine.
class RaftLogMigrationTest : public RaftLogTest {
 protected:
  void SetUp() override {
    auto e = Engine::Open(scratch_.path() + "/store", {});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
  }
  void WriteLegacy(uint64_t compacted, uint64_t last, bool garble = false) {
    Batch b(*engine_);
    raftpb::HardState hs;
    hs.set_term(2);
    hs.set_vote(3);
    hs.set_commit(last);
    b.Put(Column::kMeta, "raft/hard_state", hs.SerializeAsString());
    b.Put(Column::kMeta, "raft/compacted", EncodeFixed64BE(compacted) + EncodeFixed64BE(2));
    for (uint64_t i = compacted + 1; i <= last; ++i) {
      b.Put(Column::kRaftLog, EncodeFixed64BE(i),
            garble && i == last ? "\xff\xff" : E(i, 2).SerializeAsString());
    }
    ASSERT_TRUE(engine_->Write(b, true).ok());
  }
  bool LegacyLeft() {
    auto it = engine_->NewIterator(Column::kRaftLog);
    it->SeekToFirst();
    auto hs = engine_->Get(Column::kMeta, "raft/hard_state");
    return it->Valid() || !hs.ok() || hs->has_value();
  }
  std::unique_ptr<Engine> engine_;
};

TEST_F(RaftLogMigrationTest, ALogInTheEngineMovesIntoItsDirectory) {
  WriteLegacy(10, 25);
  RaftLog log(dir());
  Status st = log.Open(engine_.get());
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(log.FirstIndex(), 11u);
  EXPECT_EQ(log.LastIndex(), 25u);
  EXPECT_EQ(log.CompactedTerm(), 2u);
  EXPECT_EQ(log.hard_state().vote(), 3u);
  EXPECT_EQ(Read(log, 11, 13), (Pairs{{11, 2}, {12, 2}}));
  EXPECT_FALSE(LegacyLeft());
  // Moved for good: a plain open finds it.
  auto fresh = Fresh();
  EXPECT_EQ(fresh->LastIndex(), 25u);
  EXPECT_EQ(fresh->hard_state().commit(), 25u);
}

// A crash after the log directory was renamed into place but before the engine's copy was
// dropped: the directory wins and the copy is dropped.
TEST_F(RaftLogMigrationTest, ALeftoverCopyInTheEngineIsDropped) {
  WriteLegacy(0, 5);
  {
    RaftLog log(dir());
    ASSERT_TRUE(log.Open(engine_.get()).ok());
    ASSERT_TRUE(log.Append(Range(6, 8, 2), nullptr, true).ok());
  }
  WriteLegacy(0, 3);
  RaftLog log(dir());
  ASSERT_TRUE(log.Open(engine_.get()).ok());
  EXPECT_EQ(log.LastIndex(), 7u);
  EXPECT_FALSE(LegacyLeft());
}

TEST_F(RaftLogMigrationTest, ADamagedLegacyLogIsDataLossAndStaysWhereItIs) {
  WriteLegacy(0, 5, /*garble=*/true);
  RaftLog log(dir());
  const Status st = log.Open(engine_.get());
  EXPECT_EQ(st.code(), Code::kDataLoss);
  EXPECT_EQ(st.message(), "raft log entry 5 is missing or corrupt");
  EXPECT_FALSE(fs::exists(dir()));
  EXPECT_TRUE(LegacyLeft());
}

}  // namespace
}  // namespace etcdw::storage

namespace etcdw::storage {
namespace {

TEST(RaftLogFormatTest, ASyncedWriteLandsAtItsOffset) {
  testsupport::ScratchDir dir("raft-log-format");
  const std::string path = dir.path() + "/file";
  ASSERT_TRUE(raft_log_format::CreateZeroed(path, 4096).ok());
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(raft_log_format::WriteSyncedAt(fd, "synced", 100, path).ok());
  ASSERT_TRUE(raft_log_format::WriteAt(fd, "plain", 200, path).ok());
  char buf[4096];
  ASSERT_TRUE(raft_log_format::ReadAt(fd, buf, sizeof buf, 0, path).ok());
  ::close(fd);
  EXPECT_EQ(std::string(buf + 100, 6), "synced");
  EXPECT_EQ(std::string(buf + 200, 5), "plain");
  EXPECT_EQ(std::string(buf + 106, 94), std::string(94, '\0'));
  EXPECT_EQ(std::filesystem::file_size(path), 4096u);  // an overwrite: the size stays
  const int bad = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  Status st = raft_log_format::WriteSyncedAt(bad, "x", 0, path);
  ::close(bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace etcdw::storage
