#include "etcdw/sidecar/initializer.h"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "etcdw/common/logging.h"
#include "etcdw/common/metrics.h"
#include "etcdw/sidecar/etcd_client.h"
#include "etcdw/sidecar/restorer.h"

namespace etcdw::sidecar {
namespace fs = std::filesystem;
namespace {

using std::chrono::milliseconds;

Status RemoveDataDir(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return Internal("cannot remove \"" + dir + "\": " + ec.message());
  return Status::Ok();
}

// Adds this member as a learner, wiping its data directory first (gardener: 6 attempts with
// exponential waits; "too many learners" waits for the other learner's promotion).
Status AddAsLearner(const InitializerContext& ctx) {
  const ServerOptions& o = *ctx.options;
  milliseconds wait(2000);
  Status last;
  for (int attempt = 1; attempt <= 6; ++attempt) {
    ETCDW_RETURN_IF_ERROR(RemoveDataDir(o.restoration.data_dir));
    ETCDW_ASSIGN_OR_RETURN(auto cluster, EtcdClient::ConnectToCluster(o.etcd));
    const auto started = std::chrono::steady_clock::now();
    auto r = cluster.client->MemberAdd(ctx.peer_urls, /*learner=*/true, milliseconds(5000));
    if (r.ok()) {
      if (ctx.metrics != nullptr) {
        ctx.metrics->learner_adds.Add(true);
        ctx.metrics->is_learner.Set(1);
        ctx.metrics->add_learner.Observe(true, common::SecondsSince(started));
      }
      log::Info("added this member to the cluster as a learner",
                {log::F("name", ctx.member_name), log::Hex("member-id", r->member().id())});
      return Status::Ok();
    }
    last = r.status();
    const std::string& msg = last.message();
    if (msg.find("Peer URLs already exists") != std::string::npos ||
        msg.find("member ID already exist") != std::string::npos) {
      return Status::Ok();
    }
    if (ctx.metrics != nullptr && msg.find("too many learner") == std::string::npos) {
      ctx.metrics->learner_adds.Add(false);
      ctx.metrics->add_learner.Observe(false, common::SecondsSince(started));
    }
    log::Warn("adding this member as a learner failed",
              {log::F("attempt", attempt), log::F("error", last)});
    if (ctx.cancel != nullptr && ctx.cancel->load()) break;
    std::this_thread::sleep_for(
        msg.find("too many learner") != std::string::npos ? milliseconds(5000) : wait);
    wait *= 2;
  }
  return last.WithContext("adding this member as a learner");
}

// Removes this member (found by name) from the cluster; not being a member is fine.
Status RemoveSelf(const InitializerContext& ctx) {
  ETCDW_ASSIGN_OR_RETURN(auto cluster, EtcdClient::ConnectToCluster(ctx.options->etcd));
  for (const auto& m : cluster.members.members()) {
    if (m.name() != ctx.member_name) continue;
    const auto started = std::chrono::steady_clock::now();
    Status removed = cluster.client->MemberRemove(m.id(), milliseconds(30000));
    if (ctx.metrics != nullptr) {
      ctx.metrics->member_remove.Observe(removed.ok(), common::SecondsSince(started));
    }
    ETCDW_RETURN_IF_ERROR(removed);
    log::Info("removed this member from the cluster", {log::Hex("member-id", m.id())});
  }
  return Status::Ok();
}

// What the running cluster says about this member (gardener §3.2 step 1).
enum class Membership {
  kUnknown,  // no member answered
  kNew,      // the cluster answers and does not know this member's name: a scale-up
  kKnown,    // the cluster lists this member by name
};

Membership ProbeMembership(const InitializerContext& ctx) {
  auto cluster = EtcdClient::ConnectToCluster(ctx.options->etcd);
  if (!cluster.ok() || cluster->members.members_size() == 0) return Membership::kUnknown;
  for (const auto& m : cluster->members.members()) {
    if (m.name() == ctx.member_name) return Membership::kKnown;
  }
  return Membership::kNew;
}

// A single member's invalid data directory: restored from the latest backup (*restored), or
// removed when no store is configured or it holds no backup.
Status RestoreSingleNode(const InitializerContext& ctx, const Validation& v, bool* restored) {
  const ServerOptions& o = *ctx.options;
  const std::string& data_dir = o.restoration.data_dir;
  if (ctx.store == nullptr) {
    log::Info("no snapshot store configured: removing the invalid data directory",
              {log::F("status", DataDirStatusName(v.status))});
    return RemoveDataDir(data_dir);
  }
  ETCDW_ASSIGN_OR_RETURN(auto list, ctx.store->List());
  LatestSet set = FindLatestSet(list);
  if (ctx.metrics != nullptr) ctx.metrics->SetLatestDeltas(set.deltas);
  if (!set.full && set.deltas.empty()) {
    log::Info("no backups: removing the invalid data directory",
              {log::F("status", DataDirStatusName(v.status))});
    return RemoveDataDir(data_dir);
  }
  log::Info("restoring the data directory from the backup",
            {log::F("status", DataDirStatusName(v.status)), log::F("detail", v.detail)});
  RestoreOptions ro;
  ro.target = ctx.restore_target;
  ro.temp_dir = o.restoration.temp_dir;
  ro.skip_hash_check = o.restoration.skip_hash_check;
  ETCDW_RETURN_IF_ERROR(RestoreFromBackup(*ctx.store, set, data_dir, ro));
  *restored = true;
  return Status::Ok();
}

}  // namespace

Status Initialize(const InitializerContext& ctx, ValidationMode mode) {
  const ServerOptions& o = *ctx.options;
  const std::string& data_dir = o.restoration.data_dir;
  // gardener times the validation from here, the membership probe included.
  const auto started = std::chrono::steady_clock::now();
  SidecarMetrics* const metrics = ctx.metrics;
  if (metrics != nullptr) metrics->cluster_size.Set(static_cast<double>(ctx.cluster_size));

  // A member of a multi-member cluster: known to the running cluster (or, when no member
  // answers, to its member lease: a heartbeat was written), or new to it.
  bool known_member = false;
  if (ctx.cluster_size > 1) {
    Membership m = ProbeMembership(ctx);
    if (m == Membership::kNew) {
      log::Info("this member is not in the running cluster: joining as a learner",
                {log::F("name", ctx.member_name)});
      return AddAsLearner(ctx);
    }
    known_member = m == Membership::kKnown ||
                   (m == Membership::kUnknown && ctx.heartbeat_present && ctx.heartbeat_present());
  }

  Validation v = ValidateDataDir(data_dir, mode, ctx.store, ctx.cluster_size);
  if (metrics != nullptr) {
    const bool validated = v.status != DataDirStatus::kWrongVolumeMounted &&
                           v.status != DataDirStatus::kFailToOpen &&
                           v.status != DataDirStatus::kUnknown;
    metrics->validation.Observe(validated, common::SecondsSince(started));
  }
  switch (v.status) {
    case DataDirStatus::kValid:
      break;
    case DataDirStatus::kWrongVolumeMounted:
      return FailedPrecondition("won't initialize etcd because the wrong volume is mounted: " +
                                v.detail);
    case DataDirStatus::kFailToOpen:
      return FailedPrecondition("the data directory is in use by another process: " + v.detail);
    case DataDirStatus::kUnknown:
      return Internal("the state of the data directory is unknown: " + v.detail);
    default:
      // seed 000: a known member of a cluster whose directory is missing or damaged is never
      // started as a new cluster, backups or not: it rejoins from its peers.
      if (v.status == DataDirStatus::kInvalidInMultiNode ||
          (ctx.cluster_size > 1 && (v.status == DataDirStatus::kCorrupt || known_member))) {
        log::Info("invalid data directory in a multi-member cluster: resynchronising from peers",
                  {log::F("status", DataDirStatusName(v.status))});
        const auto restore_started = std::chrono::steady_clock::now();
        Status st = RemoveSelf(ctx);
        if (st.ok()) st = AddAsLearner(ctx);
        if (metrics != nullptr) {
          metrics->restoration_single_member.Observe(st.ok(),
                                                     common::SecondsSince(restore_started));
        }
        return st;
      }
      // Single node (or a multi-member cluster being bootstrapped): restored from the
      // backup, or removed when there is none. gardener times both, but counts a success only
      // when a backup was restored.
      const auto restore_started = std::chrono::steady_clock::now();
      bool restored = false;
      Status st = RestoreSingleNode(ctx, v, &restored);
      if (metrics != nullptr && (!st.ok() || restored)) {
        metrics->restoration_single_node.Observe(st.ok(), common::SecondsSince(restore_started));
      }
      ETCDW_RETURN_IF_ERROR(st);
      break;
  }
  // gardener resets the snapstore temp directory after a successful initialisation.
  if (ctx.store != nullptr && !o.store.temp_dir.empty() && o.store.temp_dir != "/tmp") {
    std::error_code ec;
    fs::remove_all(o.store.temp_dir, ec);
    fs::create_directories(o.store.temp_dir, ec);
    chmod(o.store.temp_dir.c_str(), 0700);
  }
  return Status::Ok();
}

}  // namespace etcdw::sidecar
