#include "process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "spawn.h"

extern char** environ;

namespace etcdw::testing {

Process::~Process() { Kill(); }

bool Process::Start(const std::vector<std::string>& argv, const std::string& log_path,
                    const std::vector<std::string>& extra_env) {
  // extra_env: "NAME=value" sets (replacing the inherited value), "NAME" unsets.
  auto name_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
  SpawnSpec spec;
  spec.argv = argv;
  spec.env.emplace();
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    bool overridden = false;
    for (const auto& x : extra_env) overridden |= name_of(x) == name_of(entry);
    if (!overridden) spec.env->push_back(std::move(entry));
  }
  for (const auto& e : extra_env) {
    if (e.find('=') != std::string::npos) spec.env->push_back(e);
  }
  spec.stdout_path = log_path;
  spec.append = true;
  std::string error;
  pid_ = SpawnChild(spec, &error);
  status_.reset();
  if (pid_ < 0) std::ofstream(log_path, std::ios::app) << error << "\n";  // where callers look
  return pid_ > 0;
}

bool Process::Running() {
  if (pid_ <= 0) return false;
  if (status_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

void Process::Signal(int sig) {
  if (Running()) ::kill(pid_, sig);
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status_;
}

void Process::Kill() {
  if (pid_ <= 0) return;
  if (Running()) {
    ::kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
  pid_ = -1;
}

namespace {
// Runs argv with stdin from `stdin_data`; stdout goes to out_path, stderr to err_path (or to
// stdout when err_path is empty).
int Spawn(const std::vector<std::string>& argv, const std::string& in_path,
          const std::string& out_path, const std::string& err_path,
          std::chrono::milliseconds timeout, std::string* spawn_error) {
  SpawnSpec spec;
  spec.argv = argv;
  spec.stdin_path = in_path;
  spec.stdout_path = out_path;
  spec.stderr_path = err_path;
  pid_t pid = SpawnChild(spec, spawn_error);
  if (pid < 0) return -1;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int st = 0;
  while (true) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}
}  // namespace

int RunCommand(const std::vector<std::string>& argv, std::string* output,
               std::chrono::milliseconds timeout, const std::string& stdin_data) {
  TempDir dir;
  std::string out_path = dir.File("out");
  std::string in_path = dir.File("in");
  WriteFile(in_path, stdin_data);
  std::string spawn_error;
  int result = Spawn(argv, in_path, out_path, "", timeout, &spawn_error);
  if (output) *output = spawn_error.empty() ? ReadFile(out_path) : spawn_error;
  return result;
}

int RunCommandSplit(const std::vector<std::string>& argv, std::string* stdout_text,
                    std::string* stderr_text, std::chrono::milliseconds timeout,
                    const std::string& stdin_data) {
  TempDir dir;
  std::string in_path = dir.File("in");
  WriteFile(in_path, stdin_data);
  std::string spawn_error;
  int result = Spawn(argv, in_path, dir.File("out"), dir.File("err"), timeout, &spawn_error);
  if (stdout_text) *stdout_text = ReadFile(dir.File("out"));
  if (stderr_text) {
    *stderr_text = spawn_error.empty() ? ReadFile(dir.File("err")) : spawn_error;
  }
  return result;
}

namespace {

// The kernel's ephemeral range [low, high]: outgoing connections take their local ports from it,
// so a port picked there can be taken by any connect() before the server under test binds it.
std::pair<int, int> EphemeralRange() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768, high = 60999;
  in >> low >> high;
  return {low, high};
}

bool CanBind(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as the servers bind
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Claims `port` for this process among all test processes (ctest runs several at once): an
// exclusive flock on a per-port file, held until the process exits (the kernel drops it then,
// also after a crash).
bool ClaimAcrossProcesses(int port) {
  static const std::string dir = [] {
    std::string d = std::filesystem::temp_directory_path().string() + "/etcdw-test-ports";
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
    return d;
  }();
  std::string path = dir + "/" + std::to_string(port);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return false;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return false;
  }
  return true;  // fd deliberately kept open: the claim lasts as long as the process
}

}  // namespace

int FreePort() {
  static std::mutex mu;
  static std::set<int> used;
  std::lock_guard lock(mu);
  // Candidates lie below the ephemeral range (never handed to outgoing connections), from a
  // per-process random start so that parallel test processes rarely contend for the same lock.
  auto [ephemeral_low, ephemeral_high] = EphemeralRange();
  const int lo = 10000;
  const int hi = ephemeral_low > lo + 1000 ? ephemeral_low - 1 : 65535;
  static std::mt19937 rng(
      static_cast<unsigned>(::getpid()) ^
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  const int span = hi - lo + 1;
  int first = lo + static_cast<int>(rng() % static_cast<unsigned>(span));
  for (int i = 0; i < span; ++i) {
    int port = lo + (first - lo + i) % span;
    if (hi == 65535 && port >= ephemeral_low && port <= ephemeral_high) continue;
    if (used.count(port) || !CanBind(port) || !ClaimAcrossProcesses(port)) continue;
    used.insert(port);
    return port;
  }
  return -1;
}

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace etcdw::testing
