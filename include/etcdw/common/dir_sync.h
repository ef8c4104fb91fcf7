// Durable directory entries: after a file is created, renamed or removed, the change to the
// directory itself is durable only once the directory is fsync'ed.
#pragma once

#include <string>

#include "etcdw/common/status.h"

namespace etcdw::common {

// fsync(2) on directory `dir` ("" means the current directory). An error (Unavailable) names
// the directory and the system's reason.
Status SyncDirectory(const std::string& dir);

// SyncDirectory on the directory holding `path` (the current directory when `path` has no
// directory part): what makes a rename or creation of `path` itself durable.
Status SyncParentDirectory(const std::string& path);

}  // namespace etcdw::common
