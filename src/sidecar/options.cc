#include "etcdw/sidecar/options.h"

#include <sstream>

#include "etcdw/common/url.h"
#include "etcdw/sidecar/cron.h"

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

// pflag shorthands: the one-letter flag writes the same variable.
void StringWithShort(common::FlagSet& f, const std::string& name, const std::string& shorthand,
                     std::string* target, const std::string& def, const std::string& usage) {
  f.String(name, target, def, usage);
  f.String(shorthand, target, def, "shorthand for --" + name);
}

}  // namespace

Compression ServerOptions::EffectiveCompression() const {
  if (!compress_snapshots) return Compression::kNone;
  auto c = ParseCompressionPolicy(compression_policy);
  return c.ok() ? *c : Compression::kGzip;
}

void RegisterServerFlags(common::FlagSet& f, ServerOptions* o) {
  using std::chrono::milliseconds;
  // etcd connection
  StringWithShort(f, "endpoints", "e", &o->endpoints_flag, "http://127.0.0.1:2379",
                  "comma separated list of etcd endpoints");
  f.String("service-endpoints", &o->service_endpoints_flag, "",
           "comma separated list of endpoints reaching the ready members (a Kubernetes service)");
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
  f.Bool("insecure-skip-tls-verify", &o->etcd.insecure_skip_verify, true,
         "skip server certificate verification");
  f.String("cert", &o->etcd.cert_file, "",
           "identify secure client using this TLS certificate file");
  f.String("key", &o->etcd.key_file, "", "identify secure client using this TLS key file");
  f.String("cacert", &o->etcd.ca_file, "",
           "verify certificates of TLS-enabled secure servers using this CA bundle");
  // HTTP server
  f.Int("server-port", &o->http.port, 8080, "port on which server should listen");
  f.Int("p", &o->http.port, 8080, "shorthand for --server-port");
  f.String("server-cert", &o->http.cert_file, "", "path to server certificate");
  f.String("server-key", &o->http.key_file, "", "path to server key");
  f.Bool("enable-profiling", &o->http.enable_profiling, false,
         "accepted for compatibility; no profiling endpoints are served");
  // snapshotter
  StringWithShort(f, "schedule", "s", &o->snapshotter.schedule, "0 */1 * * *",
                  "schedule for snapshots");
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
  f.Int("m", &o->snapshotter.max_backups, 7, "shorthand for --max-backups");
  f.Duration("delta-snapshot-retention-period", &o->snapshotter.delta_retention, milliseconds(0),
             "how long delta snapshots of superseded full snapshots are kept");
  // snapshot store
  f.String("storage-provider", &o->store.provider, "",
           "snapshot storage provider: Local or S3 (empty: no backups)");
  f.String("store-container", &o->store.container, "",
           "container (bucket) for snapshots; default from STORAGE_CONTAINER");
  f.String("store-prefix", &o->store.prefix, "", "prefix or directory inside the container");
  f.String("store-endpoint-override", &o->store.endpoint_override, "",
           "override the storage provider's endpoint");
  f.Int("max-parallel-chunk-uploads", &o->max_parallel_chunk_uploads, 5,
        "maximum number of parallel chunk uploads allowed");
  f.Int("min-chunk-size", &o->min_chunk_size, int64_t{5} << 20,
        "minimum size for multipart chunk upload (at least 5 MiB)");
  f.String("snapstore-temp-directory", &o->store.temp_dir, "/tmp",
           "temporary directory for processing snapshots");
  // compression
  f.Bool("compress-snapshots", &o->compress_snapshots, true, "compress the snapshots or not");
  f.String("compression-policy", &o->compression_policy, "gzip",
           "policy for compressing snapshots: gzip, zlib or lzw");
  // restoration
  f.String("initial-cluster", &o->restoration.initial_cluster, "default=http://localhost:2380",
           "initial cluster configuration for restoration");
  f.String("initial-cluster-token", &o->restoration.initial_cluster_token, "etcd-cluster",
           "initial cluster token for the etcd cluster during restoration");
  StringWithShort(f, "data-dir", "d", &o->restoration.data_dir, "default.etcd",
                  "path to the data directory");
  f.String("restoration-temp-snapshots-dir", &o->restoration.temp_dir, "default.restoration.tmp",
           "path to a temporary directory to store snapshots during restoration");
  f.String("initial-advertise-peer-urls", &o->restoration.initial_advertise_peer_urls,
           "http://localhost:2380", "list of this member's peer URLs to advertise");
  f.String("name", &o->restoration.name, "default", "human-readable name for this member");
  f.Bool("skip-hash-check", &o->restoration.skip_hash_check, false,
         "ignore the snapshot integrity hash value");
  f.Int("max-fetchers", &o->restoration.max_fetchers, 6,
        "maximum number of threads that will fetch delta snapshots in parallel");
  // Kubernetes leases
  f.Bool("enable-member-lease-renewal", &o->leases.member_lease_renewal, false,
         "renew this member's lease (named after the member) every --k8s-heartbeat-duration");
  f.Duration("k8s-heartbeat-duration", &o->leases.heartbeat, milliseconds(30000),
             "period of the member lease renewal");
  f.Bool("enable-snapshot-lease-renewal", &o->leases.snapshot_lease_renewal, false,
         "write the latest full and delta snapshot revisions to their leases");
  f.String("full-snapshot-lease-name", &o->leases.full_lease_name, "full-snapshot-revisions",
           "name of the lease holding the latest full snapshot's revision");
  f.String("delta-snapshot-lease-name", &o->leases.delta_lease_name, "delta-snapshot-revisions",
           "name of the lease holding the latest delta snapshot's revision");
  // leader election, defragmentation, wrapper
  f.Duration("reelection-period", &o->reelection_period, milliseconds(5000),
             "period after which the backup leader election is re-run");
  f.Duration("etcd-connection-timeout-leader-election", &o->leader_election_timeout,
             milliseconds(5000), "etcd client connection timeout during leader election");
  f.String("defragmentation-schedule", &o->defragmentation_schedule, "0 0 */3 * *",
           "schedule to defragment etcd data directory");
  f.Bool("use-etcd-wrapper", &o->use_etcd_wrapper, false,
         "restart etcd through etcd-wrapper's /stop when its peer URLs change");
  f.String("log-level", &o->log_level, "info", "log level: debug, info, warn or error");
}

}  // namespace etcdw::sidecar

