#include "etcdw/common/dir_sync.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace etcdw::common {

Status SyncDirectory(const std::string& dir) {
  const std::string path = dir.empty() ? "." : dir;
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Unavailable("open directory " + path + ": " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Unavailable("sync directory " + path + ": " + std::strerror(err));
  return Status::Ok();
}

Status SyncParentDirectory(const std::string& path) {
  return SyncDirectory(std::filesystem::path(path).parent_path().string());
}

}  // namespace etcdw::common
