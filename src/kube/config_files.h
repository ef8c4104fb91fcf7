// Reading the small files a configuration names (tokens, CA bundles, namespaces).
#pragma once

#include <string>

#include "etcdw/common/status.h"

namespace etcdw::kube {

// The whole file. Errors (kFailedPrecondition) say `what`, the path and why, as
// `token file "/x/token": cannot read: No such file or directory`.
Result<std::string> ReadSmallFile(const std::string& path, const std::string& what);

// `path` when absolute or empty, else `path` relative to the directory of `file`.
std::string ResolveRelativeTo(const std::string& file, const std::string& path);

}  // namespace etcdw::kube
