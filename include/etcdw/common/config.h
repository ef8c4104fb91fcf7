// The etcd configuration file (the YAML that etcd's --config-file reads and that the sidecar
// serves on /config). Keys, defaults and validation follow etcd 3.4/3.5; keys etcd knows but we
// do not act on are accepted and logged, unknown keys are logged and ignored.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/common/url.h"

namespace etcdw::common {

struct TlsConfig {
  std::string cert_file;
  std::string key_file;
  std::string trusted_ca_file;
  bool client_cert_auth = false;
  bool auto_tls = false;

  // True when a certificate and key are configured (the listener can serve TLS).
  bool HasCertificate() const { return !cert_file.empty() && !key_file.empty(); }
};

struct EtcdConfig {
  std::string name = "default";
  std::string data_dir;  // default: "<name>.etcd"

  std::vector<Url> listen_client_urls;           // default http://localhost:2379
  std::vector<Url> advertise_client_urls;        // default http://localhost:2379
  std::vector<Url> listen_peer_urls;             // default http://localhost:2380
  std::vector<Url> initial_advertise_peer_urls;  // default http://localhost:2380
  std::vector<Url> listen_metrics_urls;          // default none

  // name -> peer URLs; default "<name>=<initial-advertise-peer-urls>".
  std::map<std::string, std::vector<Url>> initial_cluster;
  std::string initial_cluster_state = "new";  // "new" | "existing"
  std::string initial_cluster_token = "etcd-cluster";

  uint64_t snapshot_count = 100000;
  std::chrono::milliseconds heartbeat_interval{100};
  std::chrono::milliseconds election_timeout{1000};

  int64_t quota_backend_bytes = 0;       // 0: default (2 GiB); negative: no quota
  uint64_t max_request_bytes = 1572864;  // 1.5 MiB
  uint64_t max_txn_ops = 128;
  bool enable_grpc_gateway = true;  // etcd's JSON API under /v3/ on the client port

  std::string auto_compaction_mode = "periodic";  // "periodic" | "revision"
  std::string auto_compaction_retention = "0";    // "0": disabled

  std::chrono::milliseconds watch_progress_notify_interval{10 * 60 * 1000};

  // The client port's gRPC keepalive (etcd's defaults). As etcd, a value of 0 leaves gRPC's
  // own: a 5 min minimum between client pings; both the interval and the timeout > 0 or
  // neither applies (2 h, 20 s).
  std::chrono::milliseconds grpc_keepalive_min_time{5 * 1000};
  std::chrono::milliseconds grpc_keepalive_interval{2 * 60 * 60 * 1000};
  std::chrono::milliseconds grpc_keepalive_timeout{20 * 1000};

  TlsConfig client_tls;
  TlsConfig peer_tls;

  std::string log_level = "info";

  // Authentication (member/auth_store.h): the token kind ("simple", or "jwt,pub-key=...,..."),
  // bcrypt's cost for new password hashes (etcd: an invalid cost is replaced by 10), and how
  // long a simple token lives without being used.
  std::string auth_token = "simple";
  uint64_t bcrypt_cost = 10;
  std::chrono::seconds auth_token_ttl{300};

  // The default quota etcd applies when quota-backend-bytes is 0.
  static constexpr int64_t kDefaultQuotaBytes = int64_t{2} * 1024 * 1024 * 1024;
  int64_t EffectiveQuotaBytes() const {
    return quota_backend_bytes == 0 ? kDefaultQuotaBytes : quota_backend_bytes;
  }
};

// Loads and validates a config file. Errors name the key and the problem, e.g.
// `config file "/x.yaml": listen-client-urls: URL scheme must be http or https: ftp://a:1`.
Result<EtcdConfig> LoadConfigFile(const std::string& path);

// Parses YAML text (an empty document gives every default). `source` names it in errors.
Result<EtcdConfig> ParseConfig(const std::string& yaml_text, const std::string& source);

// Checks the combination of settings (TLS for https URLs, the cluster map, timing bounds).
Status ValidateConfig(const EtcdConfig& cfg);

// Creates the data directory (mode 0700) if missing and checks that it is a writable directory.
Status PrepareDataDir(const EtcdConfig& cfg);

// Parses a retention/interval duration: Go syntax ("1h30m", "500ms", "2s") or a bare integer,
// which is interpreted in `bare_unit`.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text,
                                                std::chrono::milliseconds bare_unit);

}  // namespace etcdw::common
