#include "proc_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace etcdw::bench {

namespace {

double CpuSecondsOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces; the fields after it follow its closing ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // Fields 3..13 precede utime (14) and stime (15).
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A "Name:  N kB" line of /proc/PID/status, in bytes.
double StatusBytes(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0) {
      std::istringstream fields(line.substr(name.size() + 1));
      double kb = 0;
      fields >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

}  // namespace

double CpuSeconds(const std::vector<pid_t>& pids) {
  double sum = 0;
  for (pid_t p : pids) sum += CpuSecondsOf(p);
  return sum;
}

double SelfCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

double RssBytes(const std::vector<pid_t>& pids) {
  double sum = 0;
  for (pid_t p : pids) sum += StatusBytes(p, "VmRSS");
  return sum;
}

double PeakRssBytes(const std::vector<pid_t>& pids) {
  double sum = 0;
  for (pid_t p : pids) sum += StatusBytes(p, "VmHWM");
  return sum;
}

bool ResetPeakRss(const std::vector<pid_t>& pids) {
  bool ok = true;
  for (pid_t p : pids) {
    std::ofstream out("/proc/" + std::to_string(p) + "/clear_refs");
    out << "5";
    out.flush();
    ok = ok && out.good();
  }
  return ok;
}

}  // namespace etcdw::bench
