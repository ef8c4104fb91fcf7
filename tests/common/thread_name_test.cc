#include "etcdw/common/thread_name.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace etcdw::common {
namespace {

// What ps, top and perf read: /proc/self/task/TID/comm.
std::string CommOf(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = ThisThreadName();
  std::string inside, comm;
  std::thread t([&] {
    NameThisThread("raft-loop");
    inside = ThisThreadName();
    comm = CommOf(static_cast<pid_t>(syscall(SYS_gettid)));
  });
  t.join();
  EXPECT_EQ(inside, "raft-loop");
  EXPECT_EQ(comm, "raft-loop");
  EXPECT_EQ(ThisThreadName(), before);
}

TEST(ThreadNameTest, NamedThreadRunsItsBodyUnderItsName) {
  std::string inside;
  std::thread t = NamedThread("watch-sender", [&] { inside = ThisThreadName(); });
  t.join();
  EXPECT_EQ(inside, "watch-sender");
}

TEST(ThreadNameTest, ANamedThreadIsListedUnderItsNameWhenItsStartReturns) {
  // Listed once, at once: a start that left the naming to the new thread alone failed this
  // whenever the thread had not run yet (a test listing a member's threads right after its
  // start saw one unnamed).
  std::atomic<bool> go{false};
  std::thread t = NamedThread("member-ticker", [&] {
    while (!go.load()) std::this_thread::yield();
  });
  int listed = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    if (CommOf(static_cast<pid_t>(std::stoi(e.path().filename().string()))) == "member-ticker") {
      ++listed;
    }
  }
  go = true;
  t.join();
  EXPECT_EQ(listed, 1);
}

TEST(ThreadNameTest, LongNamesAreCutToFifteenBytes) {
  std::string inside;
  std::thread t([&] {
    NameThisThread("a-name-longer-than-the-kernel-keeps");
    inside = ThisThreadName();
  });
  t.join();
  EXPECT_EQ(inside, "a-name-longer-t");
}

}  // namespace
}  // namespace etcdw::common
