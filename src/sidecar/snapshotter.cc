#include "etcdw/sidecar/snapshotter.h"

#include <absl/base/thread_annotations.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <future>
#include <utility>
#include <vector>

#include "etcdw/common/logging.h"
#include "etcdw/sidecar/delta.h"
#include "etcdw/sidecar/snapshot_verify.h"
#include "file_util.h"
#include "local_time.h"

namespace etcdw::sidecar {
namespace {

using SystemTime = std::chrono::system_clock::time_point;
using SteadyTime = std::chrono::steady_clock::time_point;

// gardener's thresholds: deltas are off below one second, GC at or below one second.
constexpr std::chrono::milliseconds kMinDeltaPeriod{1000};
constexpr std::chrono::milliseconds kMinGcPeriod{1000};
// Any key: only the response header's revision (the store's current revision) is used.
constexpr char kRevisionProbeKey[] = "foo";

// A snapshot's creation time as gardener's metrics give it: whole unix seconds.
double UnixSeconds(SystemTime t) {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count());
}

// `d` in hours, fraction included (gardener compares hours as floats).
double Hours(std::chrono::system_clock::duration d) {
  return std::chrono::duration<double, std::ratio<3600>>(d).count();
}

}  // namespace

// All snapshot state is owned by the thread running Run() ("the loop"). Other threads talk to
// it through `mu_`: the watch pump queues responses, triggers queue requests, Stop() sets
// `stop_`; the loop waits on `cv_` for any of them or for the next timer. GC runs on a thread
// of its own and shares only the store (whose implementations are thread-safe) and
// `last_revision_`; it waits on `gc_cv_` (with `mu_`) for its period or `gc_stop_`.
// Lock order: `mu_` is a leaf; it is never held across a call to the store, the member or a
// promise's waiter.
class Snapshotter::Impl {
 public:
  Impl(SnapStore& store, EtcdClient& client, SnapshotterOptions options, const common::Clock& clock,
       std::atomic<bool>* active)
      : store_(store),
        client_(client),
        opts_(std::move(options)),
        clock_(clock),
        active_(active),
        metrics_(opts_.metrics != nullptr ? *opts_.metrics : own_metrics_) {}
  ~Impl() { CloseWatch(); }

  Status Run();
  void Stop();
  Result<std::optional<SnapshotInfo>> Trigger(bool full, bool final);
  size_t QueuedTriggers() ABSL_LOCKS_EXCLUDED(mu_) {
    std::lock_guard<std::mutex> l(mu_);
    return requests_.size();
  }

 private:
  using TriggerResult = Result<std::optional<SnapshotInfo>>;
  struct Request {
    bool full = false;
    bool final = false;
    std::promise<TriggerResult> done;
  };
  // One response of the watch, or the error that ended it.
  struct WatchItem {
    std::optional<etcdserverpb::WatchResponse> response;
    Status error;
  };

  bool DeltasEnabled() const { return opts_.delta_period >= kMinDeltaPeriod; }
  bool GcEnabled() const { return opts_.gc_period > kMinGcPeriod; }

  Status RunBody();
  Status Loop();
  // Reads the latest set from the store into prev_*.
  Status LoadState();
  bool FullSnapshotRequiredAtStartup(SystemTime now) const;
  // Watches from the previous snapshot's last revision + 1 up to the current revision, cutting
  // memory-limit deltas on the way. Sets *stopped when Stop() came first.
  Status CollectEventsSincePrevious(bool* stopped);
  // Handles queued watch items until the watch has delivered `revision` (or Stop(), or no
  // progress for connection_timeout: DeadlineExceeded).
  Status DrainWatchUntil(int64_t revision, bool* stopped);

