#include "credential_files.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace etcdw::sidecar {

namespace {

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return InvalidArgument("cannot read directory \"" + dir + "\": " + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());  // as Go's os.ReadDir: the first *.json by name wins
  return names;
}

}  // namespace

Result<CredentialSource> FindCredentialSource(std::string_view env_prefix,
                                              std::string_view json_env, std::string_view dir_env,
                                              std::string_view store) {
  const std::string json_var = std::string(env_prefix) + std::string(json_env);
  const std::string dir_var = std::string(env_prefix) + std::string(dir_env);
  if (const char* file = std::getenv(json_var.c_str()); file != nullptr) {
    return CredentialSource{.path = file, .json = true};
  }
  if (const char* dir = std::getenv(dir_var.c_str()); dir != nullptr) {
    ETCDW_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
    for (const std::string& name : names) {
      if (name.ends_with(".json")) {
        return CredentialSource{.path = std::string(dir) + "/" + name, .json = true};
      }
    }
    return CredentialSource{.path = dir, .json = false, .files = std::move(names)};
  }
  return InvalidArgument(std::string(store) + ": no credentials: set " + json_var +
                         " (a JSON file) or " + dir_var + " (a directory with one file per key)");
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read \"" + path + "\": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return InvalidArgument("cannot read \"" + path + "\": read error");
  return ss.str();
}

std::optional<bool> ParseGoBool(std::string_view s) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (s == t) return true;
  }
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (s == f) return false;
  }
  return std::nullopt;
}

std::string TrimLineBreaks(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace etcdw::sidecar
