// The launcher every end-to-end test starts servers with (tests/support/process.h): children
// cannot outlive the test process, whichever thread started them.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "process.h"

namespace etcdw::testing {
namespace {

// Whether `pid` has exited (gone, or a zombie nobody has reaped yet).
bool Exited(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return true;
  auto end = stat.rfind(')');
  return end == std::string::npos || stat.substr(end + 2, 1) == "Z";
}

TEST(LauncherTest, AChildStartedFromAThreadThatEndedKeepsRunning) {
  TempDir dir;
  Process p;
  bool started = false;
  std::thread t([&] { started = p.Start({"sleep", "30"}, dir.File("log")); });
  t.join();
  ASSERT_TRUE(started);
  SleepMs(300);
  EXPECT_TRUE(p.Running()) << "the child died with the thread that started it";
  p.Kill();
  EXPECT_FALSE(p.Running());
}

TEST(LauncherTest, ChildrenDieWithTheTestProcess) {
  // The death test's process runs this binary again (threadsafe style, so the launcher's
  // thread exists in it); it names the file after its parent, this process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto pid_file = [](pid_t test_process) {
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp && *tmp ? tmp : "/tmp") + "/etcdw-launcher-test-" +
           std::to_string(test_process);
  };
  TempDir dir;
  // It starts a child and crashes without cleaning up.
  EXPECT_EXIT(
      {
        static Process p;  // abort() below runs no destructor anyway
        if (!p.Start({"sleep", "30"}, dir.File("log"))) std::_Exit(3);
        WriteFile(pid_file(getppid()), std::to_string(p.pid()));
        std::abort();
      },
      ::testing::KilledBySignal(SIGABRT), "");
  const std::string pid_text = ReadFile(pid_file(getpid()));
  std::remove(pid_file(getpid()).c_str());
  ASSERT_FALSE(pid_text.empty());
  const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
  EXPECT_TRUE(WaitUntil([&] { return Exited(pid); }, std::chrono::seconds(5)))
      << "the child outlived the process that started it";
  if (!Exited(pid)) ::kill(pid, SIGKILL);
}

TEST(LauncherTest, FailuresToStartSayWhy) {
  std::string out;
  EXPECT_EQ(RunCommand({"/nonexistent/etcd-wrapper"}, &out), -1);
  EXPECT_NE(out.find("/nonexistent/etcd-wrapper: not found or not executable"), std::string::npos)
      << out;
  TempDir dir;
  Process p;
  EXPECT_FALSE(p.Start({"sleep", "1"}, dir.File("missing-dir/log")));
  EXPECT_FALSE(p.Running());
}

}  // namespace
}  // namespace etcdw::testing
