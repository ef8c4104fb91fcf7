#include "etcdw/sidecar/snapshot_leases.h"

#include <charconv>

#include "etcdw/common/logging.h"

namespace etcdw::sidecar {
namespace {

// A holder identity as a revision; none when the lease holds none. A holder that is not a
// decimal number is an error (someone else wrote the lease).
Result<std::optional<int64_t>> HeldRevision(const kube::Lease& lease) {
  if (!lease.holder_identity) return std::optional<int64_t>();
  const std::string& h = *lease.holder_identity;
  int64_t rev = 0;
  auto [end, ec] = std::from_chars(h.data(), h.data() + h.size(), rev);
  if (ec != std::errc() || end != h.data() + h.size()) {
    return FailedPrecondition("lease " + lease.name + " holds \"" + h +
                              "\", which is not a revision");
  }
  return std::optional<int64_t>(rev);
}

// Merge patch of `spec` guarded by the resourceVersion read; a conflict reads again.
// `make_spec` returns the spec fields to write, or none to leave the lease alone.
Status PatchSpecWithLock(
    kube::KubeClient& client, const std::string& ns, const std::string& name,
    const std::function<Result<std::optional<nlohmann::json>>(const kube::Lease&)>& make_spec) {
  Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    ETCDW_ASSIGN_OR_RETURN(kube::Lease lease, client.GetLease(ns, name));
    ETCDW_ASSIGN_OR_RETURN(std::optional<nlohmann::json> spec, make_spec(lease));
    if (!spec) return Status::Ok();
    nlohmann::json patch = {{"metadata", {{"resourceVersion", lease.resource_version}}},
                            {"spec", *spec}};
    auto r = client.MergePatchLease(ns, name, patch);
    if (r.ok()) return Status::Ok();
    last = r.status();
    if (last.code() != Code::kAborted) return last;
  }
  return last;
}

}  // namespace

SnapshotLeaseUpdater::SnapshotLeaseUpdater(kube::KubeClient& client, SnapStore& store,
                                           SnapshotLeaseOptions options, const common::Clock& clock)
    : client_(client), store_(store), options_(std::move(options)), clock_(clock) {}

SnapshotLeaseUpdater::~SnapshotLeaseUpdater() { Stop(); }

void SnapshotLeaseUpdater::Start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void SnapshotLeaseUpdater::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SnapshotLeaseUpdater::FullSnapshotTaken(const SnapshotInfo& full) {
  {
    std::lock_guard<std::mutex> l(mu_);
    full_due_ = full;
    full_retry_at_ = clock_.Now();
  }
  cv_.notify_all();
}

void SnapshotLeaseUpdater::DeltaPeriodPassed() {
  {
    std::lock_guard<std::mutex> l(mu_);
    delta_due_ = true;
  }
  cv_.notify_all();
}

void SnapshotLeaseUpdater::Sync() {
  {
    std::lock_guard<std::mutex> l(mu_);
    sync_ = true;
  }
  cv_.notify_all();
}

void SnapshotLeaseUpdater::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    const auto far = clock_.Now() + std::chrono::hours(24 * 365);
    clock_.WaitUntil(l, cv_, full_due_ ? full_retry_at_ : far, [&] {
      return stop_ || sync_ || delta_due_ || (full_due_ && clock_.Now() >= full_retry_at_);
    });
    if (stop_) return;
    RunPending(l);
  }
}

