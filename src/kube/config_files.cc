#include "config_files.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace etcdw::kube {

Result<std::string> ReadSmallFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return FailedPrecondition(what + " \"" + path + "\": cannot read: " + std::strerror(errno));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return FailedPrecondition(what + " \"" + path + "\": read error");
  return text;
}

std::string ResolveRelativeTo(const std::string& file, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  return dir.empty() ? path : (dir / path).string();
}

}  // namespace etcdw::kube
