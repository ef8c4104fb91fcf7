// Writes Raft log segment files made from the input into a temporary directory and opens them
// with the real reader, storage::RaftLog::Open (no engine: no log of an earlier version to
// move). Opening must load the log or return an error, never crash. Beyond that, a log that
// opens must be whole:
// - its index range is sane, and Term and Entries answer for every entry in it, the entries
//   read back (fully parsed) carrying the index and term that opening read from them;
// - opening it again gives the same log;
// - an entry and a hard state appended to it are there after opening it once more (what a crash
//   left after the last good record is overwritten, never read back as entries).
// Input: byte 0 bit 0 set: the rest is one segment file as is. Otherwise the rest is a program
// that writes segments record by record, with right checksums (so that inputs get past them)
// and with damage where it asks for it; see Build.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/raft.pb.h"
#include "etcdw/storage/raft_log.h"
#include "input_reader.h"
#include "scratch_dir.h"
#include "storage/raft_log_format.h"

namespace {

namespace fs = std::filesystem;
namespace fmt = etcdw::storage::raft_log_format;
using etcdw::storage::RaftLog;
using etcdw::storage::RaftLogOptions;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "raft_log_fuzzer: %s\n", what);
  std::abort();
}

// Each input's log goes to <the scratch directory>/log, emptied first.
const std::string& LogDir() {
  static const std::string dir = etcdw::fuzz::ScratchDir("raft_log_fuzzer") + "/log";
  return dir;
}

// Reads the input as a program writing segments. Each step is a byte `op` and the bytes it
// takes; op & 7:
//   0  start a segment: its start record (reset flag: op bit 3; previous index: next byte,
//      shifted left 8 more when op bit 4; previous term: next byte; a hard state of the next
//      byte as term and commit)
//   1  an entry record: index one above the last entry written, less (op >> 3) & 3; term: next
//      byte; data: op >> 5 bytes taken from the input
//   2  a hard state record (term, vote, commit: the next three bytes)
//   3  a record of any type (next byte) and payload (next byte's count of bytes), checksummed
//   4  raw bytes (next byte's count of them)
//   5  zeros (next byte's count): a torn write's unwritten sectors
//   6  flips bit op >> 5 of the segment's byte at (next byte * 7) modulo its size
//   7  cuts the next byte's count of bytes from the segment's end
// Steps before the first 0 write to a segment that has no start record.
class Builder {
 public:
  explicit Builder(std::string_view in) : in_(in) {}

  std::vector<std::string> Build() {
    segments_.emplace_back();
    while (!in_.empty()) {
      const uint8_t op = in_.Byte();
      std::string& seg = segments_.back();
      switch (op & 7) {
        case 0: {
          if (!seg.empty()) segments_.emplace_back();
          fmt::StartRecord s;
          s.flags = (op >> 3) & 1 ? fmt::kStartReset : 0;
          s.prev_index = uint64_t{in_.Byte()} << ((op >> 4) & 1 ? 8 : 0);
          s.prev_term = in_.Byte();
          etcdw::raftpb::HardState hs;
          const uint8_t t = in_.Byte();
          hs.set_term(t);
          hs.set_commit(t);
          s.hard_state = hs.SerializeAsString();
          fmt::AppendRecord(segments_.back(), fmt::kStart, fmt::EncodeStart(s));
          next_index_ = s.prev_index + 1;
          break;
        }
        case 1: {
          etcdw::raftpb::Entry e;
          const uint64_t back = (op >> 3) & 3;
          e.set_index(next_index_ > back ? next_index_ - back : 1);
          e.set_term(in_.Byte());
          e.set_data(std::string(in_.Take(op >> 5)));
          fmt::AppendRecord(seg, fmt::kEntry, e.SerializeAsString());
          next_index_ = e.index() + 1;
          break;
        }
        case 2: {
          etcdw::raftpb::HardState hs;
          hs.set_term(in_.Byte());
          hs.set_vote(in_.Byte());
          hs.set_commit(in_.Byte());
          fmt::AppendRecord(seg, fmt::kHardState, hs.SerializeAsString());
          break;
        }
        case 3: {
          const auto type = static_cast<fmt::RecordType>(in_.Byte());
          fmt::AppendRecord(seg, type, in_.Take(in_.Byte()));
          break;
        }
        case 4:
          seg.append(in_.Take(in_.Byte()));
          break;
        case 5:
          seg.append(in_.Byte(), '\0');
          break;
        case 6: {
          const size_t at = in_.Byte() * size_t{7};
          if (!seg.empty()) seg[at % seg.size()] ^= static_cast<char>(1 << (op >> 5));
          break;
        }
        case 7:
          seg.resize(seg.size() - std::min<size_t>(seg.size(), in_.Byte()));
          break;
      }
    }
    return segments_;
  }

