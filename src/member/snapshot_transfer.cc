#include "snapshot_transfer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace etcdw::member {

SnapshotFileSink::SnapshotFileSink(std::string path) : path_(std::move(path)) {
  fd_ = ::open((path_ + ".part").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

SnapshotFileSink::~SnapshotFileSink() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink((path_ + ".part").c_str());
  }
}

Status SnapshotFileSink::Write(std::string_view chunk) {
  if (fd_ < 0) return Unavailable("cannot create " + path_ + ".part: " + std::strerror(errno));
  while (!chunk.empty()) {
    ssize_t n = ::write(fd_, chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unavailable("write " + path_ + ".part: " + std::strerror(errno));
    }
    chunk.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status SnapshotFileSink::Finish() {
  if (fd_ < 0) return Unavailable("cannot create " + path_ + ".part");
  if (::fsync(fd_) != 0) return Unavailable("fsync " + path_ + ".part: " + std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  ETCDW_RETURN_IF_ERROR(mvcc::VerifySnapshotFile(path_ + ".part"));
  if (::rename((path_ + ".part").c_str(), path_.c_str()) != 0) {
    return Unavailable("rename " + path_ + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Result<bool> StateSnapshotSource::Next(std::string& out, size_t max_bytes) {
  while (!done_ && buf_.size() - pos_ < max_bytes) {
    if (pos_ > 0) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    ETCDW_ASSIGN_OR_RETURN(bool more, writer_.Next(buf_, max_bytes));
    done_ = !more;
  }
  size_t n = std::min(max_bytes, buf_.size() - pos_);
  out.append(buf_, pos_, n);
  pos_ += n;
  return !(done_ && pos_ == buf_.size());
}

}  // namespace etcdw::member