  // A full snapshot (SaveFullSnapshot), its outcome recorded in prev_full_succeeded_ and
  // reported to on_full_snapshot.
  Result<SnapshotInfo> TakeFull(bool final);
  Result<SnapshotInfo> SaveFullSnapshot(bool final);
  // A delta snapshot of the buffered events (SaveDelta; none without events), reported to
  // on_delta_period either way.
  Result<std::optional<SnapshotInfo>> TakeDelta();
  Result<std::optional<SnapshotInfo>> SaveDelta();
  Status HandleWatchItem(const WatchItem& item);
  Status ServeRequest(Request& req);

  // The next cron time after `fired` (a scheduled snapshot's own time; none: now). One cron time
  // the clock passed meanwhile fires at once; after several, the schedule resumes after now.
  Status ResetFullTimer(std::optional<SystemTime> fired = std::nullopt);
  void ResetDeltaTimer() { next_delta_ = clock_.Now() + opts_.delta_period; }
  Result<int64_t> CurrentRevision();

  Status OpenWatch(int64_t from_revision);
  void CloseWatch();
  void PumpWatch(EtcdClient::Watch* watch);

  void StartGc();
  void StopGc();
  void GcLoop(SteadyTime first_due);
  void CollectGarbage();

  // Set at construction, read-only after (every thread reads them; the store, the client and
  // the clock are thread-safe).
  SnapStore& store_;
  EtcdClient& client_;
  const SnapshotterOptions opts_;
  const common::Clock& clock_;
  std::atomic<bool>* const active_;  // the Snapshotter's flag: written by the loop only
  SidecarMetrics own_metrics_;       // counts when the options name no metrics
  SidecarMetrics& metrics_;          // thread-safe

  // Loop thread only (and the destructor, once Run() has returned): no lock.
  SnapshotInfo prev_;  // the newest snapshot taken or found (a zero Full when none)
  std::optional<SnapshotInfo> prev_full_;
  bool prev_full_succeeded_ = true;  // survives Run() calls
  DeltaWriter delta_;
  std::unique_ptr<EtcdClient::Watch> watch_;  // the pump thread uses it until joined
  std::thread pump_;                          // started and joined by the loop
  int64_t watched_revision_ = 0;              // every event up to this revision has been handled
  SystemTime next_full_;
  SteadyTime next_delta_;
  std::thread gc_thread_;  // started and joined by the loop

  // Atomics: written by the loop, read by the pump (closing_watch_) or GC (last_revision_).
  std::atomic<bool> closing_watch_{false};
  std::atomic<int64_t> last_revision_{0};  // prev_.last_revision, for GC's chunk rule

  std::mutex mu_;
  std::condition_variable cv_;     // with mu_: stop_, requests_, watch_items_, running_
  std::condition_variable gc_cv_;  // with mu_: gc_stop_
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  // Triggers are queued from the start of Run until it ends.
  bool accepting_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::unique_ptr<Request>> requests_ ABSL_GUARDED_BY(mu_);
  std::deque<WatchItem> watch_items_ ABSL_GUARDED_BY(mu_);
  bool gc_stop_ ABSL_GUARDED_BY(mu_) = false;
};

Status Snapshotter::Impl::Run() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (running_) return FailedPrecondition("snapshotter is already running");
    if (stop_) return Status::Ok();
    running_ = true;
    accepting_ = true;  // triggers during the start-up snapshot wait for the loop
  }
  log::Info("starting the snapshotter",
            {log::F("store", store_.Describe()), log::F("schedule", opts_.schedule.spec())});
  Status st = RunBody();

  active_->store(false);
  std::deque<std::unique_ptr<Request>> unanswered;
  {
    std::lock_guard<std::mutex> l(mu_);
    accepting_ = false;
    unanswered.swap(requests_);
  }
  for (auto& r : unanswered) {
    r->done.set_value(st.ok() ? FailedPrecondition("snapshotter stopped")
                              : st.WithContext("snapshotter failed"));
  }
  StopGc();
  CloseWatch();
  delta_ = DeltaWriter();
  if (st.ok()) {
    log::Info("snapshotter stopped");
  } else {
    metrics_.CountSnapshotterFailure(st.message());
    log::Error("snapshotter failed", {log::F("error", st)});
  }
  std::lock_guard<std::mutex> l(mu_);
  running_ = false;
  cv_.notify_all();
  return st;
}

