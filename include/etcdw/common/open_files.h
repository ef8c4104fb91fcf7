// The process's open-file limit (RLIMIT_NOFILE): raised at start as etcd's Go runtime raises it,
// and read to size what holds files (client connections).
#pragma once

#include <cstdint>

namespace etcdw::common {

// Raises the soft open-file limit to the hard one (Go 1.19+ does so for every program, etcd
// included); returns the soft limit in force after it.
uint64_t RaiseOpenFileLimit();

// The soft open-file limit now.
uint64_t OpenFileLimit();

}  // namespace etcdw::common
