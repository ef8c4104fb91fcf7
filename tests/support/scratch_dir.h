// A temporary directory, removed with everything in it when destroyed. Header-only: the unit
// tests (also built under the sanitizers) and the micro-benchmarks link no test support library.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

// Not etcdw::testing: that name would hide gtest's ::testing in the tests that include this.
namespace etcdw::testsupport {

class ScratchDir {
 public:
  // Created as $TMPDIR/etcdw-<name>-XXXXXX ($TMPDIR defaults to /tmp). path() is empty if the
  // directory could not be created.
  explicit ScratchDir(const std::string& name) {
    const char* base = ::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/etcdw-" + name + "-XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace etcdw::testsupport