Status Snapshotter::Impl::RunBody() {
  std::error_code ec;
  std::filesystem::create_directories(opts_.temp_dir, ec);
  if (ec) {
    return Internal("cannot create the snapstore temp directory \"" + opts_.temp_dir +
                    "\": " + ec.message());
  }
  ETCDW_RETURN_IF_ERROR(LoadState());

  // gardener §5.7: a delta of the events since the latest backup when the latest full
  // snapshot is recent enough, else (or when collecting fails) a full snapshot.
  bool initial_delta_taken = false;
  if (!FullSnapshotRequiredAtStartup(clock_.WallNow())) {
    bool stopped = false;
    Status collected = CollectEventsSincePrevious(&stopped);
    if (stopped) return Status::Ok();
    if (collected.ok()) {
      auto d = TakeDelta();
      if (!d.ok()) return d.status().WithContext("initial delta snapshot");
      initial_delta_taken = true;
      if (!DeltasEnabled()) CloseWatch();
    } else {
      log::Warn("failed to collect events for the first delta snapshot; taking a full snapshot",
                {log::F("error", collected)});
    }
  }
  if (!initial_delta_taken) {
    metrics_.SnapshotRequired(MetricKind::kIncr).Set(0);
    metrics_.SnapshotRequired(MetricKind::kFull).Set(1);
    auto f = TakeFull(false);
    if (!f.ok()) return f.status().WithContext("initial full snapshot");
  }
  ETCDW_RETURN_IF_ERROR(ResetFullTimer());
  ResetDeltaTimer();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return Status::Ok();
  }
  StartGc();  // its first run is due gc_period from now, before active() turns true
  active_->store(true);
  return Loop();
}

Status Snapshotter::Impl::Loop() {
  for (;;) {
    std::deque<WatchItem> items;
    std::unique_ptr<Request> request;
    {
      std::unique_lock<std::mutex> l(mu_);
      // The calendar deadline of the next full snapshot, as a monotonic one: the earlier of
      // the two timers ends the wait.
      const SystemTime now_wall = clock_.WallNow();
      const SteadyTime now = clock_.Now();
      SteadyTime deadline = now + std::max<std::chrono::system_clock::duration>(
                                      next_full_ - now_wall, std::chrono::nanoseconds(0));
      if (DeltasEnabled()) deadline = std::min(deadline, next_delta_);
      clock_.WaitUntil(l, cv_, deadline,
                       [&] { return stop_ || !requests_.empty() || !watch_items_.empty(); });
      if (stop_) return Status::Ok();
      items.swap(watch_items_);
      if (!requests_.empty()) {
        request = std::move(requests_.front());
        requests_.pop_front();
      }
    }
    for (const auto& item : items) ETCDW_RETURN_IF_ERROR(HandleWatchItem(item));
    if (request) ETCDW_RETURN_IF_ERROR(ServeRequest(*request));

    if (clock_.WallNow() >= next_full_) {
      log::Info("taking scheduled full snapshot");
      auto f = TakeFull(false);
      if (!f.ok()) return f.status().WithContext("scheduled full snapshot");
      // From the time that fired, not from now: a cron time the clock reached while the
      // snapshot was being taken is still taken.
      ETCDW_RETURN_IF_ERROR(ResetFullTimer(next_full_));
    }
    if (DeltasEnabled() && clock_.Now() >= next_delta_) {
      auto d = TakeDelta();
      if (!d.ok()) return d.status().WithContext("scheduled delta snapshot");
      ResetDeltaTimer();
    }
  }
}

