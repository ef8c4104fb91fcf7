// Rolling defragmentation of every member of the cluster (gardener §9.4), run by the backup
// leader on --defragmentation-schedule. Members are reached through the etcd v3 client API
// only, so a plain etcd 3.4 cluster is defragmented the same way.
#pragma once

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"
#include "etcdw/sidecar/cron.h"
#include "etcdw/sidecar/etcd_client.h"
#include "etcdw/sidecar/metrics.h"

namespace etcdw::sidecar {

// One round: the member list (through the cluster endpoints), then Status of every member at
// its first client URL; if any member does not answer, the cluster is not in full health and
// nothing is touched. Then followers one by one, the leader last, each with defrag_timeout.
// Returns the client URLs in the order they were defragmented; the first failure ends the
// round and is returned (naming the member). Blocks the calling thread for the whole round;
// `clock` only times the log lines.
// Each member's Defragment call is timed into `metrics` (by its client URL) when given.
Result<std::vector<std::string>> DefragmentCluster(
    const EtcdConnectionOptions& options,
    const common::Clock& clock = common::SystemClock::Instance(),
    SidecarMetrics* metrics = nullptr);

// Runs DefragmentCluster at every time of the schedule: the first attempt `first_delay` after
// the schedule fires, then again every `retry` until a round succeeds (gardener: one minute
// each), or until Stop(). Times of the schedule that pass during a round (and its retries) are
// skipped, not caught up. Every time is calendar time on `clock` (WallNow, WaitUntilWall).
//
// Threads: Start() launches the scheduler thread, which waits on the clock and runs each round
// itself (a round blocks it for up to the connection and defrag timeouts of every member).
// Start and Stop are called by the owner (one thread at a time, never the scheduler thread);
// the accessors from any thread. Only Stop() waits for a round. The scheduler thread calls
// nothing outside this class but the etcd client and the clock.
class DefragScheduler {
 public:
  // `clock` and `metrics` (null: none) must outlive the scheduler.
  DefragScheduler(EtcdConnectionOptions options, CronSchedule schedule,
                  std::chrono::milliseconds first_delay = std::chrono::minutes(1),
                  std::chrono::milliseconds retry = std::chrono::minutes(1),
                  const common::Clock& clock = common::SystemClock::Instance(),
                  SidecarMetrics* metrics = nullptr);
  ~DefragScheduler();  // Stop()
  DefragScheduler(const DefragScheduler&) = delete;
  DefragScheduler& operator=(const DefragScheduler&) = delete;

  // Starts the scheduler thread; no-op while it runs. The schedule counts from the clock's time
  // when the thread starts.
  void Start();
  // Ends the schedule: a wait ends at once; a round in progress is waited for (bounded by the
  // defrag timeouts). Start() may follow.
  void Stop();

  int rounds_succeeded() const;
  int rounds_failed() const;
  // While the scheduler thread waits: the calendar time (on the clock) of the round it waits
  // for, a scheduled one or a retry. None while a round runs, before the thread's first wait and
  // once it has ended.
  std::optional<std::chrono::system_clock::time_point> next_round() const;

 private:
  void Loop();
  // Waits until the clock reaches `until` or Stop(); false when stopped. Publishes `until` as
  // next_round() for the wait.
  bool SleepUntil(std::chrono::system_clock::time_point until);

  const EtcdConnectionOptions options_;
  const CronSchedule schedule_;
  const std::chrono::milliseconds first_delay_, retry_;
  const common::Clock& clock_;
  SidecarMetrics* const metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // signalled with stop_
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int rounds_succeeded_ ABSL_GUARDED_BY(mu_) = 0;
  int rounds_failed_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<std::chrono::system_clock::time_point> next_round_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // the owner's: set by Start, joined by Stop
};

}  // namespace etcdw::sidecar
