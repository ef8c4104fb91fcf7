// The benchmark's tables (Markdown): one row per load workload, one per scalar figure, each with
// etcd's figure, ours, and the ratio ours/etcd.
#pragma once

#include <string>
#include <vector>

#include "fsync_probe.h"
#include "workloads.h"

namespace etcdw::bench {

struct WorkloadRun {
  const Workload* workload = nullptr;
  Outcome etcd;
  Outcome ours;
};

// disk: the disk's rates of 256 B + fdatasync in the data directory (fsync_probe.h).
std::string Report(std::vector<WorkloadRun>& runs, const DiskSyncRates& disk, bool quick);

}  // namespace etcdw::bench
