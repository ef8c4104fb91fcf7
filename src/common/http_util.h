// Helpers shared by the HTTP server and client (private to src/common).
#pragma once

#include <map>
#include <string>

#include "etcdw/common/status.h"

namespace etcdw::common {

// "/a/b?x=1&y=%20" -> path "/a/b", query {x: "1", y: " "} (the first value of a name wins).
void SplitTarget(const std::string& target, std::string* path,
                 std::map<std::string, std::string>* query);

}  // namespace etcdw::common
