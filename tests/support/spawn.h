// Starting child processes that cannot outlive the test process.
//
// A test that crashes, or that ctest kills at its timeout, must not leave the servers it started
// running: they would hold ports and CPU for the rest of the suite. Every child is therefore
// started with PR_SET_PDEATHSIG(SIGKILL). The kernel sends that signal when the *thread* that
// forked the child exits, not the process, and tests start and restart servers from helper
// threads; so every child is forked by one thread that lives as long as the process.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace etcdw::testing {

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH if it has no '/'
  // The child's environment ("NAME=value" entries); nullopt: this process's.
  std::optional<std::vector<std::string>> env;
  std::string stdin_path = "/dev/null";
  std::string stdout_path;  // created if missing
  bool append = false;      // append to stdout_path instead of truncating it
  std::string stderr_path;  // empty: stderr goes where stdout goes
};

// Starts the child and returns its pid, or -1 with `*error` saying what failed (the program
// not found or not executable, a file that cannot be opened, exec failing).
pid_t SpawnChild(const SpawnSpec& spec, std::string* error);

}  // namespace etcdw::testing
