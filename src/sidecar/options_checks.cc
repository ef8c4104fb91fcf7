// Checks of etcdbrctl's flag values (gardener's Validate rules, plus ours for what we act on),
// the warnings for flags accepted without effect, and the restore target the flags describe.
#include <sstream>
#include <string>
#include <vector>

#include "etcdw/common/logging.h"
#include "etcdw/common/url.h"
#include "etcdw/sidecar/cron.h"
#include "etcdw/sidecar/options.h"

namespace etcdw::sidecar {
namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The peer URLs of --initial-advertise-peer-urls: every value, each possibly a comma list.
std::vector<std::string> PeerUrlsOf(const RestorationFlags& r) {
  std::vector<std::string> out;
  for (const auto& v : r.initial_advertise_peer_urls) {
    for (auto& u : SplitList(v)) out.push_back(std::move(u));
  }
  return out;
}

// Flags of gardener's that this implementation accepts, validates and ignores, by group.
const std::vector<std::string> kEtcdConnectionWithoutEffect = {"etcd-username", "etcd-password"};
const std::vector<std::string> kHttpServerWithoutEffect = {"enable-profiling"};
// The restore replays deltas offline, without gardener's embedded etcd and its client.
const std::vector<std::string> kRestorationWithoutEffect = {"max-fetchers",
                                                            "max-call-send-message-size",
                                                            "max-request-bytes",
                                                            "max-txn-ops",
                                                            "embedded-etcd-quota-bytes",
                                                            "auto-compaction-mode",
                                                            "auto-compaction-retention"};
const std::vector<std::string> kBackoffWithoutEffect = {
    "backoff-multiplier", "backoff-attempt-limit", "backoff-threshold-time"};

std::vector<const std::vector<std::string>*> GroupsWithoutEffect(Command command) {
  static const std::vector<std::string> kConfigFile = {"config-file", "etcd-process-name"};
  // The snapshot command runs no defragmentation (gardener's triggers a full snapshot after it).
  static const std::vector<std::string> kSnapshotDefrag = {"defragmentation-schedule"};
  switch (command) {
    case Command::kServer:
      return {&kConfigFile, &kEtcdConnectionWithoutEffect, &kHttpServerWithoutEffect,
              &kRestorationWithoutEffect, &kBackoffWithoutEffect};
    case Command::kSnapshot:
      return {&kEtcdConnectionWithoutEffect, &kBackoffWithoutEffect, &kSnapshotDefrag};
    case Command::kRestore:
      return {&kRestorationWithoutEffect};
    case Command::kInitialize:
      return {&kRestorationWithoutEffect, &kEtcdConnectionWithoutEffect};
    case Command::kCompact: {
      // gardener's compactor bounds the calls to its embedded etcd with these; the compaction
      // here is offline and makes no such calls. The delta lease is not written by compact.
      static const std::vector<std::string> kCompactTimeouts = {
          "etcd-snapshot-timeout", "etcd-defrag-timeout", "delta-snapshot-lease-name"};
      return {&kRestorationWithoutEffect, &kCompactTimeouts};
    }
    case Command::kCopy:
      return {};
  }
  return {};
}

void CheckStoreChunks(const std::string& prefix, int64_t max_parallel_chunk_uploads,
                      int64_t min_chunk_size, std::vector<std::string>* problems) {
  if (max_parallel_chunk_uploads <= 0) {
    problems->push_back("--" + prefix + "max-parallel-chunk-uploads must be greater than 0");
  }
  if (min_chunk_size < (int64_t{5} << 20)) {
    problems->push_back("--" + prefix + "min-chunk-size must be at least 5242880 (5 MiB)");
  }
}

void CheckRestoration(const RestorationFlags& r, std::vector<std::string>* problems) {
  if (r.max_fetchers <= 0) problems->push_back("--max-fetchers must be greater than 0");
  std::string peers;
  for (const auto& u : PeerUrlsOf(r)) peers += (peers.empty() ? "" : ",") + u;
  if (auto urls = common::ParseUrlList(peers); !urls.ok()) {
    problems->push_back("--initial-advertise-peer-urls: " + urls.status().message());
  }
  if (r.initial_cluster.find('=') == std::string::npos) {
    problems->push_back("--initial-cluster \"" + r.initial_cluster +
                        "\" is not a list of name=URL");
  }
  if (r.max_call_send_message_size <= 0) {
    problems->push_back("--max-call-send-message-size must be greater than 0");
  }
  if (r.max_request_bytes < 0) problems->push_back("--max-request-bytes must not be negative");
  if (r.max_txn_ops < 0) problems->push_back("--max-txn-ops must not be negative");
  if (r.embedded_etcd_quota_bytes <= 0) {
    problems->push_back("--embedded-etcd-quota-bytes must be greater than 0");
  }
  if (r.auto_compaction_mode != "periodic" && r.auto_compaction_mode != "revision") {
    problems->push_back("--auto-compaction-mode \"" + r.auto_compaction_mode +
                        "\" is not supported (periodic or revision)");
  }
}

// gardener's copierOptions.validate, and the source store's chunks.
void CheckCopy(const CopyFlags& c, std::vector<std::string>* problems) {
  if (c.max_backups < -1) problems->push_back("--max-backups-to-copy must not be less than -1");
  if (c.max_backup_age < -1) problems->push_back("--max-backup-age must not be less than -1");
  if (c.max_parallel_copy_operations <= 0) {
    problems->push_back("--max-parallel-copy-operations must be greater than 0");
  }
  if (c.wait_for_final_snapshot_timeout.count() < 0) {
    problems->push_back("--wait-for-final-snapshot-timeout must not be less than 0");
  }
  CheckStoreChunks("source-", c.source_max_parallel_chunk_uploads, c.source_min_chunk_size,
                   problems);
}

void CheckBackoff(const BackoffFlags& b, std::vector<std::string>* problems) {
  if (b.multiplier <= 0) problems->push_back("--backoff-multiplier must be greater than 0");
  if (b.attempt_limit <= 0) problems->push_back("--backoff-attempt-limit must be greater than 0");
  if (b.threshold.count() <= 0) {
    problems->push_back("--backoff-threshold-time must be greater than 0");
  }
}

}  // namespace

