// Registration of etcdbrctl's flags, one function per gardener flag group (pkg/types/*.go,
// pkg/server/init.go, pkg/compressor), combined per command as gardener's cmd/ does. Checks of
// the values and the warnings for flags without effect: options_checks.cc.
#include "etcdw/sidecar/options.h"

#include <string>

namespace etcdw::sidecar {
namespace {

using common::FlagSet;
using std::chrono::milliseconds;
using ListSyntax = FlagSet::ListSyntax;

void AddEtcdConnectionFlags(FlagSet& f, ServerOptions* o) {
  f.StringList("endpoints", &o->etcd.endpoints, {"http://127.0.0.1:2379"},
               ListSyntax::kCommaSeparated, "comma separated list of etcd endpoints");
  f.Shorthand("e", "endpoints");
  f.StringList("service-endpoints", &o->etcd.service_endpoints, {}, ListSyntax::kCommaSeparated,
               "comma separated list of endpoints reaching the ready members (a Kubernetes "
               "service)");
  f.String("etcd-username", &o->etcd.username, "", "etcd server username, if one is required");
  f.String("etcd-password", &o->etcd.password, "", "etcd server password, if one is required");
  f.Duration("etcd-connection-timeout", &o->etcd.connection_timeout, milliseconds(30000),
             "etcd client connection timeout");
  f.Duration("etcd-snapshot-timeout", &o->etcd.snapshot_timeout, milliseconds(15 * 60000),
             "timeout duration for taking etcd snapshots");
  f.Duration("etcd-defrag-timeout", &o->etcd.defrag_timeout, milliseconds(8 * 60000),
             "timeout duration for etcd defrag call");
  f.Bool("insecure-transport", &o->etcd.insecure_transport, true,
         "disable transport security for client connections");
  // gardener's default is --insecure-transport's default (true): TLS connections skip the
  // verification unless this is set to false.
  f.Bool("insecure-skip-tls-verify", &o->etcd.insecure_skip_verify, true,
         "skip server certificate verification");
  f.String("cert", &o->etcd.cert_file, "",
           "identify secure client using this TLS certificate file");
  f.String("key", &o->etcd.key_file, "", "identify secure client using this TLS key file");
  f.String("cacert", &o->etcd.ca_file, "",
           "verify certificates of TLS-enabled secure servers using this CA bundle");
}

void AddHttpServerFlags(FlagSet& f, ServerOptions* o) {
  f.Int("server-port", &o->http.port, 8080, "port on which server should listen");
  f.Shorthand("p", "server-port");
  f.String("server-cert", &o->http.cert_file, "", "path to server certificate");
  f.String("server-key", &o->http.key_file, "", "path to server key");
  f.Bool("enable-profiling", &o->http.enable_profiling, false,
         "accepted for compatibility; no profiling endpoints are served");
}

void AddSnapshotterFlags(FlagSet& f, ServerOptions* o) {
  f.String("schedule", &o->snapshotter.schedule, "0 */1 * * *", "schedule for snapshots");
  f.Shorthand("s", "schedule");
  f.Duration("delta-snapshot-period", &o->snapshotter.delta_period, milliseconds(20000),
             "period after which delta snapshot will be persisted; below 1s disables them");
  f.Int("delta-snapshot-memory-limit", &o->snapshotter.delta_memory_limit, 10 << 20,
        "memory limit after which delta snapshots will be taken");
  f.Duration("garbage-collection-period", &o->snapshotter.gc_period, milliseconds(60000),
             "period for garbage collecting old backups; 1s or less disables it");
  f.String("garbage-collection-policy", &o->snapshotter.gc_policy, "Exponential",
           "policy for garbage collecting old backups (Exponential or LimitBased)");
  f.Int("max-backups", &o->snapshotter.max_backups, 7,
        "maximum number of previous backups to keep (LimitBased)");
  f.Shorthand("m", "max-backups");
  f.Duration("delta-snapshot-retention-period", &o->snapshotter.delta_retention, milliseconds(0),
             "how long delta snapshots of superseded full snapshots are kept");
}

// The store flags under `prefix` ("", "secondary-" or "source-", as gardener's addFlags).
void AddStoreFlags(FlagSet& f, const std::string& prefix, SnapStoreOptions* store,
                   int64_t* max_parallel_chunk_uploads, int64_t* min_chunk_size,
                   const std::string& temp_dir_default = "/tmp") {
  f.String(prefix + "storage-provider", &store->provider, "",
           "snapshot storage provider: Local or S3 (empty: no backups)");
  f.String(prefix + "store-container", &store->container, "",
           "container (bucket) for snapshots; default from STORAGE_CONTAINER");
  f.String(prefix + "store-prefix", &store->prefix, "", "prefix or directory inside the container");
  f.String(prefix + "store-endpoint-override", &store->endpoint_override, "",
           "override the storage provider's endpoint");
  f.Int(prefix + "max-parallel-chunk-uploads", max_parallel_chunk_uploads, 5,
        "maximum number of parallel chunk uploads allowed");
  f.Int(prefix + "min-chunk-size", min_chunk_size, int64_t{5} << 20,
        "minimum size for multipart chunk upload (at least 5 MiB)");
  f.String(prefix + "snapstore-temp-directory", &store->temp_dir, temp_dir_default,
           "temporary directory for processing snapshots");
}

void AddCopyFlags(FlagSet& f, ServerOptions* o) {
  CopyFlags& c = o->copy;
  AddStoreFlags(f, "", &o->store, &o->max_parallel_chunk_uploads, &o->min_chunk_size);
  // Empty defaults: the destination's values complete them (FinishServerFlags).
  AddStoreFlags(f, "source-", &c.source, &c.source_max_parallel_chunk_uploads,
                &c.source_min_chunk_size, "");
  f.Int("max-backups-to-copy", &c.max_backups, -1,
        "copy the specified number of backups sorted by date from newest to oldest (-1: all)");
  f.Int("max-backup-age", &c.max_backup_age, -1,
        "copy only the backups not older than the specified number of days (-1: any age)");
  f.Int("max-parallel-copy-operations", &c.max_parallel_copy_operations, 10,
        "maximum number of parallel copy operations");
  f.Bool("wait-for-final-snapshot", &c.wait_for_final_snapshot, false,
         "wait for a final full snapshot before copying backups");
  f.Duration("wait-for-final-snapshot-timeout", &c.wait_for_final_snapshot_timeout, milliseconds(0),
             "timeout for waiting for a final full snapshot (0: none)");
}

void AddSecondaryStoreFlags(FlagSet& f, ServerOptions* o) {
  SecondaryStoreFlags& s = o->secondary;
  AddStoreFlags(f, "secondary-", &s.store, &s.max_parallel_chunk_uploads, &s.min_chunk_size);
  f.Bool("secondary-backup-sync-enabled", &s.sync_enabled, false,
         "enable secondary backup-sync feature");
  f.Duration("secondary-backup-sync-period", &s.sync_period, milliseconds(60 * 60000),
             "period for periodic backup sync operations");
}

void AddCompressionFlags(FlagSet& f, ServerOptions* o) {
  f.Bool("compress-snapshots", &o->compress_snapshots, true, "compress the snapshots or not");
  f.String("compression-policy", &o->compression_policy, "gzip",
           "policy for compressing snapshots: gzip, zlib or lzw");
}

void AddRestorationFlags(FlagSet& f, ServerOptions* o) {
  RestorationFlags& r = o->restoration;
  f.String("initial-cluster", &r.initial_cluster, "default=http://localhost:2380",
           "initial cluster configuration for restoration");
  f.String("initial-cluster-token", &r.initial_cluster_token, "etcd-cluster",
           "initial cluster token for the etcd cluster during restoration");
  f.String("data-dir", &r.data_dir, "default.etcd", "path to the data directory");
  f.Shorthand("d", "data-dir");
  f.String("restoration-temp-snapshots-dir", &r.temp_dir, "default.restoration.tmp",
           "path to a temporary directory to store snapshots during restoration");
  f.StringList("initial-advertise-peer-urls", &r.initial_advertise_peer_urls,
               {"http://localhost:2380"}, ListSyntax::kWhole,
               "list of this member's peer URLs to advertise (repeatable)");
  f.String("name", &r.name, "default", "human-readable name for this member");
  f.Bool("skip-hash-check", &r.skip_hash_check, false, "ignore the snapshot integrity hash value");
  f.Int("max-fetchers", &r.max_fetchers, 6,
        "maximum number of threads that will fetch delta snapshots in parallel");
  f.Int("max-call-send-message-size", &r.max_call_send_message_size, 10 << 20,
        "maximum size of message that the client sends");
  f.Int("max-request-bytes", &r.max_request_bytes, 10 << 20,
        "maximum client request size in bytes the embedded etcd accepts");
  f.Int("max-txn-ops", &r.max_txn_ops, 10240,
        "maximum number of operations permitted in a transaction of the embedded etcd");
  f.Int("embedded-etcd-quota-bytes", &r.embedded_etcd_quota_bytes, int64_t{8} << 30,
        "maximum backend quota for the embedded etcd used for applying delta snapshots");
  f.String("auto-compaction-mode", &r.auto_compaction_mode, "periodic",
           "mode for auto-compaction of the embedded etcd: periodic or revision");
  f.String("auto-compaction-retention", &r.auto_compaction_retention, "30m",
           "auto-compaction retention length of the embedded etcd");
}

// The snapshot leases' flags (server and compact).
void AddSnapshotLeaseFlags(FlagSet& f, ServerOptions* o) {
  f.Bool("enable-snapshot-lease-renewal", &o->leases.snapshot_lease_renewal, false,
         "write the latest full and delta snapshot revisions to their leases");
  f.String("full-snapshot-lease-name", &o->leases.full_lease_name, "full-snapshot-revisions",
           "name of the lease holding the latest full snapshot's revision");
  f.String("delta-snapshot-lease-name", &o->leases.delta_lease_name, "delta-snapshot-revisions",
           "name of the lease holding the latest delta snapshot's revision");
}

void AddLeaseFlags(FlagSet& f, ServerOptions* o) {
  f.Bool("enable-member-lease-renewal", &o->leases.member_lease_renewal, false,
         "renew this member's lease (named after the member) every --k8s-heartbeat-duration");
  f.Duration("k8s-heartbeat-duration", &o->leases.heartbeat, milliseconds(30000),
             "period of the member lease renewal");
  AddSnapshotLeaseFlags(f, o);
}

void AddLeaderElectionFlags(FlagSet& f, ServerOptions* o) {
  f.Duration("reelection-period", &o->reelection_period, milliseconds(5000),
             "period after which the backup leader election is re-run");
  f.Duration("etcd-connection-timeout-leader-election", &o->leader_election_timeout,
             milliseconds(5000), "etcd client connection timeout during leader election");
}

void AddBackoffFlags(FlagSet& f, ServerOptions* o) {
  f.Int("backoff-multiplier", &o->backoff.multiplier, 2,
        "multiplicative factor for backoff mechanism");
  f.Int("backoff-attempt-limit", &o->backoff.attempt_limit, 6, "threshold no. of attempt limit");
  f.Duration("backoff-threshold-time", &o->backoff.threshold, milliseconds(128000),
             "upper bound backoff time");
}

void AddDefragmentationScheduleFlag(FlagSet& f, ServerOptions* o) {
  f.String("defragmentation-schedule", &o->defragmentation_schedule, "0 0 */3 * *",
           "schedule to defragment etcd data directory");
}

}  // namespace

Compression ServerOptions::EffectiveCompression() const {
  if (!compress_snapshots) return Compression::kNone;
  auto c = ParseCompressionPolicy(compression_policy);
  return c.ok() ? *c : Compression::kGzip;
}

void RegisterFlags(Command command, FlagSet& f, ServerOptions* o) {
  // Ours on every command (gardener's only on server): numbers as logrus levels, or names.
  f.String("log-level", &o->log_level, "4",
           "verbosity of logs: 0-2 error, 3 warn, 4 info, 5 debug (or debug, info, warn, error)");
  switch (command) {
    case Command::kServer:
      f.String("config-file", &o->config_file, "", "path to the configuration file");
      AddEtcdConnectionFlags(f, o);
      AddHttpServerFlags(f, o);
      AddSnapshotterFlags(f, o);
      AddStoreFlags(f, "", &o->store, &o->max_parallel_chunk_uploads, &o->min_chunk_size);
      AddRestorationFlags(f, o);
      AddCompressionFlags(f, o);
      AddLeaseFlags(f, o);
      AddLeaderElectionFlags(f, o);
      AddBackoffFlags(f, o);
      AddSecondaryStoreFlags(f, o);
      AddDefragmentationScheduleFlag(f, o);
      f.Bool("use-etcd-wrapper", &o->use_etcd_wrapper, false,
             "restart etcd through etcd-wrapper's /stop when its peer URLs change");
      // Ours: gardener's sidecar always calls port 9095.
      f.Int("etcd-wrapper-port", &o->etcd_wrapper_port, 9095,
            "port of etcd-wrapper's /stop on the host of the first --endpoints URL");
      // Older etcd-druid releases pass it (gardener's sidecar once looked for the etcd process
      // by this name); accepted and warned about.
      f.String("etcd-process-name", &o->etcd_process_name, "etcd",
               "name of the etcd process (accepted for compatibility)");
      break;
    case Command::kSnapshot:
      AddEtcdConnectionFlags(f, o);
      AddStoreFlags(f, "", &o->store, &o->max_parallel_chunk_uploads, &o->min_chunk_size);
      AddSnapshotterFlags(f, o);
      AddCompressionFlags(f, o);
      AddBackoffFlags(f, o);
      AddDefragmentationScheduleFlag(f, o);
      break;
    case Command::kRestore:
      AddRestorationFlags(f, o);
      AddStoreFlags(f, "", &o->store, &o->max_parallel_chunk_uploads, &o->min_chunk_size);
      break;
    case Command::kInitialize:
      f.String("validation-mode", &o->validation_mode, "full",
               "mode to do data initialization: full or sanity");
      AddRestorationFlags(f, o);
      AddStoreFlags(f, "", &o->store, &o->max_parallel_chunk_uploads, &o->min_chunk_size);
      AddEtcdConnectionFlags(f, o);
      break;
    case Command::kCompact:
      AddRestorationFlags(f, o);
      AddStoreFlags(f, "", &o->store, &o->max_parallel_chunk_uploads, &o->min_chunk_size);
      f.Bool("defragment", &o->defragment, true, "defragment after compaction");
      // Accepted for druid's job, without effect (WarnFlagsWithoutEffect).
      f.Duration("etcd-snapshot-timeout", &o->etcd.snapshot_timeout, milliseconds(30 * 60000),
                 "timeout duration for taking compacted full snapshots");
      f.Duration("etcd-defrag-timeout", &o->etcd.defrag_timeout, milliseconds(8 * 60000),
                 "timeout duration for etcd defrag call");
      AddSnapshotLeaseFlags(f, o);
      f.Duration("metrics-scrape-wait-duration", &o->metrics_scrape_wait, milliseconds(0),
                 "time to wait after the compaction before exiting, for metrics to be scraped");
      break;
    case Command::kCopy:
      AddCopyFlags(f, o);
      break;
  }
}

void FinishServerFlags(ServerOptions* o) {
  if (o->snapshotter.delta_memory_limit < 1) o->snapshotter.delta_memory_limit = 10 << 20;
  o->store.max_parallel_chunk_uploads = static_cast<int>(o->max_parallel_chunk_uploads);
  o->store.min_chunk_size = o->min_chunk_size;
  SecondaryStoreFlags& s = o->secondary;
  s.store.max_parallel_chunk_uploads = static_cast<int>(s.max_parallel_chunk_uploads);
  s.store.min_chunk_size = s.min_chunk_size;
  CopyFlags& c = o->copy;
  c.source.max_parallel_chunk_uploads = static_cast<int>(c.source_max_parallel_chunk_uploads);
  c.source.min_chunk_size = c.source_min_chunk_size;
  c.source.env_prefix = "SOURCE_";
  if (c.source.provider.empty()) c.source.provider = o->store.provider;
  if (c.source.prefix.empty()) c.source.prefix = o->store.prefix;
  if (c.source.temp_dir.empty()) c.source.temp_dir = o->store.temp_dir;
}

Result<log::Level> LogLevelOf(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    // A uint32 as pflag's Uint32Var reads it; logrus: 0 panic, 1 fatal, 2 error, 3 warn,
    // 4 info, 5 debug, 6 trace (and any higher number logs everything).
    if (text.size() > 10 || std::stoull(text) > 0xFFFFFFFFull) {
      return InvalidArgument("--log-level: \"" + text + "\" is out of range");
    }
    const unsigned long long n = std::stoull(text);
    if (n <= 2) return log::Level::kError;
    if (n == 3) return log::Level::kWarn;
    if (n == 4) return log::Level::kInfo;
    return log::Level::kDebug;
  }
  auto level = log::ParseLevel(text);
  if (!level.ok()) {
    return InvalidArgument("--log-level: unknown level \"" + text +
                           "\" (want 0-6, or debug, info, warn or error)");
  }
  return *level;
}

}  // namespace etcdw::sidecar