namespace etcdw::sidecar {

void FinishServerFlags(ServerOptions* o) {
  o->etcd.endpoints = SplitList(o->endpoints_flag);
  o->etcd.service_endpoints = SplitList(o->service_endpoints_flag);
  if (o->snapshotter.delta_memory_limit < 1) o->snapshotter.delta_memory_limit = 10 << 20;
  o->store.max_parallel_chunk_uploads = static_cast<int>(o->max_parallel_chunk_uploads);
  o->store.min_chunk_size = o->min_chunk_size;
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
  if (o.max_parallel_chunk_uploads <= 0) {
    problems.push_back("--max-parallel-chunk-uploads must be greater than 0");
  }
  if (o.min_chunk_size < (int64_t{5} << 20)) {
    problems.push_back("--min-chunk-size must be at least 5242880 (5 MiB)");
  }
  if (o.restoration.max_fetchers <= 0) problems.push_back("--max-fetchers must be greater than 0");
  if (auto urls = common::ParseUrlList(o.restoration.initial_advertise_peer_urls); !urls.ok()) {
    problems.push_back("--initial-advertise-peer-urls: " + urls.status().message());
  }
  if (o.restoration.initial_cluster.find('=') == std::string::npos) {
    problems.push_back("--initial-cluster \"" + o.restoration.initial_cluster +
                       "\" is not a list of name=URL");
  }
  if (o.reelection_period <= std::chrono::milliseconds(1000)) {
    problems.push_back("--reelection-period must be greater than 1s");
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
  if (!o.store.provider.empty() && o.store.provider != "Local" && o.store.provider != "S3") {
    problems.push_back("--storage-provider: unsupported storage provider \"" + o.store.provider +
                       "\" (supported: Local, S3)");
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
  t.initial_advertise_peer_urls = SplitList(r.initial_advertise_peer_urls);
  return t;
}

}  // namespace etcdw::sidecar
