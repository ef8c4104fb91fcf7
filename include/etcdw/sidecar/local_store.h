// The "Local" snapshot store: a directory tree, gardener's layout. Container C and prefix P put
// snapshot N at $HOME/C/P/v2/N (C defaults to "default.bkp"). Directories are created 0700, an
// object is written to a temporary file, fsync'ed and renamed into place (then the directory is
// fsync'ed), so a crash never leaves a partial snapshot under a snapshot's name.
#pragma once

#include <memory>
#include <string>

#include "etcdw/sidecar/snap_store.h"

namespace etcdw::sidecar {

// `root` is the directory holding the prefix ($HOME/<container>); `prefix` as SnapStoreOptions.
Result<std::unique_ptr<SnapStore>> NewLocalStore(const std::string& root,
                                                 const std::string& prefix);

}  // namespace etcdw::sidecar
