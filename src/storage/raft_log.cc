#include "etcdw/storage/raft_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>

#include "etcdw/common/dir_sync.h"
#include "raft_log_format.h"

namespace etcdw::storage {

namespace fmt = raft_log_format;
namespace fs = std::filesystem;

struct RaftLog::File {
  explicit File(int f) : fd(f) {}
  ~File() { ::close(fd); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  const int fd;
};

namespace {

constexpr char kSpareName[] = "spare.tmp";

Status Damaged(const std::string& path, const std::string& what) {
  return DataLoss("raft log segment " + path + ": " + what);
}

std::string At(uint64_t offset) { return " at offset " + std::to_string(offset); }

}  // namespace

RaftLog::RaftLog(std::string dir, RaftLogOptions opts) : dir_(std::move(dir)), opts_(opts) {}

RaftLog::~RaftLog() {
  if (spare_.valid()) spare_.wait();
}

uint64_t RaftLog::CompactedTerm() const {
  std::lock_guard lock(mu_);
  return compacted_term_;
}

raftpb::HardState RaftLog::hard_state() const {
  std::lock_guard lock(mu_);
  return hard_state_;
}

size_t RaftLog::SegmentCount() const {
  std::lock_guard lock(mu_);
  return segments_.size();
}

Status RaftLog::CheckApplied(uint64_t applied) const {
  if (applied > LastIndex()) {
    return DataLoss("applied index " + std::to_string(applied) + " beyond the last log entry " +
                    std::to_string(LastIndex()));
  }
  if (applied < CompactedIndex()) {
    return DataLoss("applied index " + std::to_string(applied) +
                    " is below the raft log's compaction point " +
                    std::to_string(CompactedIndex()) + ": entries to apply are gone");
  }
  return Status::Ok();
}

Status RaftLog::Open(Engine* engine) {
  if (engine) ETCDW_RETURN_IF_ERROR(Migrate(*engine));
  return Load();
}

// ---------------------------------------------------------------------------------------------
// Reading the log at start-up

Status RaftLog::Load() {
  std::lock_guard lock(mu_);
  segments_.clear();
  locs_.clear();
  first_ = 1;
  last_ = 0;
  compacted_term_ = 0;
  hard_state_.Clear();
  writer_ready_ = false;
  std::error_code ec;
  if (!fs::exists(dir_, ec)) return Status::Ok();
  for (const auto& f : fs::directory_iterator(dir_, ec)) {
    uint64_t seq = 0, first = 0;
    if (fmt::ParseSegmentName(f.path().filename().string(), &seq, &first)) {
      segments_.push_back(Segment{seq, f.path().string(), nullptr, 0});
    }
  }
  if (ec) return Unavailable("list raft log directory " + dir_ + ": " + ec.message());
  std::sort(segments_.begin(), segments_.end(),
            [](const Segment& a, const Segment& b) { return a.seq < b.seq; });
  for (size_t k = 0; k < segments_.size(); ++k) {
    ETCDW_RETURN_IF_ERROR(LoadSegment(k, k + 1 == segments_.size()));
  }
  return Status::Ok();
}

Status RaftLog::LoadSegment(size_t k, bool last) {
  Segment& seg = segments_[k];
  const int fd = ::open(seg.path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Unavailable("open " + seg.path + ": " + std::strerror(errno));
  seg.file = std::make_shared<File>(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return Unavailable("stat " + seg.path + ": " + std::strerror(errno));
  ETCDW_ASSIGN_OR_RETURN(fmt::MappedFile mapped,
                         fmt::MappedFile::Map(fd, static_cast<size_t>(st.st_size), seg.path));
  const std::string_view data = mapped.data();

  fmt::Record r;
  fmt::StartRecord start;
  raftpb::HardState hs;
  if (fmt::ScanRecord(data, 0, &r) != fmt::Scan::kRecord || r.type != fmt::kStart ||
      !fmt::DecodeStart(r.payload, &start) || !hs.ParseFromString(start.hard_state)) {
    return Damaged(seg.path, "does not begin with a valid start record");
  }
  // The log's first index is one above the start's entry: the largest index would wrap it to 0,
  // and the log would claim every index while holding none.
  if (start.prev_index == std::numeric_limits<uint64_t>::max()) {
    return Damaged(seg.path, "start record names entry " + std::to_string(start.prev_index) +
                                 ", after which no entry can follow");
  }
  if (k == 0 || (start.flags & fmt::kStartReset)) {
    locs_.clear();
    first_ = start.prev_index + 1;
    last_ = start.prev_index;
    compacted_term_ = start.prev_term;
  } else {
    auto term = TermLocked(start.prev_index);
    if (!term.ok() || *term != start.prev_term) {
      return Damaged(seg.path, "starts after entry " + std::to_string(start.prev_index) +
                                   " of term " + std::to_string(start.prev_term) +
                                   ", which the segments before it do not hold");
    }
    TruncateLocked(start.prev_index);
  }
  seg.prev_index = start.prev_index;
  hard_state_ = hs;

  const uint64_t start_size = r.size;
  uint64_t offset = r.size;
  for (;;) {
    const fmt::Scan scan = fmt::ScanRecord(data, offset, &r);
    if (scan == fmt::Scan::kEnd) break;
    if (scan == fmt::Scan::kTorn && last) break;  // a write the crash interrupted: dropped
    if (scan == fmt::Scan::kTorn) return Damaged(seg.path, "record" + At(offset) + " is cut short");
    if (scan == fmt::Scan::kCorrupt) {
      return Damaged(seg.path, "record" + At(offset) + " is damaged (checksum mismatch)");
    }
    if (r.type == fmt::kEntry) {
      uint64_t i = 0, term = 0;
      if (!fmt::DecodeEntryIndexTerm(r.payload, &i, &term)) {
        return Damaged(seg.path, "entry record" + At(offset) + " does not decode");
      }
      if (i <= seg.prev_index) {
        return Damaged(seg.path, "entry " + std::to_string(i) + At(offset) +
                                     " is not above the segment's start, entry " +
                                     std::to_string(seg.prev_index));
      }
      if (i > last_ + 1) {
        return Damaged(seg.path, "entry " + std::to_string(i) + At(offset) + " follows entry " +
                                     std::to_string(last_.load()) + ": entries are missing");
      }
      TruncateLocked(i - 1);
      locs_.push_back(
          Loc{seg.seq, offset + fmt::kHeaderBytes, static_cast<uint32_t>(r.payload.size()), term});
      last_ = i;
    } else if (r.type == fmt::kHardState) {
      if (!hard_state_.ParseFromArray(r.payload.data(), static_cast<int>(r.payload.size()))) {
        return Damaged(seg.path, "hard state record" + At(offset) + " does not decode");
      }
    } else {
      return Damaged(seg.path, "record" + At(offset) + " has unknown type " +
                                   std::to_string(static_cast<int>(r.type)));
    }
    offset += r.size;
  }
  if (last) {
    write_offset_ = offset;
    start_end_ = start_size;
    const size_t nonzero = data.find_last_not_of('\0');
    dirty_end_ = (nonzero == std::string::npos || nonzero < offset) ? offset : nonzero + 1;
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Reads

Result<uint64_t> RaftLog::TermLocked(uint64_t index) const {
  const uint64_t first = first_.load();
  if (index == first - 1) return compacted_term_;
  if (index < first || index > last_.load()) {
    return Status(Code::kOutOfRange, "raft log has no entry " + std::to_string(index));
  }
  return locs_[index - first].term;
}

Result<uint64_t> RaftLog::Term(uint64_t index) const {
  std::lock_guard lock(mu_);
  return TermLocked(index);
}

void RaftLog::TruncateLocked(uint64_t after) {
  while (!locs_.empty() && last_.load() > after) {
    locs_.pop_back();
    last_ = last_.load() - 1;
  }
}

Result<std::vector<raftpb::Entry>> RaftLog::Entries(uint64_t lo, uint64_t hi,
                                                    uint64_t max_bytes) const {
  std::vector<raftpb::Entry> out;
  if (lo >= hi) return out;
  std::vector<Loc> want;
  std::vector<std::pair<uint64_t, std::shared_ptr<File>>> files;  // by seq
  {
    std::lock_guard lock(mu_);
    const uint64_t first = first_.load();
    if (lo < first || hi > last_.load() + 1) {
      return Status(Code::kOutOfRange, "raft log range [" + std::to_string(lo) + ", " +
                                           std::to_string(hi) + ") is outside the log");
    }
    // Like etcd's limitSize: the total size stays within max_bytes, except that the first
    // entry is returned whatever its size.
    uint64_t bytes = 0;
    for (uint64_t i = lo; i < hi; ++i) {
      const Loc& l = locs_[i - first];
      if (!want.empty() && bytes + l.length > max_bytes) break;
      bytes += l.length;
      want.push_back(l);
      if (files.empty() || files.back().first != l.seq) {
        auto seg = std::lower_bound(segments_.begin(), segments_.end(), l.seq,
                                    [](const Segment& s, uint64_t seq) { return s.seq < seq; });
        if (seg == segments_.end() || seg->seq != l.seq) {
          return Internal("raft log entry " + std::to_string(i) + " is in no open segment");
        }
        files.emplace_back(l.seq, seg->file);
      }
    }
  }
  out.reserve(want.size());
  std::string buf;
  size_t f = 0;
  for (size_t a = 0; a < want.size();) {
    // One read for a run of entries in the same segment, in file order.
    size_t b = a;
    while (b + 1 < want.size() && want[b + 1].seq == want[a].seq &&
           want[b + 1].offset > want[b].offset) {
      ++b;
    }
    while (files[f].first != want[a].seq) ++f;
    const uint64_t begin = want[a].offset;
    buf.resize(want[b].offset + want[b].length - begin);
    ETCDW_RETURN_IF_ERROR(
        fmt::ReadAt(files[f].second->fd, buf.data(), buf.size(), begin, "raft log " + dir_));
    for (size_t j = a; j <= b; ++j) {
      raftpb::Entry& e = out.emplace_back();
      if (!e.ParseFromArray(buf.data() + (want[j].offset - begin),
                            static_cast<int>(want[j].length)) ||
          e.index() != lo + j) {
        return DataLoss("raft log entry " + std::to_string(lo + j) + " is corrupt");
      }
    }
    a = b + 1;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writes

Status RaftLog::PrepareWriter() {
  if (writer_ready_) return Status::Ok();
  std::error_code ec;
  if (!fs::exists(dir_, ec)) {
    fs::create_directories(dir_, ec);
    if (ec) return Unavailable("create raft log directory " + dir_ + ": " + ec.message());
    ETCDW_RETURN_IF_ERROR(common::SyncParentDirectory(dir_));
  }
  fs::remove(dir_ + "/" + kSpareName, ec);  // left half-made by an earlier run
  if (segments_.empty()) {
    ETCDW_RETURN_IF_ERROR(Cut(first_.load() - 1, compacted_term_, false));
  } else if (dirty_end_ > write_offset_) {
    // Bytes of a write a crash interrupted: zeroed, so that what is appended next is not
    // followed by them.
    const Segment& seg = segments_.back();
    ETCDW_RETURN_IF_ERROR(fmt::WriteAt(seg.file->fd, std::string(dirty_end_ - write_offset_, '\0'),
                                       write_offset_, seg.path));
    ETCDW_RETURN_IF_ERROR(fmt::SyncData(seg.file->fd, seg.path));
    dirty_end_ = write_offset_;
  }
  writer_ready_ = true;
  return Status::Ok();
}

void RaftLog::StartSpare() {
  spare_ =
      std::async(std::launch::async, [path = dir_ + "/" + kSpareName, bytes = opts_.segment_bytes] {
        return fmt::CreateZeroed(path, bytes);
      });
}

// Starts the next segment: the spare (zero-filled and synced in the background, or now if it
// is not ready) gets its start record, is synced, then named. Entries of the new segment are
// all above prev_index.
Status RaftLog::Cut(uint64_t prev_index, uint64_t prev_term, bool reset) {
  if (!segments_.empty() && unsynced_) {
    ETCDW_RETURN_IF_ERROR(fmt::SyncData(segments_.back().file->fd, segments_.back().path));
    unsynced_ = false;
  }
  const std::string spare = dir_ + "/" + kSpareName;
  ETCDW_RETURN_IF_ERROR(spare_.valid() ? spare_.get()
                                       : fmt::CreateZeroed(spare, opts_.segment_bytes));
  const int fd = ::open(spare.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Unavailable("open " + spare + ": " + std::strerror(errno));
  auto file = std::make_shared<File>(fd);
  fmt::StartRecord start{prev_index, prev_term, static_cast<uint8_t>(reset ? fmt::kStartReset : 0),
                         hard_state().SerializeAsString()};
  scratch_.clear();
  fmt::AppendRecord(scratch_, fmt::kStart, fmt::EncodeStart(start));
  ETCDW_RETURN_IF_ERROR(fmt::WriteAt(fd, scratch_, 0, spare));
  ETCDW_RETURN_IF_ERROR(fmt::SyncData(fd, spare));
  const uint64_t seq = segments_.empty() ? 1 : segments_.back().seq + 1;
  const std::string path = dir_ + "/" + fmt::SegmentName(seq, prev_index + 1);
  if (::rename(spare.c_str(), path.c_str()) != 0) {
    return Unavailable("rename " + spare + " to " + path + ": " + std::strerror(errno));
  }
  ETCDW_RETURN_IF_ERROR(common::SyncDirectory(dir_));
  {
    std::lock_guard lock(mu_);
    segments_.push_back(Segment{seq, path, std::move(file), prev_index});
  }
  write_offset_ = start_end_ = dirty_end_ = scratch_.size();
  return Status::Ok();
}

Status RaftLog::Append(const std::vector<raftpb::Entry>& entries, const raftpb::HardState* hs,
                       bool sync) {
  if (entries.empty() && !hs) return Status::Ok();
  ETCDW_RETURN_IF_ERROR(PrepareWriter());
  const uint64_t from = entries.empty() ? 0 : entries.front().index();
  if (!entries.empty() && (from < first_.load() || from > last_.load() + 1)) {
    return Internal("raft log: cannot append from entry " + std::to_string(from) +
                    " to a log holding [" + std::to_string(first_.load()) + ", " +
                    std::to_string(last_.load()) + "]");
  }
  scratch_.clear();
  placed_.clear();
  for (const auto& e : entries) {
    const size_t at = fmt::BeginRecord(scratch_, fmt::kEntry);
    e.AppendToString(&scratch_);
    placed_.emplace_back(at + fmt::kHeaderBytes, scratch_.size() - at - fmt::kHeaderBytes);
    fmt::EndRecord(scratch_, at);
  }
  if (hs) {
    const size_t at = fmt::BeginRecord(scratch_, fmt::kHardState);
    hs->AppendToString(&scratch_);
    fmt::EndRecord(scratch_, at);
  }

  // A new segment when this one is full, or when the entries replace some at or below this
  // segment's start (each segment holds only entries above its start).
  const bool full =
      write_offset_ + scratch_.size() > opts_.segment_bytes && write_offset_ > start_end_;
  if (full || (!entries.empty() && from <= segments_.back().prev_index)) {
    const uint64_t prev = entries.empty() ? last_.load() : std::min(last_.load(), from - 1);
    ETCDW_ASSIGN_OR_RETURN(const uint64_t prev_term, Term(prev));
    std::string records = std::move(scratch_);  // Cut uses scratch_
    ETCDW_RETURN_IF_ERROR(Cut(prev, prev_term, false));
    scratch_ = std::move(records);
  }

  const Segment& seg = segments_.back();
  const uint64_t base = write_offset_;
  if (sync && !unsynced_) {
    // Nothing written earlier waits for a sync: the write syncs itself (one system call).
    const auto start = std::chrono::steady_clock::now();
    ETCDW_RETURN_IF_ERROR(fmt::WriteSyncedAt(seg.file->fd, scratch_, base, seg.path));
    stats_.sync_seconds.Observe(common::SecondsSince(start));
  } else {
    ETCDW_RETURN_IF_ERROR(fmt::WriteAt(seg.file->fd, scratch_, base, seg.path));
    if (sync) {
      const auto start = std::chrono::steady_clock::now();
      ETCDW_RETURN_IF_ERROR(fmt::SyncData(seg.file->fd, seg.path));
      stats_.sync_seconds.Observe(common::SecondsSince(start));
    }
  }
  stats_.bytes_written.Add(scratch_.size());
  unsynced_ = !sync;
  write_offset_ += scratch_.size();
  dirty_end_ = std::max(dirty_end_, write_offset_);
  {
    std::lock_guard lock(mu_);
    if (!entries.empty()) {
      TruncateLocked(from - 1);
      for (size_t k = 0; k < entries.size(); ++k) {
        locs_.push_back(Loc{seg.seq, base + placed_[k].first,
                            static_cast<uint32_t>(placed_[k].second), entries[k].term()});
      }
      last_ = entries.back().index();
    }
    if (hs) hard_state_ = *hs;
  }
  // The next segment is zero-filled in the background once this one is half full.
  if (!spare_.valid() && write_offset_ > opts_.segment_bytes / 2) StartSpare();
  return Status::Ok();
}

// Deletes segments already taken out of segments_. A deletion a crash undoes is harmless: the
// segment still continues the one before it, and its entries are older than the ones kept.
Status RaftLog::RemoveSegments(const std::vector<Segment>& doomed) {
  for (const Segment& s : doomed) {
    if (::unlink(s.path.c_str()) != 0 && errno != ENOENT) {
      return Unavailable("remove " + s.path + ": " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

Status RaftLog::Compact(uint64_t index) {
  std::vector<Segment> doomed;
  {
    std::lock_guard lock(mu_);
    const uint64_t first = first_.load();
    if (index < first) return Status::Ok();
    if (index > last_.load()) {
      return Internal("raft log: cannot compact to entry " + std::to_string(index) +
                      " beyond the last, " + std::to_string(last_.load()));
    }
    compacted_term_ = locs_[index - first].term;
    locs_.erase(locs_.begin(), locs_.begin() + static_cast<std::ptrdiff_t>(index - first + 1));
    first_ = index + 1;
    // Segments before the one holding the first entry left hold nothing needed.
    const uint64_t keep = locs_.empty() ? segments_.back().seq : locs_.front().seq;
    while (segments_.size() > 1 && segments_.front().seq < keep) {
      doomed.push_back(std::move(segments_.front()));
      segments_.pop_front();
    }
  }
  return RemoveSegments(doomed);
}

Status RaftLog::Reset(uint64_t index, uint64_t term) {
  ETCDW_RETURN_IF_ERROR(PrepareWriter());
  ETCDW_RETURN_IF_ERROR(Cut(index, term, /*reset=*/true));
  std::vector<Segment> doomed;
  {
    std::lock_guard lock(mu_);
    while (segments_.size() > 1) {
      doomed.push_back(std::move(segments_.front()));
      segments_.pop_front();
    }
    locs_.clear();
    first_ = index + 1;
    last_ = index;
    compacted_term_ = term;
  }
  return RemoveSegments(doomed);
}

}  // namespace etcdw::storage
