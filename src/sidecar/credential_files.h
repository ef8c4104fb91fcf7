// gardener's credential files (private to src/sidecar): where a provider's secret is mounted and
// how its values are read. Every provider but Local reads one of two environment variables, each
// with an optional prefix ("SOURCE_" for the copy source, "SECONDARY_" for the secondary store):
// <prefix><json_env> names a JSON file; else <prefix><dir_env> names a directory holding either
// a "*.json" file (gardener's transition rule: the first such file by name wins) or one file per
// key.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/common/status.h"

namespace etcdw::sidecar {

struct CredentialSource {
  std::string path;  // the JSON file, or the directory of single files
  bool json = false;
  std::vector<std::string> files;  // !json: the directory's entries, sorted by name
};

// Finds the credentials as described above. Errors: neither variable set (naming both, and
// `store` e.g. "ABS snapshot store"), an unreadable directory.
Result<CredentialSource> FindCredentialSource(std::string_view env_prefix,
                                              std::string_view json_env, std::string_view dir_env,
                                              std::string_view store);

// The whole file. Errors name the file and the reason.
Result<std::string> ReadWholeFile(const std::string& path);

// Go's strconv.ParseBool: 1 t T TRUE true True, 0 f F FALSE false False; nullopt otherwise.
std::optional<bool> ParseGoBool(std::string_view s);

// `s` without its trailing CR and LF characters (a value file usually ends with a line break).
std::string TrimLineBreaks(std::string s);

}  // namespace etcdw::sidecar
