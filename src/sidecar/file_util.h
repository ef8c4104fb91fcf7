// Local file helpers of the snapshot paths: a failed system call as a Status, exact reads, whole
// writes, path joining, and temporary files removed when their scope ends. Plain POSIX calls;
// every function is safe to call from any thread (each works on its own descriptors).
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace etcdw::sidecar {

// Internal: "<what>: <strerror(err)>".
Status ErrnoError(const std::string& what, int err);

// "<dir>/<name>" with a single '/' between them; `name` alone when `dir` is empty.
std::string JoinPath(const std::string& dir, const std::string& name);

// Reads exactly `n` bytes at the current offset of `fd` into `buf` (retrying short reads and
// EINTR). DataLoss naming `path` when the file ends first (it shrank while read); Internal on a
// read error.
Status ReadExactly(int fd, char* buf, size_t n, const std::string& path);

// Creates or truncates `path` (mode 0600 when created) and writes `data` whole. Internal naming
// the path and the failed call otherwise; no sync.
Status WriteFile(const std::string& path, std::string_view data);

// The local temporary files of one operation: each path added is removed (errors ignored) when
// the TempFiles goes out of scope, whether or not the file was ever created. Not thread-safe.
class TempFiles {
 public:
  TempFiles() = default;
  TempFiles(const TempFiles&) = delete;
  TempFiles& operator=(const TempFiles&) = delete;
  ~TempFiles();

  // Takes `path` into the set; the reference stays valid for the TempFiles' lifetime.
  const std::string& Add(std::string path);

 private:
  std::deque<std::string> paths_;  // deque: references returned by Add stay valid
};

}  // namespace etcdw::sidecar
