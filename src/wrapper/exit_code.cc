#include "etcdw/wrapper/exit_code.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "etcdw/common/logging.h"
#include "etcdw/common/url.h"

namespace etcdw::wrapper {

namespace log = etcdw::log;
namespace fs = std::filesystem;

namespace {

void RemoveLegacyMarker(const std::string& exit_code_file) {
  fs::path marker = fs::path(exit_code_file).parent_path() / "validation_marker";
  std::error_code ec;
  fs::remove(marker, ec);
  if (ec) {
    log::Error("cannot remove the legacy validation marker",
               {log::F("path", marker.string()), log::F("error", ec.message())});
  }
}

}  // namespace

const char* ValidationModeName(ValidationMode m) {
  return m == ValidationMode::kSanity ? "sanity" : "full";
}

ValidationMode ChooseValidationMode(const std::string& exit_code_file) {
  RemoveLegacyMarker(exit_code_file);
  std::error_code ec;
  if (!fs::exists(exit_code_file, ec)) {
    log::Info("no exit code recorded: the last run did not stop on a signal, full validation",
              {log::F("path", exit_code_file)});
    return ValidationMode::kFull;
  }
  std::ifstream in(exit_code_file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) {
    log::Error("cannot read the exit code file, full validation",
               {log::F("path", exit_code_file), log::F("error", std::strerror(errno))});
    return ValidationMode::kFull;
  }
  std::string content(common::Trim(ss.str()));
  if (content == "terminated" || content == "interrupt") {
    log::Info("last run stopped on a signal, sanity validation",
              {log::F("path", exit_code_file), log::F("signal-captured", content)});
    return ValidationMode::kSanity;
  }
  log::Warn("unrecognised exit code, full validation",
            {log::F("path", exit_code_file), log::F("content", content.substr(0, 64))});
  return ValidationMode::kFull;
}

void CaptureExitSignal(const std::string& exit_code_file, const std::string& signal_name) {
  // Written in place with O_TRUNC (a rename would need a writable directory and is not worth
  // it for a hint; a torn write reads as unrecognised, which means the safe `full`).
  int fd = ::open(exit_code_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0;
  if (ok) {
    ok = ::fchmod(fd, 0600) == 0 &&
         ::write(fd, signal_name.data(), signal_name.size()) ==
             static_cast<ssize_t>(signal_name.size()) &&
         ::fsync(fd) == 0;
    int saved = errno;
    ::close(fd);
    errno = saved;
  }
  if (!ok) {
    log::Error("failed to capture exit code",
               {log::F("path", exit_code_file), log::F("error", std::strerror(errno))});
  }
}

void RemoveExitCodeFile(const std::string& exit_code_file) {
  std::error_code ec;
  fs::remove(exit_code_file, ec);
  if (ec) {
    log::Warn("failed to clean up the last captured exit code",
              {log::F("path", exit_code_file), log::F("error", ec.message())});
  }
}

}  // namespace etcdw::wrapper