std::vector<std::string> WarnFlagsWithoutEffect(Command command, const common::FlagSet& flags) {
  std::vector<std::string> warned;
  for (const auto* group : GroupsWithoutEffect(command)) {
    for (const auto& name : *group) {
      if (!flags.IsSet(name)) continue;
      log::Warn("flag accepted for compatibility has no effect", {log::F("flag", "--" + name)});
      warned.push_back(name);
    }
  }
  return warned;
}

Status ValidateServerOptions(const ServerOptions& o) {
  std::vector<std::string> problems;
  if (o.etcd.endpoints.empty()) problems.push_back("--endpoints: no endpoint given");
  for (const auto& e : o.etcd.endpoints) {
    if (e.rfind("http://", 0) != 0 && e.rfind("https://", 0) != 0) {
      problems.push_back("--endpoints: \"" + e + "\" is not an http:// or https:// URL");
    }
  }
  if (o.etcd.connection_timeout.count() <= 0) {
    problems.push_back("--etcd-connection-timeout must be greater than 0");
  }
  if (o.etcd.snapshot_timeout < o.etcd.connection_timeout) {
    problems.push_back("--etcd-snapshot-timeout must not be less than --etcd-connection-timeout");
  }
  if (o.etcd.defrag_timeout.count() <= 0) {
    problems.push_back("--etcd-defrag-timeout must be greater than 0");
  }
  if (o.http.port < 1 || o.http.port > 65535) {
    problems.push_back("--server-port " + std::to_string(o.http.port) + " is out of range 1-65535");
  }
  if (o.http.cert_file.empty() != o.http.key_file.empty()) {
    problems.push_back("--server-cert and --server-key must be given together");
  }
  if (auto c = CronSchedule::Parse(o.snapshotter.schedule); !c.ok()) {
    problems.push_back("--schedule \"" + o.snapshotter.schedule + "\": " + c.status().message());
  }
  if (auto c = CronSchedule::Parse(o.defragmentation_schedule); !c.ok()) {
    problems.push_back("--defragmentation-schedule \"" + o.defragmentation_schedule +
                       "\": " + c.status().message());
  }
  auto policy = ParseGcPolicy(o.snapshotter.gc_policy);
  if (!policy.ok()) {
    problems.push_back("--garbage-collection-policy: " + policy.status().message());
  } else if (*policy == GcPolicy::kLimitBased && o.snapshotter.max_backups <= 0) {
    problems.push_back("--max-backups must be greater than 0 with the LimitBased policy");
  }
  if (auto c = ParseCompressionPolicy(o.compression_policy); !c.ok()) {
    problems.push_back("--compression-policy: " + c.status().message());
  }
  CheckStoreChunks("", o.max_parallel_chunk_uploads, o.min_chunk_size, &problems);
  if (o.secondary.sync_enabled) {
    CheckStoreChunks("secondary-", o.secondary.max_parallel_chunk_uploads,
                     o.secondary.min_chunk_size, &problems);
    if (o.secondary.sync_period.count() <= 0) {
      problems.push_back("--secondary-backup-sync-period must be greater than 0");
    }
  }
  CheckRestoration(o.restoration, &problems);
  CheckCopy(o.copy, &problems);
  CheckBackoff(o.backoff, &problems);
  if (o.reelection_period <= std::chrono::milliseconds(1000)) {
    problems.push_back("--reelection-period must be greater than 1s");
  }
  if (o.etcd_wrapper_port < 1 || o.etcd_wrapper_port > 65535) {
    problems.push_back("--etcd-wrapper-port " + std::to_string(o.etcd_wrapper_port) +
                       " is out of range 1-65535");
  }
  if (o.leases.heartbeat.count() <= 0) {
    problems.push_back("--k8s-heartbeat-duration must be greater than 0");
  }
  if (o.leases.snapshot_lease_renewal &&
      (o.leases.full_lease_name.empty() || o.leases.delta_lease_name.empty())) {
    problems.push_back(
        "--full-snapshot-lease-name and --delta-snapshot-lease-name must not be empty with "
        "--enable-snapshot-lease-renewal");
  }
  if (o.leader_election_timeout <= std::chrono::milliseconds(1000)) {
    problems.push_back("--etcd-connection-timeout-leader-election must be greater than 1s");
  }
  for (const auto& [flag, provider] :
       {std::pair<std::string, std::string>{"storage-provider", o.store.provider},
        {"source-storage-provider", o.copy.source.provider}}) {
    if (!provider.empty() && provider != "Local" && provider != "S3" && provider != "ABS") {
      problems.push_back("--" + flag + ": unsupported storage provider \"" + provider +
                         "\" (supported: Local, S3, ABS)");
    }
  }
  if (auto level = LogLevelOf(o.log_level); !level.ok()) {
    problems.push_back(level.status().message());
  }
  if (o.validation_mode != "full" && o.validation_mode != "sanity") {
    problems.push_back("--validation-mode must be full or sanity, not \"" + o.validation_mode +
                       "\"");
  }
  if (problems.empty()) return Status::Ok();
  std::string msg;
  for (const auto& p : problems) msg += (msg.empty() ? "" : "\n") + p;
  return InvalidArgument(msg);
}

data_dir::RestoreTarget RestoreTargetOf(const RestorationFlags& r) {
  data_dir::RestoreTarget t;
  t.name = r.name;
  t.initial_cluster = r.initial_cluster;
  t.initial_cluster_token = r.initial_cluster_token;
  t.initial_advertise_peer_urls = PeerUrlsOf(r);
  return t;
}

}  // namespace etcdw::sidecar