// Runs with `l` held on entry and exit; the API calls run unlocked.
void SnapshotLeaseUpdater::RunPending(std::unique_lock<std::mutex>& l) {
  if (sync_) {
    sync_ = false;
    l.unlock();
    auto list = store_.List();
    if (list.ok()) {
      LatestSet set = FindLatestSet(*list);
      l.lock();
      if (set.full && !full_due_) {
        full_due_ = *set.full;
        full_retry_at_ = clock_.Now();
      }
      delta_due_ = true;
    } else {
      log::Warn("snapshot leases not synchronised: listing the store failed",
                {log::F("error", list.status())});
      l.lock();
    }
  }
  if (full_due_ && clock_.Now() >= full_retry_at_) {
    const SnapshotInfo full = *full_due_;
    l.unlock();
    Status st = UpdateFullLease(full.last_revision, full.created_on);
    l.lock();
    if (st.ok()) {
      // A newer snapshot reported meanwhile stays due.
      if (full_due_ && full_due_->snap_name == full.snap_name) full_due_.reset();
    } else {
      log::Warn("full snapshot lease not updated; retrying",
                {log::F("error", st),
                 log::F("retry-ms", static_cast<int64_t>(options_.retry_period.count()))});
      if (full_due_ && full_due_->snap_name == full.snap_name) {
        full_retry_at_ = clock_.Now() + options_.retry_period;
      }
    }
  }
  if (delta_due_) {
    delta_due_ = false;
    l.unlock();
    Status st = UpdateDeltaLease();
    if (!st.ok()) log::Warn("delta snapshot lease not updated", {log::F("error", st)});
    l.lock();
  }
}

Status SnapshotLeaseUpdater::UpdateFullLease(int64_t last_revision,
                                             std::chrono::system_clock::time_point created) {
  Status st =
      PatchSpecWithLock(client_, options_.lease_namespace, options_.full_lease_name,
                        [&](const kube::Lease& lease) -> Result<std::optional<nlohmann::json>> {
                          ETCDW_ASSIGN_OR_RETURN(std::optional<int64_t> held, HeldRevision(lease));
                          if (held && *held > last_revision) return std::optional<nlohmann::json>();
                          nlohmann::json spec = {{"renewTime", kube::MicroTime(created)}};
                          if (!held || *held < last_revision)
                            spec["holderIdentity"] = std::to_string(last_revision);
                          return std::optional<nlohmann::json>(std::move(spec));
                        });
  if (st.ok()) {
    log::Info("renewed full snapshot lease",
              {log::F("lease", options_.full_lease_name), log::F("revision", last_revision)});
  }
  return st.WithContext("full snapshot lease " + options_.full_lease_name);
}

Status SnapshotLeaseUpdater::UpdateDeltaLease() {
  auto list = store_.List();
  if (!list.ok()) return list.status().WithContext("listing the store for the delta lease");
  const LatestSet set = FindLatestSet(*list);
  const std::optional<int64_t> latest =
      set.deltas.empty() ? std::nullopt : std::optional<int64_t>(set.deltas.back().last_revision);
  const std::string now = kube::MicroTime(clock_.WallNow());
  Status st = PatchSpecWithLock(
      client_, options_.lease_namespace, options_.delta_lease_name,
      [&](const kube::Lease& lease) -> Result<std::optional<nlohmann::json>> {
        nlohmann::json spec = {{"renewTime", now}};
        if (latest) {
          ETCDW_ASSIGN_OR_RETURN(std::optional<int64_t> held, HeldRevision(lease));
          if (!held || *held < *latest) spec["holderIdentity"] = std::to_string(*latest);
        } else if (!lease.holder_identity) {
          spec["holderIdentity"] = "0";
        }
        return std::optional<nlohmann::json>(std::move(spec));
      });
  if (st.ok()) {
    log::Info("renewed delta snapshot lease",
              {log::F("lease", options_.delta_lease_name), log::F("revision", latest.value_or(0))});
  }
  return st.WithContext("delta snapshot lease " + options_.delta_lease_name);
}

Status WriteFullSnapshotLease(SnapStore& store, const SnapshotLeaseOptions& options,
                              const SnapshotInfo& full) {
  if (options.lease_namespace.empty()) {
    return InvalidArgument(
        "POD_NAMESPACE is not set: the snapshot leases (--enable-snapshot-lease-renewal) live in "
        "the pod's namespace");
  }
  auto config = kube::DefaultConfig();
  if (!config.ok()) return config.status().WithContext("Kubernetes API configuration");
  ETCDW_ASSIGN_OR_RETURN(auto client, kube::KubeClient::Create(*config));
  SnapshotLeaseUpdater updater(*client, store, options);
  return updater.UpdateFullLease(full.last_revision, full.created_on);
}

}  // namespace etcdw::sidecar
