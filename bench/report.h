// The benchmark's tables (Markdown): one row per load workload, one per scalar figure, each with
// etcd's figure, ours, and the ratio ours/etcd.
#pragma once

#include <string>
#include <vector>

#include "workloads.h"

namespace etcdw::bench {

struct WorkloadRun {
  const Workload* workload = nullptr;
  Outcome etcd;
  Outcome ours;
};

// fsyncs_per_sec: the disk's rate of appending 256 B + fdatasync in the data directory.
std::string Report(std::vector<WorkloadRun>& runs, double fsyncs_per_sec, bool quick);

}  // namespace etcdw::bench
