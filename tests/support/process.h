// Test support: child processes, temporary directories and free loopback ports.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "await.h"
#include "files.h"
#include "scratch_dir.h"

namespace etcdw::testing {

// The shared helpers (await.h, files.h), under the names the integration tests use.
using testsupport::ReadFile;
using testsupport::WaitUntil;
using testsupport::WriteFile;

// A child process whose stdout and stderr go to a log file. Killed (SIGKILL) when destroyed.
class Process {
 public:
  Process() = default;
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Starts argv[0] (looked up in PATH if it has no '/') with the given arguments. extra_env
  // entries "NAME=value" set a variable (replacing an inherited one), "NAME" removes it.
  bool Start(const std::vector<std::string>& argv, const std::string& log_path,
             const std::vector<std::string>& extra_env = {});
  bool Running();
  void Signal(int sig);
  // Waits for exit; returns the exit status (128+signal when killed), or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGKILL and reap.
  void Kill();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Runs a command to completion, capturing stdout+stderr. Returns the exit status (-1 on
// timeout, after killing it).
int RunCommand(const std::vector<std::string>& argv, std::string* output,
               std::chrono::milliseconds timeout = std::chrono::seconds(30),
               const std::string& stdin_data = "");

// Like RunCommand, but keeps stdout and stderr apart (either pointer may be null).
int RunCommandSplit(const std::vector<std::string>& argv, std::string* stdout_text,
                    std::string* stderr_text,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30),
                    const std::string& stdin_data = "");

// The data and log directory of a test process's servers ($TMPDIR/etcdw-test-XXXXXX).
class TempDir : public testsupport::ScratchDir {
 public:
  TempDir() : ScratchDir("test") {}
  std::string File(const std::string& name) const { return path() + "/" + name; }
};

// A TCP port on 127.0.0.1 that was free when checked, outside the kernel's ephemeral range (so no
// outgoing connection takes it before the server binds it). Ports are handed out at most once per
// test process and claimed against the other test processes running at the same time.
int FreePort();

void SleepMs(int ms);

}  // namespace etcdw::testing
