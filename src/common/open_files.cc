#include "etcdw/common/open_files.h"

#include <sys/resource.h>

namespace etcdw::common {

uint64_t RaiseOpenFileLimit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return 0;
  if (l.rlim_cur < l.rlim_max) {
    rlimit raised = l;
    raised.rlim_cur = l.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) l = raised;
  }
  return l.rlim_cur;
}

uint64_t OpenFileLimit() {
  rlimit l{};
  return getrlimit(RLIMIT_NOFILE, &l) == 0 ? l.rlim_cur : 0;
}

}  // namespace etcdw::common
