// Data directories of earlier versions kept the Raft log in the engine: entries in the RaftLog
// column keyed by big-endian index, the hard state and the compaction point (index and term,
// 16 bytes big-endian) in Meta. RaftLog::Open moves such a log into its own directory once.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "etcdw/common/dir_sync.h"
#include "etcdw/storage/engine.h"
#include "etcdw/storage/meta_records.h"
#include "etcdw/storage/raft_log.h"
#include "raft_log_format.h"

namespace etcdw::storage {

namespace fmt = raft_log_format;
namespace fs = std::filesystem;

namespace {

bool HasSegments(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return false;
  uint64_t seq = 0, first = 0;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    if (fmt::ParseSegmentName(f.path().filename().string(), &seq, &first)) return true;
  }
  return false;
}

// The whole legacy log as one segment's records.
struct LegacyLog {
  uint64_t prev_index = 0;  // the compaction point
  std::string records;
};
Result<LegacyLog> ReadLegacy(Engine& engine, const std::optional<std::string>& hs,
                             const std::optional<std::string>& compacted) {
  fmt::StartRecord start;
  if (compacted) {
    if (compacted->size() != 16) return DataLoss("raft log compaction record is corrupt");
    start.prev_index = DecodeFixed64BE(compacted->data());
    start.prev_term = DecodeFixed64BE(compacted->data() + 8);
  }
  raftpb::HardState parsed;
  if (hs && !parsed.ParseFromString(*hs)) return DataLoss("raft hard state record is corrupt");
  start.hard_state = hs.value_or("");
  LegacyLog out;
  out.prev_index = start.prev_index;
  fmt::AppendRecord(out.records, fmt::kStart, fmt::EncodeStart(start));
  auto it = engine.NewIterator(Column::kRaftLog);
  uint64_t expect = start.prev_index + 1;
  raftpb::Entry e;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++expect) {
    if (it->key().size() != 8 || DecodeFixed64BE(it->key().data()) != expect ||
        !e.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())) ||
        e.index() != expect) {
      return DataLoss("raft log entry " + std::to_string(expect) + " is missing or corrupt");
    }
    fmt::AppendRecord(out.records, fmt::kEntry, it->value());
  }
  ETCDW_RETURN_IF_ERROR(it->status());
  return out;
}

}  // namespace

Status RaftLog::Migrate(Engine& engine) {
  ETCDW_ASSIGN_OR_RETURN(auto hs, engine.Get(Column::kMeta, meta::kLegacyHardState.key));
  ETCDW_ASSIGN_OR_RETURN(auto compacted, engine.Get(Column::kMeta, meta::kLegacyCompacted.key));
  bool entries = false;
  {
    auto it = engine.NewIterator(Column::kRaftLog);
    it->SeekToFirst();
    entries = it->Valid();
    ETCDW_RETURN_IF_ERROR(it->status());
  }
  if (!hs && !compacted && !entries) return Status::Ok();

  // Written beside the log's directory and renamed into place: a crash leaves either no log
  // directory (and the engine's copy) or the whole log.
  if (!HasSegments(dir_)) {
    ETCDW_ASSIGN_OR_RETURN(const LegacyLog legacy, ReadLegacy(engine, hs, compacted));
    const std::string& records = legacy.records;
    const std::string tmp = dir_ + ".tmp";
    std::error_code ec;
    fs::remove_all(tmp, ec);
    fs::create_directories(tmp, ec);
    if (ec) return Unavailable("create " + tmp + ": " + ec.message());
    const std::string seg = tmp + "/" + fmt::SegmentName(1, legacy.prev_index + 1);
    ETCDW_RETURN_IF_ERROR(
        fmt::CreateZeroed(seg, std::max<uint64_t>(opts_.segment_bytes, records.size())));
    {
      const int fd = ::open(seg.c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) return Unavailable("open " + seg + ": " + std::strerror(errno));
      Status st = fmt::WriteAt(fd, records, 0, seg);
      if (st.ok()) st = fmt::SyncData(fd, seg);
      ::close(fd);
      ETCDW_RETURN_IF_ERROR(st);
    }
    ETCDW_RETURN_IF_ERROR(common::SyncDirectory(tmp));
    fs::remove_all(dir_, ec);  // an empty directory a crash left before its first segment
    fs::rename(tmp, dir_, ec);
    if (ec) return Unavailable("rename " + tmp + " to " + dir_ + ": " + ec.message());
    ETCDW_RETURN_IF_ERROR(common::SyncParentDirectory(dir_));
  }
  Batch drop(engine);
  drop.DeleteRange(Column::kRaftLog, EncodeFixed64BE(0), EncodeFixed64BE(UINT64_MAX));
  drop.Delete(Column::kMeta, meta::kLegacyHardState.key);
  drop.Delete(Column::kMeta, meta::kLegacyCompacted.key);
  return engine.Write(drop, /*sync=*/true);
}

}  // namespace etcdw::storage
