// The on-disk format of the Raft log (storage::RaftLog) and the file operations it needs.
//
// The log is a directory of segment files named <seq>-<first index>.wal (16 hex digits each);
// seq orders them. Each segment is created zero-filled to its full size and synced before it is
// named, so appending to it overwrites zeros: a sync then writes data blocks only, never the
// file's size or block map (about 1.5x the syncs per second of appending to a growing file on
// ext4). A segment is a run of records:
//
//   u32 crc     CRC-32C of the rest of the record (length, type, payload), little-endian
//   u32 length  payload bytes, little-endian
//   u8  type    kStart, kEntry or kHardState
//   payload
//
// A header of nine zero bytes ends the segment's records (the unwritten, zero-filled rest).
// Every segment begins with a kStart record: the index and term of the entry before its first
// entry, flags, and the hard state when it was started, so older segments can be deleted. Entry
// records hold a serialized raftpb::Entry; an entry whose index is at or below the last one
// replaces that entry and every later one (a conflicting suffix). kHardState records hold a
// serialized raftpb::HardState; the last one read is the hard state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace etcdw::storage::raft_log_format {

enum RecordType : uint8_t { kStart = 1, kEntry = 2, kHardState = 3 };
inline constexpr size_t kHeaderBytes = 9;
// kStart flag: every earlier segment is void (the log restarts after a snapshot).
inline constexpr uint8_t kStartReset = 1;

// Appends one record to `out`.
void AppendRecord(std::string& out, RecordType type, std::string_view payload);
// The same in two steps, for a payload serialized straight into `out`: BeginRecord returns
// where the record starts; append the payload, then call EndRecord with that position.
size_t BeginRecord(std::string& out, RecordType type);
void EndRecord(std::string& out, size_t at);

struct StartRecord {
  uint64_t prev_index = 0;
  uint64_t prev_term = 0;
  uint8_t flags = 0;
  std::string hard_state;  // serialized raftpb::HardState
};
std::string EncodeStart(const StartRecord& s);
bool DecodeStart(std::string_view payload, StartRecord* out);

// The index and term of a serialized raftpb::Entry, read without parsing the rest (start-up
// reads every entry of the log; its data is not needed then). False if it does not decode.
bool DecodeEntryIndexTerm(std::string_view entry, uint64_t* index, uint64_t* term);

// What ScanRecord found at an offset.
enum class Scan {
  kRecord,  // a whole record with a good checksum
  kEnd,     // a zero header, or too few bytes left for a header
  kTorn,    // a record cut short or with zeroed sectors: a write a crash interrupted
  kCorrupt  // a record whose checksum fails otherwise
};
struct Record {
  RecordType type = kStart;
  std::string_view payload;
  size_t size = 0;  // header + payload
};
// Reads the record at `offset` of `data` (a whole segment).
Scan ScanRecord(std::string_view data, size_t offset, Record* out);

// File names and the file system.
std::string SegmentName(uint64_t seq, uint64_t first_index);
// Parses a segment name; false for any other name.
bool ParseSegmentName(std::string_view name, uint64_t* seq, uint64_t* first_index);

// Creates (or truncates) `path` as `bytes` zeros and syncs it.
Status CreateZeroed(const std::string& path, uint64_t bytes);
Status WriteAt(int fd, std::string_view data, uint64_t offset, const std::string& what);
// Writes `data` at `offset` and makes it durable: one pwritev2(RWF_DSYNC) per piece, which syncs
// only the written range (earlier unsynced writes to the file need SyncData); a kernel or file
// system without RWF_DSYNC gets pwrite and fdatasync.
Status WriteSyncedAt(int fd, std::string_view data, uint64_t offset, const std::string& what);
Status ReadAt(int fd, char* buf, size_t n, uint64_t offset, const std::string& what);
Status SyncData(int fd, const std::string& what);

// A whole file mapped read-only, for reading a segment once at start-up without copying it into
// memory of its own (the page cache's pages are mapped, all at once). Empty for an empty file.
class MappedFile {
 public:
  static Result<MappedFile> Map(int fd, size_t size, const std::string& what);
  MappedFile(MappedFile&& o) noexcept : addr_(o.addr_), size_(o.size_) { o.addr_ = nullptr; }
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile();
  std::string_view data() const { return {static_cast<const char*>(addr_), addr_ ? size_ : 0}; }

 private:
  MappedFile(void* addr, size_t size) : addr_(addr), size_(size) {}
  void* addr_;
  size_t size_;
};

}  // namespace etcdw::storage::raft_log_format
