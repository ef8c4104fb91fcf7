// The flags of `etcdbrctl server`, `snapshot`, `restore` and `initialize`: gardener's
// etcd-backup-restore names, defaults and per-command groups, parsed with Go flag syntax
// (--flag value, --flag=value; the one-letter shorthands -e -s -m -p -d; list flags as pflag's).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "etcdw/common/flags.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/status.h"
#include "etcdw/data_dir/data_dir.h"
#include "etcdw/sidecar/compression.h"
#include "etcdw/sidecar/etcd_client.h"
#include "etcdw/sidecar/gc.h"
#include "etcdw/sidecar/snap_store.h"

namespace etcdw::sidecar {

struct HttpServerFlags {
  int64_t port = 8080;    // --server-port / -p
  std::string cert_file;  // --server-cert (HTTPS when both are set)
  std::string key_file;   // --server-key
  bool enable_profiling = false;
};

struct SnapshotterFlags {
  std::string schedule = "0 */1 * * *";           // --schedule / -s
  std::chrono::milliseconds delta_period{20000};  // --delta-snapshot-period
  int64_t delta_memory_limit = 10 << 20;          // --delta-snapshot-memory-limit
  std::chrono::milliseconds gc_period{60000};     // --garbage-collection-period
  std::string gc_policy = "Exponential";          // --garbage-collection-policy
  int64_t max_backups = 7;                        // --max-backups / -m
  std::chrono::milliseconds delta_retention{0};   // --delta-snapshot-retention-period
};

struct RestorationFlags {
  std::string initial_cluster = "default=http://localhost:2380";  // --initial-cluster
  std::string initial_cluster_token = "etcd-cluster";             // --initial-cluster-token
  std::string data_dir = "default.etcd";                          // --data-dir / -d
  std::string temp_dir = "default.restoration.tmp";  // --restoration-temp-snapshots-dir
  // --initial-advertise-peer-urls, repeatable (each value may also be a comma-separated list)
  std::vector<std::string> initial_advertise_peer_urls{"http://localhost:2380"};
  std::string name = "default";  // --name
  bool skip_hash_check = false;  // --skip-hash-check
  int64_t max_fetchers = 6;      // --max-fetchers
  // Settings of the embedded etcd gardener's restore replays deltas into. Our restore is
  // offline (no etcd runs), so they are validated as gardener's and have no effect.
  int64_t max_call_send_message_size = 10 << 20;         // --max-call-send-message-size
  int64_t max_request_bytes = 10 << 20;                  // --max-request-bytes
  int64_t max_txn_ops = 10 * 1024;                       // --max-txn-ops
  int64_t embedded_etcd_quota_bytes = int64_t{8} << 30;  // --embedded-etcd-quota-bytes
  std::string auto_compaction_mode = "periodic";         // --auto-compaction-mode
  std::string auto_compaction_retention = "30m";         // --auto-compaction-retention
};

// gardener's secondary store (`server` only): the store flags prefixed `secondary-`, and a
// periodic copy of the primary's backups to it while leading (sidecar/backup_sync.h). The
// variables of its store are prefixed SECONDARY_; an empty provider is the primary's.
struct SecondaryStoreFlags {
  SnapStoreOptions store;
  int64_t max_parallel_chunk_uploads = 5;             // --secondary-max-parallel-chunk-uploads
  int64_t min_chunk_size = int64_t{5} << 20;          // --secondary-min-chunk-size
  bool sync_enabled = false;                          // --secondary-backup-sync-enabled
  std::chrono::milliseconds sync_period{60 * 60000};  // --secondary-backup-sync-period
};

// `etcdbrctl copy`: the source store (the store flags prefixed `source-`, its environment
// variables prefixed SOURCE_) and gardener's copier flags. An empty source provider, prefix or
// temporary directory is the destination's (gardener's MergeWith).
struct CopyFlags {
  SnapStoreOptions source;
  int64_t source_max_parallel_chunk_uploads = 5;     // --source-max-parallel-chunk-uploads
  int64_t source_min_chunk_size = int64_t{5} << 20;  // --source-min-chunk-size
  int64_t max_backups = -1;                          // --max-backups-to-copy (-1: all)
  int64_t max_backup_age = -1;                       // --max-backup-age (days; -1: any)
  int64_t max_parallel_copy_operations = 10;         // --max-parallel-copy-operations
  bool wait_for_final_snapshot = false;              // --wait-for-final-snapshot
  std::chrono::milliseconds wait_for_final_snapshot_timeout{0};  // ...-timeout (0: none)
};

// gardener's exponential back-off settings.
struct BackoffFlags {
  int64_t multiplier = 2;                       // --backoff-multiplier
  int64_t attempt_limit = 6;                    // --backoff-attempt-limit
  std::chrono::milliseconds threshold{128000};  // --backoff-threshold-time
};

// Kubernetes leases (gardener's health flags).
struct LeaseFlags {
  bool member_lease_renewal = false;                          // --enable-member-lease-renewal
  std::chrono::milliseconds heartbeat{30000};                 // --k8s-heartbeat-duration
  bool snapshot_lease_renewal = false;                        // --enable-snapshot-lease-renewal
  std::string full_lease_name = "full-snapshot-revisions";    // --full-snapshot-lease-name
  std::string delta_lease_name = "delta-snapshot-revisions";  // --delta-snapshot-lease-name
};

struct ServerOptions {
  EtcdConnectionOptions etcd;
  LeaseFlags leases;
  HttpServerFlags http;
  SnapshotterFlags snapshotter;
  SnapStoreOptions store;
  bool compress_snapshots = true;           // --compress-snapshots
  std::string compression_policy = "gzip";  // --compression-policy
  RestorationFlags restoration;
  std::chrono::milliseconds reelection_period{5000};  // --reelection-period
  std::chrono::milliseconds leader_election_timeout{
      5000};  // --etcd-connection-timeout-leader-election
  std::string defragmentation_schedule = "0 0 */3 * *";  // --defragmentation-schedule
  bool use_etcd_wrapper = false;                         // --use-etcd-wrapper
  // --log-level: gardener's logrus number (0 panic ... 4 info, 5 debug, 6 trace) or a name
  // (debug, info, warn, error); see LogLevelOf.
  std::string log_level = "4";
  std::string config_file;               // --config-file (server)
  std::string validation_mode = "full";  // --validation-mode (initialize)
  SecondaryStoreFlags secondary;
  CopyFlags copy;
  BackoffFlags backoff;
  int64_t max_parallel_chunk_uploads = 5;     // --max-parallel-chunk-uploads
  int64_t min_chunk_size = int64_t{5} << 20;  // --min-chunk-size
  // Ours: the etcd-wrapper's port for /stop (gardener's sidecar always uses 9095).
  int64_t etcd_wrapper_port = 9095;                  // --etcd-wrapper-port
  std::string etcd_process_name = "etcd";            // --etcd-process-name (older druid passes it)
  bool defragment = true;                            // --defragment (compact)
  std::chrono::milliseconds metrics_scrape_wait{0};  // --metrics-scrape-wait-duration (compact)

