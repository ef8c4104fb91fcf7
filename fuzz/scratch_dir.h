// The scratch directory of a harness process, for the harnesses that drive file-based APIs.
#pragma once

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace etcdw::fuzz {

// Makes <base>/<prefix>.XXXXXX once per process and returns its path, <base> being /dev/shm
// when there is one (files in memory: the harnesses write files for every input) and the
// system's temporary directory otherwise. Aborts if it cannot be made. A process holds one
// harness, so the prefix of the first call names the directory for good.
inline const std::string& ScratchDir(const char* prefix) {
  static const std::string dir = [prefix] {
    namespace fs = std::filesystem;
    const std::string base =
        fs::exists("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
    std::string tmpl = base + "/" + prefix + ".XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "%s: cannot make a scratch directory in %s\n", prefix, base.c_str());
      std::abort();
    }
    return tmpl;
  }();
  return dir;
}

}  // namespace etcdw::fuzz
