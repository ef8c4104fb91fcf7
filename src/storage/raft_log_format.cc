#include "raft_log_format.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "etcdw/common/hash.h"
#include "etcdw/common/varint.h"
#include "etcdw/raft.pb.h"

namespace etcdw::storage::raft_log_format {

namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

bool AllZero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

// A write the disk did not finish leaves some of its sectors as they were: zeros, in a
// zero-filled segment. A record with a bad checksum is taken for such a write when one of its
// pieces, cut at 512-byte sector boundaries, is all zeros (etcd's WAL decides the same way);
// anything else is damage to data that was written.
constexpr size_t kSector = 512;
bool HasZeroedSector(std::string_view data, size_t begin, size_t end) {
  while (begin < end) {
    const size_t next = std::min(end, (begin / kSector + 1) * kSector);
    if (AllZero(data.substr(begin, next - begin))) return true;
    begin = next;
  }
  return false;
}

Status Errno(const std::string& what) { return Unavailable(what + ": " + std::strerror(errno)); }

}  // namespace

size_t BeginRecord(std::string& out, RecordType type) {
  const size_t at = out.size();
  PutU32(out, 0);  // checksum and length: EndRecord
  PutU32(out, 0);
  out.push_back(static_cast<char>(type));
  return at;
}

void EndRecord(std::string& out, size_t at) {
  const auto length = static_cast<uint32_t>(out.size() - at - kHeaderBytes);
  for (int i = 0; i < 4; ++i) out[at + 4 + i] = static_cast<char>(length >> (8 * i));
  const uint32_t crc = common::Crc32c(0, std::string_view(out).substr(at + 4));
  for (int i = 0; i < 4; ++i) out[at + i] = static_cast<char>(crc >> (8 * i));
}

void AppendRecord(std::string& out, RecordType type, std::string_view payload) {
  const size_t at = BeginRecord(out, type);
  out.append(payload);
  EndRecord(out, at);
}

std::string EncodeStart(const StartRecord& s) {
  std::string out;
  PutU64(out, s.prev_index);
  PutU64(out, s.prev_term);
  out.push_back(static_cast<char>(s.flags));
  out.append(s.hard_state);
  return out;
}

bool DecodeStart(std::string_view payload, StartRecord* out) {
  if (payload.size() < 17) return false;
  out->prev_index = GetU64(payload.data());
  out->prev_term = GetU64(payload.data() + 8);
  out->flags = static_cast<uint8_t>(payload[16]);
  out->hard_state.assign(payload.substr(17));
  return true;
}

bool DecodeEntryIndexTerm(std::string_view entry, uint64_t* index, uint64_t* term) {
  *index = *term = 0;
  while (!entry.empty()) {
    uint64_t tag = 0, v = 0;
    if (!common::ConsumeVarint(entry, &tag)) return false;
    switch (tag & 7) {
      case 0:  // varint
        if (!common::ConsumeVarint(entry, &v)) return false;
        if (tag >> 3 == raftpb::Entry::kTermFieldNumber) *term = v;
        if (tag >> 3 == raftpb::Entry::kIndexFieldNumber) *index = v;
        break;
      case 2:  // length-delimited
        if (!common::ConsumeVarint(entry, &v) || v > entry.size()) return false;
        entry.remove_prefix(static_cast<size_t>(v));
        break;
      case 1:  // fixed64
        if (entry.size() < 8) return false;
        entry.remove_prefix(8);
        break;
      case 5:  // fixed32
        if (entry.size() < 4) return false;
        entry.remove_prefix(4);
        break;
      default:
        return false;
    }
  }
  return true;
}

Scan ScanRecord(std::string_view data, size_t offset, Record* out) {
  if (data.size() - offset < kHeaderBytes) {
    return AllZero(data.substr(offset)) ? Scan::kEnd : Scan::kTorn;
  }
  const char* h = data.data() + offset;
  if (AllZero(std::string_view(h, kHeaderBytes))) return Scan::kEnd;
  const uint32_t length = GetU32(h + 4);
  if (length > data.size() - offset - kHeaderBytes) return Scan::kTorn;
  const size_t size = kHeaderBytes + length;
  if (common::Crc32c(0, data.substr(offset + 4, size - 4)) != GetU32(h)) {
    return HasZeroedSector(data, offset, offset + size) ? Scan::kTorn : Scan::kCorrupt;
  }
  out->type = static_cast<RecordType>(static_cast<uint8_t>(h[8]));
  out->payload = data.substr(offset + kHeaderBytes, length);
  out->size = size;
  return Scan::kRecord;
}

std::string SegmentName(uint64_t seq, uint64_t first_index) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%016llx-%016llx.wal", static_cast<unsigned long long>(seq),
                static_cast<unsigned long long>(first_index));
  return buf;
}

bool ParseSegmentName(std::string_view name, uint64_t* seq, uint64_t* first_index) {
  if (name.size() != 37 || name[16] != '-' || name.substr(33) != ".wal") return false;
  auto hex = [](std::string_view s, uint64_t* v) {
    *v = 0;
    for (char c : s) {
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
      if (d < 0) return false;
      *v = (*v << 4) | static_cast<uint64_t>(d);
    }
    return true;
  };
  return hex(name.substr(0, 16), seq) && hex(name.substr(17, 16), first_index);
}

Status CreateZeroed(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create " + path);
  const std::string zeros(std::min<uint64_t>(bytes, 1 << 20), '\0');
  Status st;
  for (uint64_t done = 0; done < bytes && st.ok(); done += zeros.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), bytes - done));
    st = WriteAt(fd, std::string_view(zeros).substr(0, n), done, path);
  }
  if (st.ok()) st = SyncData(fd, path);
  ::close(fd);
  return st;
}

Status WriteAt(int fd, std::string_view data, uint64_t offset, const std::string& what) {
  while (!data.empty()) {
    const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write " + what);
    }
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status ReadAt(int fd, char* buf, size_t n, uint64_t offset, const std::string& what) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, buf, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Errno("read " + what);
    }
    if (r == 0) return DataLoss(what + " ends early");
    buf += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

Result<MappedFile> MappedFile::Map(int fd, size_t size, const std::string& what) {
  if (size == 0) return MappedFile(nullptr, 0);
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (addr == MAP_FAILED) return Errno("map " + what);
  return MappedFile(addr, size);
}

MappedFile::~MappedFile() {
  if (addr_) ::munmap(addr_, size_);
}

Status WriteSyncedAt(int fd, std::string_view data, uint64_t offset, const std::string& what) {
  while (!data.empty()) {
    iovec iov{const_cast<char*>(data.data()), data.size()};
    const ssize_t n = ::pwritev2(fd, &iov, 1, static_cast<off_t>(offset), RWF_DSYNC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EOPNOTSUPP || errno == EINVAL) {
        ETCDW_RETURN_IF_ERROR(WriteAt(fd, data, offset, what));
        return SyncData(fd, what);
      }
      return Errno("write " + what);
    }
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status SyncData(int fd, const std::string& what) {
  if (::fdatasync(fd) != 0) return Errno("sync " + what);
  return Status::Ok();
}

}  // namespace etcdw::storage::raft_log_format
