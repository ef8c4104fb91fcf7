// Names for the process's own threads, as `top -H`, `ps -L`, `perf` and /proc/PID/task/*/comm
// show them, so an operator or a profile can tell the Raft loop from the watch sender.
#pragma once

#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace etcdw::common {

// Names the calling thread. Linux keeps at most 15 bytes; longer names are cut.
void NameThisThread(std::string_view name);

// The calling thread's name ("" if it cannot be read).
std::string ThisThreadName();

// Names `t` (a thread not yet joined); cut as NameThisThread cuts.
void NameThread(std::thread& t, std::string_view name);

// Starts a thread named `name` that runs `body`. The name is set before this returns (whoever
// lists the threads next sees it) and by the thread itself before `body`.
template <typename Body>
std::thread NamedThread(std::string name, Body body) {
  std::thread t([name, body = std::move(body)]() mutable {
    NameThisThread(name);
    body();
  });
  NameThread(t, name);
  return t;
}

}  // namespace etcdw::common