Status Snapshotter::Impl::ServeRequest(Request& req) {
  if (req.full) {
    log::Info("taking out-of-schedule full snapshot", {log::F("final", req.final)});
    auto f = TakeFull(req.final);
    Status st = f.status();
    if (f.ok()) st = ResetFullTimer();
    if (!st.ok()) {
      req.done.set_value(st);
      return st.WithContext("out-of-schedule full snapshot");
    }
    req.done.set_value(std::optional<SnapshotInfo>(std::move(f).value()));
    return Status::Ok();
  }
  log::Info("taking out-of-schedule delta snapshot");
  // Include every write acknowledged before the request: drain the watch up to the current
  // revision. A failure here only shortens the delta; the watch's own errors end the loop.
  auto rev = CurrentRevision();
  if (rev.ok()) {
    bool stopped = false;
    Status drained = DrainWatchUntil(*rev, &stopped);
    if (!drained.ok() && drained.code() != Code::kDeadlineExceeded) {
      req.done.set_value(drained);
      return drained;
    }
    if (!drained.ok()) {
      log::Warn("watch did not reach the current revision; the delta may miss recent events",
                {log::F("revision", *rev), log::F("error", drained)});
    }
  } else {
    log::Warn("cannot read the current revision before a delta snapshot",
              {log::F("error", rev.status())});
  }
  auto d = TakeDelta();
  if (!d.ok()) {
    req.done.set_value(d.status());
    return d.status().WithContext("out-of-schedule delta snapshot");
  }
  ResetDeltaTimer();
  req.done.set_value(std::move(d).value());
  return Status::Ok();
}

Status Snapshotter::Impl::LoadState() {
  auto list = store_.List();
  if (!list.ok()) return list.status().WithContext("listing " + store_.Describe());
  LatestSet latest = FindLatestSet(*list);
  prev_full_ = latest.full;
  if (!latest.deltas.empty()) {
    prev_ = latest.deltas.back();
  } else if (latest.full) {
    prev_ = *latest.full;
  } else {
    prev_ = NewSnapshot(SnapshotKind::kFull, 0, 0, clock_.WallNow(), "", false);
  }
  last_revision_.store(prev_.last_revision);
  // gardener's snapshotter, made: the latest snapshots' times (a full without deltas stands for
  // both kinds), the newest one's revision, the latest deltas.
  if (latest.full) {
    metrics_.LatestTimestamp(MetricKind::kFull).Set(UnixSeconds(latest.full->created_on));
  }
  if (latest.full || !latest.deltas.empty()) {
    metrics_.LatestTimestamp(MetricKind::kIncr).Set(UnixSeconds(prev_.created_on));
  }
  metrics_.LatestRevision(MetricKindOf(prev_)).Set(static_cast<double>(prev_.last_revision));
  metrics_.SetLatestDeltas(latest.deltas);
  if (prev_full_) {
    log::Info("latest backup found",
              {log::F("full", prev_full_->snap_name), log::F("deltas", latest.deltas.size()),
               log::F("last-revision", prev_.last_revision)});
  } else {
    log::Info("no full snapshot in the store", {log::F("store", store_.Describe())});
  }
  return Status::Ok();
}

bool Snapshotter::Impl::FullSnapshotRequiredAtStartup(SystemTime now) const {
  const int window = opts_.schedule.WindowHours();
  if (!prev_full_ || prev_full_->is_final || !prev_full_succeeded_ ||
      Hours(now - prev_full_->created_on) > window) {
    return true;
  }
  auto next = opts_.schedule.Next(now);
  if (!next) return true;  // Run fails on the schedule right after the snapshot
  // Taken exactly at the previous activation of the schedule: nothing was missed.
  if (LocalHoursBefore(*next, window) == prev_full_->created_on) {
    log::Info("previous full snapshot was taken at its scheduled time; no full snapshot needed");
    return false;
  }
  return Hours(*next - now) + Hours(now - prev_full_->created_on) > window;
}

