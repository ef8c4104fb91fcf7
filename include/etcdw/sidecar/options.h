// The flags of `etcdbrctl server` (and of the `snapshot`, `restore` and `initialize` commands):
// gardener's etcd-backup-restore names and defaults, parsed with Go flag syntax (--flag value,
// --flag=value; the one-letter aliases -e -s -m -p -d as pflag's shorthands).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "etcdw/common/flags.h"
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
  std::string initial_advertise_peer_urls = "http://localhost:2380";
  std::string name = "default";  // --name
  bool skip_hash_check = false;  // --skip-hash-check
  int64_t max_fetchers = 6;      // --max-fetchers
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
  std::string log_level = "info";                        // --log-level
  // The list flags as given (comma-separated), split by FinishServerFlags.
  std::string endpoints_flag = "http://127.0.0.1:2379";  // --endpoints / -e
  std::string service_endpoints_flag;                    // --service-endpoints
  int64_t max_parallel_chunk_uploads = 5;                // --max-parallel-chunk-uploads
  int64_t min_chunk_size = int64_t{5} << 20;             // --min-chunk-size

  // Compression from the two compression flags.
  Compression EffectiveCompression() const;
};

// Registers every flag of `server` on `flags`, writing into `o`. Flags of gardener's that this
// implementation accepts but does not act on are listed in docs/configuration.md.
void RegisterServerFlags(common::FlagSet& flags, ServerOptions* o);
// After FlagSet::Parse: splits the list flags and applies gardener's resets (a memory limit
// below 1 becomes the default).
void FinishServerFlags(ServerOptions* o);

// Checks values and combinations; every problem is named, one per line.
Status ValidateServerOptions(const ServerOptions& o);

// The restore target from the restoration flags.
data_dir::RestoreTarget RestoreTargetOf(const RestorationFlags& r);

}  // namespace etcdw::sidecar