 private:
  etcdw::fuzz::InputReader in_;
  std::vector<std::string> segments_;
  uint64_t next_index_ = 1;
};

struct Snapshot {
  uint64_t first = 0, last = 0, compacted_term = 0;
  std::string hard_state;
  std::vector<uint64_t> terms;
  bool operator==(const Snapshot&) const = default;
};

// Checks that the opened log answers for every entry it claims, and returns what it holds.
Snapshot Check(const RaftLog& log, size_t most_entries) {
  Snapshot s{log.FirstIndex(),
             log.LastIndex(),
             log.CompactedTerm(),
             log.hard_state().SerializeAsString(),
             {}};
  if (s.last + 1 < s.first) Fail("the last index is below the first index less one");
  const uint64_t n = s.last + 1 - s.first;
  if (n > most_entries) Fail("the log holds more entries than the segments have records");
  auto compacted = log.Term(s.first - 1);
  if (!compacted.ok() || *compacted != s.compacted_term) Fail("no term for the compaction point");
  for (uint64_t i = s.first; i < s.first + n; ++i) {
    auto t = log.Term(i);
    if (!t.ok()) Fail("no term for an entry in the log");
    s.terms.push_back(*t);
  }
  // Any index at all has a term or is out of range (never a read outside the log).
  for (uint64_t i : {s.first, s.last, s.first + 1, s.last - 1, uint64_t{1}, UINT64_MAX}) {
    auto t = log.Term(i);
    if (!t.ok() && t.status().code() != etcdw::Code::kOutOfRange) Fail("Term failed otherwise");
  }
  if (s.last == UINT64_MAX) return s;  // [first, last + 1) is not a range Entries can take
  if (log.Term(s.last + 1).ok()) Fail("a term for an entry past the end");
  auto entries = log.Entries(s.first, s.first + n, UINT64_MAX);
  if (!entries.ok()) {
    std::fprintf(stderr, "%s\n", entries.status().message().c_str());
    Fail("the entries of a log that opened do not read back");
  }
  if (entries->size() != n) Fail("not every entry read back");
  for (uint64_t k = 0; k < n; ++k) {
    if ((*entries)[k].index() != s.first + k || (*entries)[k].term() != s.terms[k]) {
      Fail("an entry read back is not the index and term opening found");
    }
  }
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> segments;
  if (data[0] & 1) {
    segments.emplace_back(in);
  } else {
    segments = Builder(in).Build();
  }

  const std::string& dir = LogDir();
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) Fail("cannot make the log directory");
  for (size_t k = 0; k < segments.size(); ++k) {
    // The unwritten rest of a segment is zeros.
    std::ofstream(dir + "/" + fmt::SegmentName(k + 1, k + 1), std::ios::binary)
        << segments[k] << std::string(64, '\0');
  }

  // Small segments, so that appending cuts new ones now and then.
  const RaftLogOptions opts{.segment_bytes = 512};
  Snapshot opened;
  {
    RaftLog log(dir, opts);
    const etcdw::Status st = log.Open(nullptr);
    if (!st.ok()) {
      if (st.message().empty()) Fail("an error without a message");
      return 0;
    }
    opened = Check(log, size);
  }
  {
    RaftLog log(dir, opts);
    if (!log.Open(nullptr).ok()) Fail("a log that opened does not open again");
    if (!(Check(log, size) == opened)) Fail("a log opened again is not the same");

    if (opened.last == UINT64_MAX) return 0;
    etcdw::raftpb::Entry e;
    e.set_index(opened.last + 1);
    e.set_term(opened.terms.empty() ? opened.compacted_term : opened.terms.back());
    e.set_data("appended");
    etcdw::raftpb::HardState hs;
    hs.set_term(e.term());
    hs.set_commit(e.index());
    const etcdw::Status st = log.Append({e}, &hs, true);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      Fail("appending to a log that opened failed");
    }
  }
  RaftLog log(dir, opts);
  if (!log.Open(nullptr).ok()) Fail("a log appended to does not open");
  const Snapshot after = Check(log, size + 1);
  if (after.first != opened.first || after.last != opened.last + 1) {
    Fail("the appended entry is not the log's last");
  }
  auto last = log.Entries(after.last, after.last + 1, UINT64_MAX);
  if (!last.ok() || last->size() != 1 || last->front().data() != "appended") {
    Fail("the appended entry does not read back");
  }
  etcdw::raftpb::HardState hs;
  hs.set_term(after.terms.back());
  hs.set_commit(after.last);
  if (after.hard_state != hs.SerializeAsString()) Fail("the appended hard state is not the log's");
  for (size_t k = 0; k + 1 < after.terms.size(); ++k) {
    if (after.terms[k] != opened.terms[k]) Fail("appending changed an earlier entry");
  }
  return 0;
}
