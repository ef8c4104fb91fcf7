#include "spawn.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

extern char** environ;

namespace etcdw::testing {

namespace {

// The thread every child is forked from; it never exits (see spawn.h). Jobs run in order.
class Spawner {
 public:
  static Spawner& Get() {
    static Spawner* s = new Spawner();  // never destroyed: the thread must outlive every child
    return *s;
  }

  pid_t Run(const std::function<pid_t()>& job) {
    Job j{&job};
    std::unique_lock lock(mu_);
    jobs_.push_back(&j);
    cv_.notify_all();
    cv_.wait(lock, [&] { return j.done; });
    return j.pid;
  }

 private:
  struct Job {
    const std::function<pid_t()>* fn;
    pid_t pid = -1;
    bool done = false;
  };

  Spawner() {
    std::thread([this] {
      std::unique_lock lock(mu_);
      while (true) {
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        Job* j = jobs_.front();
        jobs_.pop_front();
        lock.unlock();
        pid_t pid = (*j->fn)();
        lock.lock();
        j->pid = pid;
        j->done = true;
        cv_.notify_all();
      }
    }).detach();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> jobs_;
};

// argv[0] as execve needs it: a path to an executable file, or "" if there is none.
std::string Resolve(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return ::access(program.c_str(), X_OK) == 0 ? program : "";
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// The steps of Child that can fail, as reported to the parent (kStepNames in this order).
enum Step : int { kOpenStdin, kOpenStdout, kOpenStderr, kExec };
const char* const kStepNames[] = {"open stdin", "open stdout", "open stderr", "exec"};

[[noreturn]] void Fail(int report, Step step) {
  int msg[2] = {step, errno};
  (void)!::write(report, msg, sizeof msg);
  ::_exit(127);
}

// Opens `path` onto descriptor `fd`; false on failure.
bool OpenOnto(const char* path, int flags, int fd) {
  int opened = ::open(path, flags, 0644);
  if (opened < 0) return false;
  if (opened == fd) return true;
  bool ok = ::dup2(opened, fd) == fd;
  ::close(opened);
  return ok;
}

// In the child, between fork and exec: only async-signal-safe calls. A failure writes the step
// and errno to `report` (closed on exec, so the parent reads nothing when exec succeeds).
[[noreturn]] void Child(pid_t parent, int report, const char* path, char* const* argv,
                        char* const* envp, const SpawnSpec& spec, int out_flags) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the test process died before the prctl
  if (!OpenOnto(spec.stdin_path.c_str(), O_RDONLY, 0)) Fail(report, kOpenStdin);
  if (!OpenOnto(spec.stdout_path.c_str(), out_flags, 1)) Fail(report, kOpenStdout);
  if (spec.stderr_path.empty()) {
    if (::dup2(1, 2) < 0) Fail(report, kOpenStderr);
  } else if (!OpenOnto(spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 2)) {
    Fail(report, kOpenStderr);
  }
  // Nothing else of the test process is inherited (a descriptor held open by a server would
  // keep, say, a death test's pipe from reaching end-of-file).
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  // Default dispositions and an empty mask, whatever the forking thread had.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(path, argv, envp);
  Fail(report, kExec);
}

}  // namespace

pid_t SpawnChild(const SpawnSpec& spec, std::string* error) {
  if (spec.argv.empty()) {
    *error = "spawn: no program given";
    return -1;
  }
  const std::string path = Resolve(spec.argv[0]);
  if (path.empty()) {
    *error = "spawn " + spec.argv[0] + ": not found or not executable";
    return -1;
  }
  // Everything the child needs is built here: it must not allocate.
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> env;
  if (spec.env) {
    for (const auto& e : *spec.env) env.push_back(const_cast<char*>(e.c_str()));
    env.push_back(nullptr);
  }
  char* const* envp = spec.env ? env.data() : environ;
  const int out_flags = O_WRONLY | O_CREAT | (spec.append ? O_APPEND : O_TRUNC);

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    *error = std::string("spawn: pipe: ") + std::strerror(errno);
    return -1;
  }
  const pid_t parent = ::getpid();
  int fork_errno = 0;
  pid_t pid = Spawner::Get().Run([&]() -> pid_t {
    pid_t p = ::fork();
    if (p == 0) Child(parent, report[1], path.c_str(), argv.data(), envp, spec, out_flags);
    if (p < 0) fork_errno = errno;
    return p;
  });
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    *error = std::string("spawn: fork: ") + std::strerror(fork_errno);
    return -1;
  }
  int msg[2];
  ssize_t n;
  do {
    n = ::read(report[0], msg, sizeof msg);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof msg)) {
    const int step = msg[0] >= kOpenStdin && msg[0] <= kExec ? msg[0] : kExec;
    *error = "spawn " + spec.argv[0] + ": " + kStepNames[step] + ": " + std::strerror(msg[1]);
    ::waitpid(pid, nullptr, 0);  // it exits at once
    return -1;
  }
  return pid;
}

}  // namespace etcdw::testing