Status Snapshotter::Impl::CollectEventsSincePrevious(bool* stopped) {
  CloseWatch();
  delta_ = DeltaWriter();
  ETCDW_ASSIGN_OR_RETURN(int64_t current, CurrentRevision());
  // Required: a full snapshot when the member is ahead of the latest full one; a delta (and a
  // full) when it is ahead of the latest backup.
  metrics_.SnapshotRequired(MetricKind::kFull)
      .Set(!prev_full_ || prev_full_->last_revision != current ? 1 : 0);
  metrics_.SnapshotRequired(MetricKind::kIncr).Set(0);
  ETCDW_RETURN_IF_ERROR(OpenWatch(prev_.last_revision + 1));
  if (prev_.last_revision >= current) {
    log::Info("no new events since the last snapshot; skipping the initial delta snapshot");
    return Status::Ok();
  }
  metrics_.SnapshotRequired(MetricKind::kFull).Set(1);
  metrics_.SnapshotRequired(MetricKind::kIncr).Set(1);
  log::Info("collecting events since the last snapshot",
            {log::F("from", prev_.last_revision + 1), log::F("to", current)});
  return DrainWatchUntil(current, stopped);
}

Status Snapshotter::Impl::DrainWatchUntil(int64_t revision, bool* stopped) {
  if (!watch_) return Status::Ok();
  SteadyTime deadline = clock_.Now() + opts_.connection_timeout;
  while (watched_revision_ < revision) {
    std::deque<WatchItem> items;
    {
      std::unique_lock<std::mutex> l(mu_);
      clock_.WaitUntil(l, cv_, deadline, [&] { return stop_ || !watch_items_.empty(); });
      if (stop_) {
        *stopped = true;
        return Status::Ok();
      }
      if (watch_items_.empty()) {
        return Status(Code::kDeadlineExceeded,
                      "watch delivered revision " + std::to_string(watched_revision_) + " of " +
                          std::to_string(revision) + " within " +
                          std::to_string(opts_.connection_timeout.count()) + " ms");
      }
      items.swap(watch_items_);
    }
    for (const auto& item : items) ETCDW_RETURN_IF_ERROR(HandleWatchItem(item));
    deadline = clock_.Now() + opts_.connection_timeout;
  }
  return Status::Ok();
}

Status Snapshotter::Impl::HandleWatchItem(const WatchItem& item) {
  if (!item.response) return item.error.WithContext("delta snapshot watch");
  const SystemTime now = clock_.WallNow();
  for (const auto& ev : item.response->events()) {
    delta_.Add(ev, now);
    watched_revision_ = std::max(watched_revision_, ev.kv().mod_revision());
  }
  if (item.response->events_size() > 0) {
    metrics_.SnapshotRequired(MetricKind::kFull).Set(1);
    metrics_.SnapshotRequired(MetricKind::kIncr).Set(1);
  }
  if (delta_.event_count() > 0 &&
      static_cast<int64_t>(delta_.size_bytes()) >= opts_.delta_memory_limit) {
    log::Info("delta events crossed the memory limit",
              {log::F("bytes", static_cast<uint64_t>(delta_.size_bytes())),
               log::F("limit", opts_.delta_memory_limit)});
    auto d = TakeDelta();
    if (!d.ok()) return d.status().WithContext("memory-limit delta snapshot");
    ResetDeltaTimer();
  }
  return Status::Ok();
}

Result<int64_t> Snapshotter::Impl::CurrentRevision() {
  auto resp = client_.Get(kRevisionProbeKey, opts_.connection_timeout);
  if (!resp.ok()) {
    return Status(resp.status().code(),
                  "failed to get etcd latest revision: " + resp.status().message());
  }
  return resp->header().revision();
}

Result<SnapshotInfo> Snapshotter::Impl::TakeFull(bool final) {
  Result<SnapshotInfo> r = SaveFullSnapshot(final);
  prev_full_succeeded_ = r.ok();  // a failed one makes the next start take a full snapshot
  if (r.ok() && opts_.on_full_snapshot) opts_.on_full_snapshot(*r);
  return r;
}