  // Compression from the two compression flags.
  Compression EffectiveCompression() const;
};

// The commands of etcdbrctl whose flags are gardener's.
enum class Command { kServer, kSnapshot, kRestore, kInitialize, kCompact, kCopy };

// Registers the flags of `command` on `flags`, writing into `o`: gardener's flag groups for that
// command (server: all; snapshot: etcd connection, store, snapshotter, compression, back-off,
// --defragmentation-schedule; restore: restoration and store; initialize: --validation-mode,
// restoration, store, etcd connection; compact: restoration, store, --defragment, the etcd
// timeouts, the snapshot lease flags, --metrics-scrape-wait-duration; copy: the store, the source
// store and the copier flags), and --log-level on every command.
void RegisterFlags(Command command, common::FlagSet& flags, ServerOptions* o);
// After FlagSet::Parse: copies the stores' chunk settings, applies gardener's resets (a memory
// limit below 1 becomes the default) and completes the copy source from the destination.
void FinishServerFlags(ServerOptions* o);

// Logs one warning naming each flag given on the command line that `command` accepts for
// compatibility but does not act on (docs/compatibility.md lists them); returns their names.
std::vector<std::string> WarnFlagsWithoutEffect(Command command, const common::FlagSet& flags);

// --log-level as gardener reads it (logrus levels 0-2 error, 3 warn, 4 info, 5 and above
// debug) or one of our names (debug, info, warn, error).
Result<log::Level> LogLevelOf(const std::string& text);

// Checks values and combinations; every problem is named, one per line.
Status ValidateServerOptions(const ServerOptions& o);

// The restore target from the restoration flags.
data_dir::RestoreTarget RestoreTargetOf(const RestorationFlags& r);

}  // namespace etcdw::sidecar
