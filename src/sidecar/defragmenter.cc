#include "etcdw/sidecar/defragmenter.h"

#include <algorithm>
#include <optional>

#include "etcdw/common/logging.h"

namespace etcdw::sidecar {

using std::chrono::milliseconds;

Result<std::vector<std::string>> DefragmentCluster(const EtcdConnectionOptions& o,
                                                   const common::Clock& clock,
                                                   SidecarMetrics* metrics) {
  ETCDW_ASSIGN_OR_RETURN(EtcdClient::Cluster cluster, EtcdClient::ConnectToCluster(o));
  const auto& members = cluster.members;

  // Every member must answer before any is touched.
  struct Target {
    std::string url;
    std::unique_ptr<EtcdClient> client;
    uint64_t db_size = 0;
  };
  std::vector<Target> followers;
  std::optional<Target> leader;
  for (const auto& m : members.members()) {
    if (m.clienturls().empty()) {
      return Unavailable("member " + m.name() + " has no client URL (not started yet)");
    }
    Target t{m.clienturls(0), nullptr, 0};
    ETCDW_ASSIGN_OR_RETURN(t.client, EtcdClient::Connect(o, t.url));
    auto st = t.client->EndpointStatus(o.connection_timeout);
    if (!st.ok()) {
      return Status(st.status().code(), "the cluster is not in full health: member " + m.name() +
                                            " at " + t.url + ": " + st.status().message());
    }
    t.db_size = static_cast<uint64_t>(st->dbsize());
    if (st->leader() == st->header().member_id()) {
      leader = std::move(t);
    } else {
      followers.push_back(std::move(t));
    }
  }
  if (leader) followers.push_back(std::move(*leader));  // the leader last

  std::vector<std::string> done;
  for (auto& t : followers) {
    log::Info("defragmenting etcd member",
              {log::F("endpoint", t.url), log::F("db-size-before", t.db_size)});
    const common::Clock::TimePoint started = clock.Now();
    Status st = t.client->Defragment(o.defrag_timeout);
    if (metrics != nullptr) {
      metrics->Defragmentation(t.url).Observe(
          st.ok(), std::chrono::duration<double>(clock.Now() - started).count());
    }
    if (!st.ok()) return st.WithContext("defragmenting " + t.url);
    auto after = t.client->EndpointStatus(o.connection_timeout);
    log::Info("defragmented etcd member",
              {log::F("endpoint", t.url),
               log::F("db-size-after", after.ok() ? static_cast<uint64_t>(after->dbsize()) : 0),
               log::F("seconds", std::chrono::duration<double>(clock.Now() - started).count())});
    done.push_back(t.url);
  }
  return done;
}

DefragScheduler::DefragScheduler(EtcdConnectionOptions options, CronSchedule schedule,
                                 milliseconds first_delay, milliseconds retry,
                                 const common::Clock& clock, SidecarMetrics* metrics)
    : options_(std::move(options)),
      schedule_(std::move(schedule)),
      first_delay_(first_delay),
      retry_(retry),
      clock_(clock),
      metrics_(metrics) {}

DefragScheduler::~DefragScheduler() { Stop(); }

void DefragScheduler::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void DefragScheduler::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

int DefragScheduler::rounds_succeeded() const {
  std::lock_guard<std::mutex> l(mu_);
  return rounds_succeeded_;
}

int DefragScheduler::rounds_failed() const {
  std::lock_guard<std::mutex> l(mu_);
  return rounds_failed_;
}

std::optional<std::chrono::system_clock::time_point> DefragScheduler::next_round() const {
  std::lock_guard<std::mutex> l(mu_);
  return next_round_;
}

bool DefragScheduler::SleepUntil(std::chrono::system_clock::time_point until) {
  std::unique_lock<std::mutex> l(mu_);
  next_round_ = until;
  clock_.WaitUntilWall(l, cv_, until, [&] { return stop_; });
  next_round_.reset();
  return !stop_;
}

void DefragScheduler::Loop() {
  log::Info("defragmentation scheduled", {log::F("schedule", schedule_.spec())});
  auto last = clock_.WallNow();
  while (true) {
    auto next = schedule_.Next(last);
    if (!next) return;  // never fires again
    last = *next;
    if (!SleepUntil(*next + first_delay_)) return;
    // Retried until a round succeeds (a member may be restarting) or leadership ends.
    while (true) {
      auto r = DefragmentCluster(options_, clock_, metrics_);
      {
        std::lock_guard<std::mutex> l(mu_);
        if (r.ok()) {
          ++rounds_succeeded_;
        } else {
          ++rounds_failed_;
        }
      }
      if (r.ok()) break;
      log::Warn("defragmentation failed; retrying",
                {log::F("error", r.status()), log::F("retry-ms", retry_.count())});
      if (!SleepUntil(clock_.WallNow() + retry_)) return;
    }
    // Times that passed during the round are skipped, not caught up.
    last = std::max(last, clock_.WallNow());
  }
}

}  // namespace etcdw::sidecar
