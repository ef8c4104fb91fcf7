// Rolling defragmentation of every member of the cluster (gardener §9.4), run by the backup
// leader on --defragmentation-schedule. Members are reached through the etcd v3 client API
// only, so a plain etcd 3.4 cluster is defragmented the same way.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/sidecar/cron.h"
#include "etcdw/sidecar/etcd_client.h"

namespace etcdw::sidecar {

// One round: the member list (through the cluster endpoints), then Status of every member at
// its first client URL; if any member does not answer, the cluster is not in full health and
// nothing is touched. Then followers one by one, the leader last, each with defrag_timeout.
// Returns the client URLs in the order they were defragmented; the first failure ends the
// round and is returned (naming the member).
Result<std::vector<std::string>> DefragmentCluster(const EtcdConnectionOptions& options);

// Runs DefragmentCluster at every time of the schedule: the first attempt `first_delay` after
// the schedule fires, then again every `retry` until a round succeeds (gardener: one minute
// each), or until Stop().
class DefragScheduler {
 public:
  DefragScheduler(EtcdConnectionOptions options, CronSchedule schedule,
                  std::chrono::milliseconds first_delay = std::chrono::minutes(1),
                  std::chrono::milliseconds retry = std::chrono::minutes(1));
  ~DefragScheduler();  // Stop()
  DefragScheduler(const DefragScheduler&) = delete;
  DefragScheduler& operator=(const DefragScheduler&) = delete;

  void Start();
  // Ends the schedule; waits for a round in progress (bounded by the defrag timeouts).
  void Stop();
  int rounds_succeeded() const;

 private:
  void Loop();
  // Sleeps until `until` or Stop(); false when stopped.
  bool SleepUntil(std::chrono::system_clock::time_point until);

  EtcdConnectionOptions options_;
  CronSchedule schedule_;
  std::chrono::milliseconds first_delay_, retry_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int rounds_succeeded_ = 0;
  std::thread thread_;
};

}  // namespace etcdw::sidecar