Result<std::optional<SnapshotInfo>> Snapshotter::Impl::TakeDelta() {
  auto r = SaveDelta();
  if (r.ok() && opts_.on_delta_period) opts_.on_delta_period();
  return r;
}

Result<SnapshotInfo> Snapshotter::Impl::SaveFullSnapshot(bool final) {
  // Buffered events are covered by the full snapshot.
  CloseWatch();
  delta_ = DeltaWriter();
  ETCDW_ASSIGN_OR_RETURN(int64_t revision, CurrentRevision());
  if (final && prev_.is_final && prev_.kind == SnapshotKind::kFull &&
      prev_.last_revision == revision) {
    log::Info("no updates since the previous final full snapshot; not taking another",
              {log::F("snapshot", prev_.snap_name)});
  } else {
    const SteadyTime started = clock_.Now();
    TempFiles temps;
    const std::string& db = temps.Add(JoinPath(opts_.temp_dir, "db"));
    auto size = client_.SnapshotToFile(db, opts_.snapshot_timeout);
    if (!size.ok()) return size.status();
    if (opts_.before_verify) opts_.before_verify(db);
    ETCDW_RETURN_IF_ERROR(VerifyFullSnapshotFile(db));
    SnapshotInfo s = NewSnapshot(SnapshotKind::kFull, 0, revision, clock_.WallNow(),
                                 CompressionSuffix(opts_.compression), final);
    std::string upload = db;
    if (opts_.compression != Compression::kNone) {
      upload = temps.Add(JoinPath(opts_.temp_dir, s.snap_name));
      ETCDW_RETURN_IF_ERROR(CompressFile(db, upload, opts_.compression));
    }
    Status saved = store_.Save(s, upload);
    metrics_.SnapshotDuration(MetricKind::kFull)
        .Observe(saved.ok(), std::chrono::duration<double>(clock_.Now() - started).count());
    ETCDW_RETURN_IF_ERROR(saved.WithContext("saving " + s.snap_name));
    prev_ = s;
    prev_full_ = s;
    last_revision_.store(revision);
    metrics_.LatestRevision(MetricKind::kFull).Set(static_cast<double>(revision));
    metrics_.LatestTimestamp(MetricKind::kFull).Set(UnixSeconds(s.created_on));
    metrics_.latest_deltas.Set(0);
    metrics_.latest_deltas_revisions.Set(0);
    log::Info("saved full snapshot",
              {log::F("snapshot", s.snap_name), log::F("bytes", *size),
               log::F("seconds", std::chrono::duration<double>(clock_.Now() - started).count())});
  }
  // Taken, or not needed: nothing is required until the next write.
  metrics_.SnapshotRequired(MetricKind::kFull).Set(0);
  metrics_.SnapshotRequired(MetricKind::kIncr).Set(0);
  if (DeltasEnabled()) ETCDW_RETURN_IF_ERROR(OpenWatch(prev_.last_revision + 1));
  return prev_;
}

