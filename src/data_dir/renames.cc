// Renames of whole directories for the offline tools (internal.h): the last step of a restore
// and the takeover's exchange, each atomic on its own.
#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "internal.h"

namespace etcdw::data_dir::internal {

// RenameNoReplace (internal.h).
Status RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    return Status::Ok();
  }
  if (errno == EEXIST) return Status(Code::kAlreadyExists, "\"" + to + "\" already exists");
  if (errno != EINVAL && errno != ENOSYS) {
    return Unavailable("rename \"" + from + "\" to \"" + to + "\": " + std::strerror(errno));
  }
  // A file system without RENAME_NOREPLACE: check, then rename.
  struct stat st;
  if (::lstat(to.c_str(), &st) == 0) {
    return Status(Code::kAlreadyExists, "\"" + to + "\" already exists");
  }
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return Unavailable("rename \"" + from + "\" to \"" + to + "\": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status ExchangePaths(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) {
    return Status::Ok();
  }
  if (errno == EINVAL || errno == ENOSYS) {
    return FailedPrecondition("exchange \"" + a + "\" and \"" + b +
                              "\": the file system cannot exchange two paths atomically "
                              "(renameat2 RENAME_EXCHANGE)");
  }
  return Unavailable("exchange \"" + a + "\" and \"" + b + "\": " + std::strerror(errno));
}

}  // namespace etcdw::data_dir::internal
