#include "etcdw/sidecar/snapshot_verify.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "etcdw/common/hash.h"
#include "file_util.h"

namespace etcdw::sidecar {
namespace {

constexpr size_t kTrailerSize = 32;  // SHA-256 appended by etcd (full) or by us (delta)
constexpr uint64_t kSnapshotAlignment = 512;

// Opens `path` and checks its SHA-256 trailer (the last 32 bytes hash everything before them).
// `check_size` vets the file size first and must refuse sizes below the trailer's. `what` names
// the kind of file in errors.
Status CheckSha256Trailer(const std::string& path, const std::string& what,
                          const std::function<Status(uint64_t)>& check_size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return Status(err == ENOENT ? Code::kNotFound : Code::kInternal,
                  "open " + what + " \"" + path + "\": " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = ErrnoError("stat \"" + path + "\"", errno);
    ::close(fd);
    return s;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (Status s = check_size(size); !s.ok()) {
    ::close(fd);
    return s;
  }
  common::Sha256 sha;
  std::vector<char> buf(1 << 20);
  uint64_t left = size - kTrailerSize;
  Status s;
  while (left > 0 && s.ok()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    s = ReadExactly(fd, buf.data(), n, path);
    if (s.ok()) sha.Update(std::string_view(buf.data(), n));
    left -= n;
  }
  std::array<char, kTrailerSize> trailer{};
  if (s.ok()) s = ReadExactly(fd, trailer.data(), trailer.size(), path);
  ::close(fd);
  ETCDW_RETURN_IF_ERROR(s);
  auto digest = sha.Final();
  if (std::memcmp(digest.data(), trailer.data(), kTrailerSize) != 0) {
    std::string want(reinterpret_cast<const char*>(digest.data()), digest.size());
    return DataLoss(what + " \"" + path + "\": SHA-256 mismatch (trailer " +
                    common::ToHex(std::string_view(trailer.data(), trailer.size())) + ", content " +
                    common::ToHex(want) + ")");
  }
  return Status::Ok();
}

}  // namespace

Status VerifyFullSnapshotFile(const std::string& path) {
  return CheckSha256Trailer(path, "full snapshot", [&](uint64_t size) {
    if (size % kSnapshotAlignment == kTrailerSize) return Status::Ok();
    return DataLoss("full snapshot \"" + path + "\": size " + std::to_string(size) +
                    " is not a multiple of 512 plus a 32-byte SHA-256 trailer");
  });
}

Status VerifyDeltaSnapshotFile(const std::string& path) {
  return CheckSha256Trailer(path, "delta snapshot", [&](uint64_t size) {
    if (size > kTrailerSize) return Status::Ok();
    return DataLoss("delta snapshot \"" + path + "\": " + std::to_string(size) +
                    " bytes, missing hash");
  });
}

}  // namespace etcdw::sidecar
