// WriteProcessMetrics and WriteGoProcessMetrics (common/metrics.h): the process's figures from
// /proc/self.
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "etcdw/common/metrics.h"

namespace etcdw::common {

namespace {

// The fields of /proc/self/stat after the command name (which may hold spaces): [0] is the
// state, field N of proc(5) is at [N - 3].
std::vector<std::string> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> fields;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream rest(line.substr(close + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

double Field(const std::vector<std::string>& f, size_t proc5_number) {
  const size_t i = proc5_number - 3;
  return i < f.size() ? std::stod(f[i]) : 0;
}

// Seconds since the epoch at which the machine booted (/proc/stat "btime").
double BootTime() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double t = 0;
      in >> t;
      return t;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

double OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  double n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the directory's own descriptor
}

// A limit as Go reports it: RLIM_INFINITY is the largest uint64.
double Limit(int resource) {
  rlimit l{};
  if (getrlimit(resource, &l) != 0) return 0;
  return static_cast<double>(l.rlim_cur);
}

// The families both WriteProcessMetrics and WriteGoProcessMetrics write; returns the open and
// the most file descriptors.
std::pair<double, double> WriteCommonProcessFamilies(MetricsPage& page) {
  const std::vector<std::string> stat = StatFields();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page_size = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double fds = OpenFds();
  const double max_fds = Limit(RLIMIT_NOFILE);
  page.Counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
               (Field(stat, 14) + Field(stat, 15)) / ticks);
  page.Gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
             Field(stat, 24) * page_size);
  page.Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", Field(stat, 23));
  page.Gauge("process_virtual_memory_max_bytes",
             "Maximum amount of virtual memory available in bytes.", Limit(RLIMIT_AS));
  page.Gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
             BootTime() + Field(stat, 22) / ticks);
  page.Gauge("process_open_fds", "Number of open file descriptors.", fds);
  page.Gauge("process_max_fds", "Maximum number of open file descriptors.", max_fds);
  return {fds, max_fds};
}

// InOctets and OutOctets of the "IpExt:" lines of /proc/self/net/netstat (a line of names, then
// one of values); zero when absent, as Go's collector reports them.
std::pair<double, double> IpOctets() {
  std::ifstream in("/proc/self/net/netstat");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("IpExt:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    std::vector<std::string> words;
    for (std::string w; fields >> w;) words.push_back(w);
    if (names.empty()) {
      names = std::move(words);
      continue;
    }
    double in_octets = 0;
    double out_octets = 0;
    for (size_t i = 0; i < names.size() && i < words.size(); ++i) {
      if (names[i] == "InOctets") in_octets = std::strtod(words[i].c_str(), nullptr);
      if (names[i] == "OutOctets") out_octets = std::strtod(words[i].c_str(), nullptr);
    }
    return {in_octets, out_octets};
  }
  return {0, 0};
}

}  // namespace

void WriteProcessMetrics(MetricsPage& page) {
  const auto [fds, max_fds] = WriteCommonProcessFamilies(page);
  page.Gauge("os_fd_used", "The number of used file descriptors.", fds);
  page.Gauge("os_fd_limit", "The file descriptor limit.", max_fds);
}

void WriteGoProcessMetrics(MetricsPage& page) {
  WriteCommonProcessFamilies(page);
  const auto [in_octets, out_octets] = IpOctets();
  page.Counter("process_network_receive_bytes_total",
               "Number of bytes received by the process over the network.", in_octets);
  page.Counter("process_network_transmit_bytes_total",
               "Number of bytes sent by the process over the network.", out_octets);
}

}  // namespace etcdw::common
