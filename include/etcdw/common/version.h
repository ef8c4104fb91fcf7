// Version information. kVersion is the project's version (set in CMakeLists.txt); kEtcdVersion
// is the etcd release whose API and behaviour the store reproduces, reported by
// Maintenance.Status so clients enable the features they gate on etcd's version.
#pragma once

namespace etcdw {

extern const char* const kVersion;
extern const char* const kGitSha;
constexpr const char* kEtcdVersion = "3.5.27";
constexpr const char* kEtcdApiVersion = "3.5";

}  // namespace etcdw