Result<std::optional<SnapshotInfo>> Snapshotter::Impl::SaveDelta() {
  if (delta_.event_count() == 0) {
    log::Info("no events received since the last snapshot; skipping delta snapshot");
    metrics_.SnapshotRequired(MetricKind::kIncr).Set(0);
    return std::optional<SnapshotInfo>();
  }
  const int64_t last = delta_.last_revision();
  const size_t events = delta_.event_count();
  const std::string payload = delta_.Finish();
  SnapshotInfo s = NewSnapshot(SnapshotKind::kIncr, prev_.last_revision + 1, last, clock_.WallNow(),
                               CompressionSuffix(opts_.compression), false);
  TempFiles temps;
  const std::string& raw = temps.Add(JoinPath(opts_.temp_dir, s.snap_name + ".raw"));
  ETCDW_RETURN_IF_ERROR(WriteFile(raw, payload));
  if (opts_.before_verify) opts_.before_verify(raw);
  ETCDW_RETURN_IF_ERROR(VerifyDeltaSnapshotFile(raw));
  // gardener times a delta from its compression to the end of its upload.
  const SteadyTime started = clock_.Now();
  std::string upload = raw;
  if (opts_.compression != Compression::kNone) {
    upload = temps.Add(JoinPath(opts_.temp_dir, s.snap_name));
    ETCDW_RETURN_IF_ERROR(CompressFile(raw, upload, opts_.compression));
  }
  Status saved = store_.Save(s, upload);
  metrics_.SnapshotDuration(MetricKind::kIncr)
      .Observe(saved.ok(), std::chrono::duration<double>(clock_.Now() - started).count());
  ETCDW_RETURN_IF_ERROR(saved.WithContext("saving " + s.snap_name));
  prev_ = s;
  last_revision_.store(last);
  metrics_.LatestRevision(MetricKind::kIncr).Set(static_cast<double>(last));
  metrics_.LatestTimestamp(MetricKind::kIncr).Set(UnixSeconds(s.created_on));
  metrics_.SnapshotRequired(MetricKind::kIncr).Set(0);
  metrics_.latest_deltas.Add(1);
  metrics_.latest_deltas_revisions.Add(static_cast<double>(last - s.start_revision));
  log::Info("saved delta snapshot",
            {log::F("snapshot", s.snap_name), log::F("events", static_cast<uint64_t>(events)),
             log::F("bytes", static_cast<uint64_t>(payload.size()))});
  return std::optional<SnapshotInfo>(std::move(s));
}

Status Snapshotter::Impl::ResetFullTimer(std::optional<SystemTime> fired) {
  const SystemTime now = clock_.WallNow();
  auto next = opts_.schedule.Next(fired ? *fired : now);
  if (next && *next < now) {
    // Passed while the snapshot was taken: one such time fires at once; when more than one
    // passed, the schedule resumes after now.
    auto after = opts_.schedule.Next(*next);
    if (after && *after <= now) next = opts_.schedule.Next(now);
  }
  if (!next) {
    return FailedPrecondition("full snapshot schedule \"" + opts_.schedule.spec() +
                              "\" has no future activation");
  }
  next_full_ = *next;
  log::Info("next full snapshot scheduled", {log::F("time", FormatLocalTime(next_full_))});
  return Status::Ok();
}

Status Snapshotter::Impl::OpenWatch(int64_t from_revision) {
  CloseWatch();
  auto w = client_.WatchAll(from_revision);
  if (!w.ok()) return w.status();
  watch_ = std::move(w).value();
  watched_revision_ = from_revision - 1;
  closing_watch_.store(false);
  EtcdClient::Watch* raw = watch_.get();
  pump_ = std::thread([this, raw] { PumpWatch(raw); });
  log::Info("watching etcd for delta snapshots", {log::F("from-revision", from_revision)});
  return Status::Ok();
}

void Snapshotter::Impl::CloseWatch() {
  if (!watch_) return;
  closing_watch_.store(true);
  watch_->Cancel();
  if (pump_.joinable()) pump_.join();
  watch_.reset();
  std::lock_guard<std::mutex> l(mu_);
  watch_items_.clear();  // all from the closed watch
}

void Snapshotter::Impl::PumpWatch(EtcdClient::Watch* watch) {
  for (;;) {
    auto r = watch->Next(std::chrono::hours(1));
    if (!r.ok() && r.status().code() == Code::kDeadlineExceeded) continue;
    if (!r.ok() && closing_watch_.load()) return;
    WatchItem item;
    if (r.ok()) {
      item.response = std::move(r).value();
    } else {
      item.error = r.status();
    }
    const bool ended = !item.response.has_value();
    {
      std::lock_guard<std::mutex> l(mu_);
      watch_items_.push_back(std::move(item));
      cv_.notify_all();
    }
    if (ended) return;
  }
}

