// What a server process costs, read from /proc: CPU time and resident memory.
#pragma once

#include <sys/types.h>

#include <vector>

namespace etcdw::bench {

// User + system CPU seconds the processes have used so far (summed; 0 for a gone process).
double CpuSeconds(const std::vector<pid_t>& pids);
// User + system CPU seconds this process (the benchmark's clients) has used so far.
double SelfCpuSeconds();
// Resident set size now (VmRSS), and its peak since start or the last ResetPeakRss (VmHWM), in
// bytes, summed over the processes.
double RssBytes(const std::vector<pid_t>& pids);
double PeakRssBytes(const std::vector<pid_t>& pids);
// Restarts the peak at the current RSS (writes 5 to /proc/PID/clear_refs). False if the kernel
// refused (the peak then counts from the process start).
bool ResetPeakRss(const std::vector<pid_t>& pids);

}  // namespace etcdw::bench
