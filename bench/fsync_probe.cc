#include "fsync_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace etcdw::bench {

double MeasureFsyncRate(const std::string& dir, std::chrono::milliseconds duration,
                        std::string* error) {
  std::string path = dir + "/fsync-probe." + std::to_string(::getpid());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = "open " + path + ": " + std::strerror(errno);
    return -1;
  }
  char record[256];
  std::memset(record, 'f', sizeof record);
  uint64_t ops = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto end = t0 + duration;
  bool failed = false;
  while (std::chrono::steady_clock::now() < end) {
    if (::write(fd, record, sizeof record) != static_cast<ssize_t>(sizeof record) ||
        ::fdatasync(fd) != 0) {
      *error = std::string("write/fdatasync: ") + std::strerror(errno);
      failed = true;
      break;
    }
    ++ops;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  ::unlink(path.c_str());
  return failed ? -1 : static_cast<double>(ops) / seconds;
}

}  // namespace etcdw::bench
