// A shared library the fault campaign preloads (LD_PRELOAD) into its members to make their disks
// slow or full on demand: fsync, fdatasync and pwritev2 with RWF_DSYNC (the Raft log's synced
// append) first sleep for the number of milliseconds written
// in the file named by ETCDW_SLOW_FSYNC_FILE (none while the file is absent, empty or 0), then do
// the real call; while the file says "enospc" they fail with ENOSPC instead, as a sync does when
// the disk filled before the written pages reached it. The file is read again at most every
// 20 ms, so changing it takes effect at once without costing a read per sync.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace {

using SyncFn = int (*)(int);
using Pwritev2Fn = ssize_t (*)(int, const iovec*, int, off_t, int);

int64_t NowMs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1'000'000;
}

constexpr int64_t kEnospc = -1;  // the delay that stands for "fail with ENOSPC"

std::atomic<int64_t> g_delay_ms{0};
std::atomic<int64_t> g_read_at_ms{-1'000'000};

// The delay the control file asks for now.
int64_t DelayMs() {
  const int64_t now = NowMs();
  if (now - g_read_at_ms.load(std::memory_order_relaxed) < 20) {
    return g_delay_ms.load(std::memory_order_relaxed);
  }
  g_read_at_ms.store(now, std::memory_order_relaxed);
  int64_t delay = 0;
  if (const char* path = std::getenv("ETCDW_SLOW_FSYNC_FILE")) {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[32] = {};
      ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
      ::close(fd);
      if (n > 0) delay = buf[0] == 'e' ? kEnospc : std::strtoll(buf, nullptr, 10);
    }
  }
  g_delay_ms.store(delay, std::memory_order_relaxed);
  return delay;
}

// Sleeps as the control file says; false when the sync must fail with ENOSPC instead.
bool BeforeSync() {
  const int64_t delay = DelayMs();
  if (delay == kEnospc) {
    errno = ENOSPC;
    return false;
  }
  if (delay > 0) {
    timespec t{static_cast<time_t>(delay / 1000), static_cast<long>(delay % 1000) * 1'000'000};
    while (nanosleep(&t, &t) != 0) {
    }
  }
  return true;
}

int SlowSync(int fd, const char* name) {
  if (!BeforeSync()) return -1;
  auto real = reinterpret_cast<SyncFn>(dlsym(RTLD_NEXT, name));
  return real == nullptr ? -1 : real(fd);
}

}  // namespace

extern "C" int fsync(int fd) { return SlowSync(fd, "fsync"); }
extern "C" int fdatasync(int fd) { return SlowSync(fd, "fdatasync"); }

extern "C" ssize_t pwritev2(int fd, const iovec* iov, int count, off_t offset, int flags) {
  // Only a synced write waits or fails: the others are writes to the page cache.
  if ((flags & RWF_DSYNC) != 0 && !BeforeSync()) return -1;
  static const auto real = reinterpret_cast<Pwritev2Fn>(dlsym(RTLD_NEXT, "pwritev2"));
  return real == nullptr ? -1 : real(fd, iov, count, offset, flags);
}