void Snapshotter::Impl::StartGc() {
  if (!GcEnabled()) {
    log::Info("garbage collection is off (period at most 1s)");
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    gc_stop_ = false;
  }
  const SteadyTime first_due = clock_.Now() + opts_.gc_period;
  gc_thread_ = std::thread([this, first_due] { GcLoop(first_due); });
}

void Snapshotter::Impl::StopGc() {
  {
    std::lock_guard<std::mutex> l(mu_);
    gc_stop_ = true;
    gc_cv_.notify_all();
  }
  if (gc_thread_.joinable()) gc_thread_.join();
}

void Snapshotter::Impl::GcLoop(SteadyTime first_due) {
  SteadyTime due = first_due;
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    if (clock_.WaitUntil(l, gc_cv_, due, [&] { return gc_stop_; })) return;
    l.unlock();
    CollectGarbage();
    due = clock_.Now() + opts_.gc_period;  // the period runs from the end of the last run
    l.lock();
  }
}

void Snapshotter::Impl::CollectGarbage() {
  auto list = store_.List();
  if (!list.ok()) {
    metrics_.CountSnapshotterFailure(list.status().message());
    log::Warn("GC: cannot list snapshots", {log::F("error", list.status())});
    return;
  }
  // SelectGarbage spares the latest stream and objects still immutable.
  std::vector<SnapshotInfo> garbage =
      SelectGarbage(*list, opts_.gc, clock_.WallNow(), last_revision_.load());
  int deleted = 0;
  for (const auto& s : garbage) {
    Status st = store_.Delete(s);
    metrics_.Gc(MetricKindOf(s)).Add(st.ok());
    if (!st.ok()) {
      metrics_.CountSnapshotterFailure(st.message());
      log::Warn("GC: cannot delete snapshot",
                {log::F("snapshot", SnapshotKey(s)), log::F("error", st)});
      continue;
    }
    ++deleted;
    log::Info("GC: deleted snapshot",
              {log::F("snapshot", SnapshotKey(s)), log::F("kind", KindName(s.kind))});
  }
  log::Info("GC: done", {log::F("deleted", deleted), log::F("candidates", garbage.size())});
}

void Snapshotter::Impl::Stop() {
  std::unique_lock<std::mutex> l(mu_);
  stop_ = true;
  cv_.notify_all();
  cv_.wait(l, [&] { return !running_; });
}

Result<std::optional<SnapshotInfo>> Snapshotter::Impl::Trigger(bool full, bool final) {
  if (!full && !DeltasEnabled()) {
    return FailedPrecondition("delta snapshots are off (delta snapshot period " +
                              std::to_string(opts_.delta_period.count()) + " ms is below 1s)");
  }
  auto req = std::make_unique<Request>();
  req->full = full;
  req->final = final;
  auto done = req->done.get_future();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!accepting_ || stop_) return FailedPrecondition("snapshotter is not active");
    requests_.push_back(std::move(req));
    cv_.notify_all();
  }
  return done.get();
}

Snapshotter::Snapshotter(SnapStore& store, EtcdClient& client, SnapshotterOptions options,
                         const common::Clock& clock)
    : impl_(std::make_unique<Impl>(store, client, std::move(options), clock, &active_)) {}

Snapshotter::~Snapshotter() { Stop(); }

Status Snapshotter::Run() { return impl_->Run(); }

void Snapshotter::Stop() { impl_->Stop(); }

Result<SnapshotInfo> Snapshotter::TriggerFull(bool final) {
  ETCDW_ASSIGN_OR_RETURN(std::optional<SnapshotInfo> s, impl_->Trigger(true, final));
  return std::move(*s);
}

Result<std::optional<SnapshotInfo>> Snapshotter::TriggerDelta() {
  return impl_->Trigger(false, false);
}

size_t Snapshotter::queued_triggers() const { return impl_->QueuedTriggers(); }

}  // namespace etcdw::sidecar
