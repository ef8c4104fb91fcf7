#include "file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace etcdw::sidecar {

Status ErrnoError(const std::string& what, int err) {
  return Internal(what + ": " + std::strerror(err));
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

Status ReadExactly(int fd, char* buf, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::read(fd, buf + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoError("read \"" + path + "\"", errno);
    if (r == 0) return DataLoss("\"" + path + "\" is shorter than its size (changed while read)");
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

Status WriteFile(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("create \"" + path + "\"", errno);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status st = ErrnoError("write \"" + path + "\"", errno);
      ::close(fd);
      return st;
    }
    off += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return ErrnoError("close \"" + path + "\"", errno);
  return Status::Ok();
}

TempFiles::~TempFiles() {
  for (const auto& p : paths_) {
    std::error_code ec;
    std::filesystem::remove(p, ec);
  }
}

const std::string& TempFiles::Add(std::string path) {
  paths_.push_back(std::move(path));
  return paths_.back();
}

}  // namespace etcdw::sidecar
