#include "fsync_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace etcdw::bench {

namespace {

// Writes 256 B records at increasing offsets of `fd` from `offset` on, each followed by
// fdatasync, for `duration`; returns operations per second, or -1 with *error.
double SyncLoop(int fd, off_t offset, std::chrono::milliseconds duration, std::string* error) {
  char record[256];
  std::memset(record, 'f', sizeof record);
  uint64_t ops = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto end = t0 + duration;
  while (std::chrono::steady_clock::now() < end) {
    if (::pwrite(fd, record, sizeof record, offset) != static_cast<ssize_t>(sizeof record) ||
        ::fdatasync(fd) != 0) {
      *error = std::string("write/fdatasync: ") + std::strerror(errno);
      return -1;
    }
    offset += static_cast<off_t>(sizeof record);
    ++ops;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(ops) / seconds;
}

// Runs SyncLoop on a new file, empty or preallocated with `zeros` synced zero bytes.
double Probe(const std::string& path, size_t zeros, std::chrono::milliseconds duration,
             std::string* error) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = "open " + path + ": " + std::strerror(errno);
    return -1;
  }
  double rate = 0;
  const std::string chunk(1 << 20, '\0');
  for (size_t done = 0; done < zeros && rate >= 0; done += chunk.size()) {
    if (::pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(done)) !=
        static_cast<ssize_t>(chunk.size())) {
      *error = "preallocate " + path + ": " + std::strerror(errno);
      rate = -1;
    }
  }
  if (rate >= 0 && ::fdatasync(fd) != 0) {
    *error = "sync " + path + ": " + std::strerror(errno);
    rate = -1;
  }
  if (rate >= 0) rate = SyncLoop(fd, 0, duration, error);
  ::close(fd);
  ::unlink(path.c_str());
  return rate;
}

}  // namespace

bool MeasureDiskSyncRates(const std::string& dir, std::chrono::milliseconds duration,
                          DiskSyncRates* out, std::string* error) {
  const std::string path = dir + "/fsync-probe." + std::to_string(::getpid());
  out->append = Probe(path, 0, duration, error);
  if (out->append < 0) return false;
  // 64 MiB: room for 256 B records at 80k syncs/s for the longest probe.
  out->overwrite = Probe(path, size_t{64} << 20, duration, error);
  return out->overwrite >= 0;
}

}  // namespace etcdw::bench
