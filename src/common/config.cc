#include "etcdw/common/config.h"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "etcdw/common/logging.h"

namespace etcdw::common {

namespace {

// Keys etcd's config loader understands that etcd-wrapper accepts without acting on them.
const std::set<std::string>& InertKeys() {
  static const std::set<std::string> keys = {"enable-v2",
                                             "metrics",
                                             "max-snapshots",
                                             "max-wals",
                                             "cors",
                                             "host-whitelist",
                                             "strict-reconfig-check",
                                             "pre-vote",
                                             "logger",
                                             "log-outputs",
                                             "log-package-levels",
                                             "debug",
                                             "discovery",
                                             "discovery-fallback",
                                             "discovery-proxy",
                                             "discovery-srv",
                                             "discovery-srv-name",
                                             "force-new-cluster",
                                             "enable-pprof",
                                             "self-signed-cert-validity",
                                             "backend-batch-interval",
                                             "backend-batch-limit",
                                             "backend-bbolt-freelist-type",
                                             "cipher-suites",
                                             "tls-min-version",
                                             "tls-max-version",
                                             "next-cluster-version-compatible",
                                             "wal-dir",
                                             "socket-reuse-port",
                                             "socket-reuse-address",
                                             "listen-client-http-urls",
                                             "max-concurrent-streams",
                                             "unsafe-no-fsync",
                                             "auto-compaction-retention-unit",
                                             "client-crl-file",
                                             "peer-crl-file",
                                             "log-rotation-config-json",
                                             "enable-log-rotation",
                                             "experimental-initial-corrupt-check",
                                             "experimental-corrupt-check-time",
                                             "experimental-enable-v2v3",
                                             "experimental-enable-lease-checkpoint",
                                             "experimental-compaction-batch-limit",
                                             "experimental-peer-skip-client-san-verification",
                                             "experimental-backend-bbolt-freelist-type",
                                             "experimental-enable-distributed-tracing",
                                             "experimental-memory-mlock",
                                             "experimental-txn-mode-write-with-shared-buffer",
                                             "experimental-warning-apply-duration",
                                             "experimental-bootstrap-defrag-threshold-megabytes",
                                             "experimental-max-learners",
                                             "experimental-downgrade-check-time",
                                             "experimental-compact-hash-check-enabled",
                                             "experimental-compact-hash-check-time",
                                             "experimental-stop-grpc-service-on-defrag",
                                             "experimental-warning-unary-request-duration",
                                             "experimental-snapshot-catchup-entries",
                                             "member-name-prefix",
                                             "proxy",
                                             "proxy-failure-wait",
                                             "proxy-refresh-interval",
                                             "proxy-dial-timeout",
                                             "proxy-write-timeout",
                                             "proxy-read-timeout"};
  return keys;
}

std::string Scalar(const YAML::Node& n) {
  if (n.IsNull()) return "";
  if (!n.IsScalar()) throw std::runtime_error("expected a single value, not a list or map");
  return n.Scalar();
}

int64_t ToInt(const YAML::Node& n) {
  std::string s(Trim(Scalar(n)));
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (!s.empty() && ec == std::errc() && p == s.data() + s.size()) return v;
  // Go's YAML marshaller may render large integers in float notation (8.589934592e+09).
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(s.c_str(), &end);
  if (!s.empty() && errno == 0 && end == s.c_str() + s.size() && std::floor(d) == d &&
      std::fabs(d) < 9.2e18) {
    return static_cast<int64_t>(d);
  }
  throw std::runtime_error("\"" + s + "\" is not an integer");
}

uint64_t ToUint(const YAML::Node& n) {
  int64_t v = ToInt(n);
  if (v < 0) throw std::runtime_error(std::to_string(v) + " must not be negative");
  return static_cast<uint64_t>(v);
}

bool ToBool(const YAML::Node& n) {
  std::string s(Trim(Scalar(n)));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off" || s.empty()) return false;
  throw std::runtime_error("\"" + s + "\" is not a boolean (want true or false)");
}

std::vector<Url> ToUrls(const YAML::Node& n) {
  std::string s = n.IsSequence() ? "" : Scalar(n);
  if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) s += (i ? "," : "") + Scalar(n[i]);
  }
  auto r = ParseUrlList(s);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return r.value();
}

std::map<std::string, std::vector<Url>> ToCluster(const YAML::Node& n) {
  std::map<std::string, std::vector<Url>> out;
  std::string s = Scalar(n);
  if (Trim(s).empty()) throw std::runtime_error("must not be empty");
  for (const std::string& part : Split(s, ',')) {
    size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw std::runtime_error("\"" + part + "\" is not of the form name=URL");
    }
    auto u = ParseUrl(part.substr(eq + 1));
    if (!u.ok()) throw std::runtime_error(u.status().message());
    out[part.substr(0, eq)].push_back(u.value());
  }
  return out;
}

void ParseTls(const YAML::Node& n, TlsConfig& tls, const std::string& parent) {
  if (n.IsNull()) return;
  if (!n.IsMap()) throw std::runtime_error("expected a map of TLS settings");
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string key = it->first.Scalar();
    // A copy: the iterator's `->` yields a temporary, a reference would dangle.
    const YAML::Node v = it->second;
    if (key == "cert-file")
      tls.cert_file = std::string(Trim(Scalar(v)));
    else if (key == "key-file")
      tls.key_file = std::string(Trim(Scalar(v)));
    else if (key == "trusted-ca-file")
      tls.trusted_ca_file = std::string(Trim(Scalar(v)));
    else if (key == "client-cert-auth")
      tls.client_cert_auth = ToBool(v);
    else if (key == "auto-tls")
      tls.auto_tls = ToBool(v);
    else if (key == "crl-file" || key == "allowed-cn" || key == "allowed-hostname" ||
             key == "skip-client-san-verification" || key == "insecure-skip-verify" ||
             key == "ca-file") {
      log::Info("config key accepted without effect", {log::F("key", parent + "." + key)});
    } else {
      log::Warn("unknown config key ignored", {log::F("key", parent + "." + key)});
    }
  }
}

// Durations written as Go time.Duration in etcd's JSON form are integer nanoseconds; strings
// in Go duration syntax are accepted too.
std::chrono::milliseconds ToGoDuration(const YAML::Node& n) {
  std::string s(Trim(Scalar(n)));
  bool all_digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  if (all_digits) return std::chrono::milliseconds(ToInt(n) / 1000000);
  auto d = ParseDuration(s, std::chrono::milliseconds(1));
  if (!d.ok()) throw std::runtime_error(d.status().message());
  return d.value();
}

}  // namespace

Result<std::chrono::milliseconds> ParseDuration(std::string_view text,
                                                std::chrono::milliseconds bare_unit) {
  std::string s(Trim(text));
  if (s.empty()) return InvalidArgument("empty duration");
  const auto invalid = [&s] { return InvalidArgument("invalid duration \"" + s + "\""); };
  bool all_digits = s.find_first_not_of("0123456789") == std::string::npos;
  if (all_digits) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return invalid();
    int64_t ms = 0;
    if (__builtin_mul_overflow(v, bare_unit.count(), &ms)) return invalid();
    return std::chrono::milliseconds(ms);
  }
  // Go duration: sequence of <decimal><unit>, units ns us µs ms s m h. Computed exactly in
  // nanoseconds (as Go does), then truncated to milliseconds.
  constexpr int64_t kMaxNs = INT64_MAX;
  unsigned __int128 total_ns = 0;
  size_t i = 0;
  while (i < s.size()) {
    uint64_t whole = 0, frac = 0, scale = 1;
    bool digits = false;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
      if (whole > (UINT64_MAX - 9) / 10) return invalid();
      whole = whole * 10 + static_cast<uint64_t>(s[i] - '0');
      digits = true;
    }
    if (i < s.size() && s[i] == '.') {
      for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
        if (scale <= UINT64_MAX / 100) {  // further digits are below a nanosecond
          frac = frac * 10 + static_cast<uint64_t>(s[i] - '0');
          scale *= 10;
        }
        digits = true;
      }
    }
    if (!digits) return invalid();
    size_t ustart = i;
    while (i < s.size() && !std::isdigit(static_cast<unsigned char>(s[i])) && s[i] != '.') ++i;
    std::string unit = s.substr(ustart, i - ustart);
    uint64_t unit_ns;
    if (unit == "ns")
      unit_ns = 1;
    else if (unit == "us" || unit == "\xC2\xB5s")
      unit_ns = 1000;
    else if (unit == "ms")
      unit_ns = 1000000;
    else if (unit == "s")
      unit_ns = 1000000000;
    else if (unit == "m")
      unit_ns = 60000000000;
    else if (unit == "h")
      unit_ns = 3600000000000;
    else
      return InvalidArgument("invalid duration \"" + s + "\": unknown unit \"" + unit + "\"");
    total_ns += static_cast<unsigned __int128>(whole) * unit_ns +
                static_cast<unsigned __int128>(frac) * unit_ns / scale;
    if (total_ns > static_cast<unsigned __int128>(kMaxNs)) return invalid();
  }
  return std::chrono::milliseconds(static_cast<int64_t>(total_ns / 1000000));
}

Result<EtcdConfig> ParseConfig(const std::string& yaml_text, const std::string& source) {
  EtcdConfig cfg;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    std::ostringstream msg;
    msg << source << ": invalid YAML at line " << e.mark.line + 1 << ", column "
        << e.mark.column + 1 << ": " << e.msg;
    return InvalidArgument(msg.str());
  }
  if (!root.IsNull() && !root.IsMap()) {
    return InvalidArgument(source + ": the document must be a map of etcd configuration keys");
  }

  bool cluster_set = false, acu_set = false, lcu_set = false, lpu_set = false, iapu_set = false;
  using Setter = std::function<void(const YAML::Node&)>;
  const std::map<std::string, Setter> setters = {
      {"name", [&](auto& n) { cfg.name = Scalar(n); }},
      {"data-dir", [&](auto& n) { cfg.data_dir = std::string(Trim(Scalar(n))); }},
      {"listen-client-urls",
       [&](auto& n) {
         cfg.listen_client_urls = ToUrls(n);
         lcu_set = true;
       }},
      {"advertise-client-urls",
       [&](auto& n) {
         cfg.advertise_client_urls = ToUrls(n);
         acu_set = true;
       }},
      {"listen-peer-urls",
       [&](auto& n) {
         cfg.listen_peer_urls = ToUrls(n);
         lpu_set = true;
       }},
      {"initial-advertise-peer-urls",
       [&](auto& n) {
         cfg.initial_advertise_peer_urls = ToUrls(n);
         iapu_set = true;
       }},
      {"listen-metrics-urls",
       [&](auto& n) {
         if (!Trim(Scalar(n)).empty()) cfg.listen_metrics_urls = ToUrls(n);
       }},
      {"initial-cluster",
       [&](auto& n) {
         cfg.initial_cluster = ToCluster(n);
         cluster_set = true;
       }},
      {"initial-cluster-state",
       [&](auto& n) {
         std::string s(Trim(Scalar(n)));
         cfg.initial_cluster_state = s.empty() ? "new" : s;
       }},
      {"initial-cluster-token", [&](auto& n) { cfg.initial_cluster_token = Scalar(n); }},
      {"snapshot-count", [&](auto& n) { cfg.snapshot_count = ToUint(n); }},
      {"heartbeat-interval",
       [&](auto& n) { cfg.heartbeat_interval = std::chrono::milliseconds(ToUint(n)); }},
      {"election-timeout",
       [&](auto& n) { cfg.election_timeout = std::chrono::milliseconds(ToUint(n)); }},
      {"quota-backend-bytes", [&](auto& n) { cfg.quota_backend_bytes = ToInt(n); }},
      {"max-request-bytes", [&](auto& n) { cfg.max_request_bytes = ToUint(n); }},
      {"max-txn-ops", [&](auto& n) { cfg.max_txn_ops = ToUint(n); }},
      {"enable-grpc-gateway", [&](auto& n) { cfg.enable_grpc_gateway = ToBool(n); }},
      {"auto-compaction-mode",
       [&](auto& n) {
         std::string s(Trim(Scalar(n)));
         cfg.auto_compaction_mode = s.empty() ? "periodic" : s;
       }},
      {"auto-compaction-retention",
       [&](auto& n) {
         std::string s(Trim(Scalar(n)));
         cfg.auto_compaction_retention = s.empty() ? "0" : s;
       }},
      {"experimental-watch-progress-notify-interval",
       [&](auto& n) { cfg.watch_progress_notify_interval = ToGoDuration(n); }},
      {"watch-progress-notify-interval",
       [&](auto& n) { cfg.watch_progress_notify_interval = ToGoDuration(n); }},
      {"grpc-keepalive-min-time", [&](auto& n) { cfg.grpc_keepalive_min_time = ToGoDuration(n); }},
      {"grpc-keepalive-interval", [&](auto& n) { cfg.grpc_keepalive_interval = ToGoDuration(n); }},
      {"grpc-keepalive-timeout", [&](auto& n) { cfg.grpc_keepalive_timeout = ToGoDuration(n); }},
      {"client-transport-security",
       [&](auto& n) { ParseTls(n, cfg.client_tls, "client-transport-security"); }},
      {"peer-transport-security",
       [&](auto& n) { ParseTls(n, cfg.peer_tls, "peer-transport-security"); }},
      {"log-level", [&](auto& n) { cfg.log_level = std::string(Trim(Scalar(n))); }},
      {"auth-token",
       [&](auto& n) {
         std::string s(Trim(Scalar(n)));
         cfg.auth_token = s.empty() ? "simple" : s;
       }},
      {"bcrypt-cost", [&](auto& n) { cfg.bcrypt_cost = ToUint(n); }},
      {"auth-token-ttl", [&](auto& n) { cfg.auth_token_ttl = std::chrono::seconds(ToUint(n)); }},
  };

  if (root.IsMap()) {
    for (auto it = root.begin(); it != root.end(); ++it) {
      std::string key = it->first.Scalar();
      auto s = setters.find(key);
      if (s != setters.end()) {
        try {
          s->second(it->second);
        } catch (const std::exception& e) {
          return InvalidArgument(source + ": " + key + ": " + e.what());
        }
      } else if (InertKeys().count(key)) {
        log::Info("config key accepted without effect", {log::F("key", key)});
      } else {
        log::Warn("unknown config key ignored", {log::F("key", key)});
      }
    }
  }

  auto def = [](const char* u) { return std::vector<Url>{ParseUrl(u).value()}; };
  if (!lcu_set) cfg.listen_client_urls = def("http://localhost:2379");
  if (!acu_set) cfg.advertise_client_urls = def("http://localhost:2379");
  if (!lpu_set) cfg.listen_peer_urls = def("http://localhost:2380");
  if (!iapu_set) cfg.initial_advertise_peer_urls = def("http://localhost:2380");
  if (!cluster_set) cfg.initial_cluster[cfg.name] = cfg.initial_advertise_peer_urls;
  if (cfg.data_dir.empty()) cfg.data_dir = cfg.name + ".etcd";

  Status st = ValidateConfig(cfg);
  if (!st.ok()) return st.WithContext(source);
  return cfg;
}

Status ValidateConfig(const EtcdConfig& cfg) {
  if (cfg.name.empty()) return InvalidArgument("name: must not be empty");
  if (cfg.initial_cluster_state != "new" && cfg.initial_cluster_state != "existing") {
    return InvalidArgument("initial-cluster-state: \"" + cfg.initial_cluster_state +
                           "\" is invalid (want new or existing)");
  }
  if (cfg.heartbeat_interval.count() <= 0) {
    return InvalidArgument("heartbeat-interval: must be greater than 0");
  }
  // Compared by division: 5 * heartbeat-interval may not fit in 64 bits.
  if (cfg.heartbeat_interval.count() > cfg.election_timeout.count() / 5) {
    return InvalidArgument("election-timeout: " + std::to_string(cfg.election_timeout.count()) +
                           "ms should be at least 5 times heartbeat-interval (" +
                           std::to_string(cfg.heartbeat_interval.count()) + "ms)");
  }
  if (cfg.election_timeout.count() > 50000) {
    return InvalidArgument("election-timeout: " + std::to_string(cfg.election_timeout.count()) +
                           "ms is too long, and should be set less than 50000ms");
  }
  if (cfg.max_request_bytes == 0)
    return InvalidArgument("max-request-bytes: must be greater than 0");
  if (cfg.max_txn_ops == 0) return InvalidArgument("max-txn-ops: must be greater than 0");
  if (cfg.auto_compaction_mode != "periodic" && cfg.auto_compaction_mode != "revision") {
    return InvalidArgument("auto-compaction-mode: \"" + cfg.auto_compaction_mode +
                           "\" is invalid (want periodic or revision)");
  }
  if (cfg.auto_compaction_mode == "revision") {
    const std::string& r = cfg.auto_compaction_retention;
    if (r.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument("auto-compaction-retention: \"" + r +
                             "\" must be a number of revisions in revision mode");
    }
  } else {
    auto d = ParseDuration(cfg.auto_compaction_retention, std::chrono::hours(1));
    if (!d.ok()) return d.status().WithContext("auto-compaction-retention");
  }
  if (cfg.watch_progress_notify_interval.count() < 100) {
    return InvalidArgument("watch-progress-notify-interval: must be at least 100ms");
  }
  for (const Url& u : cfg.listen_client_urls) {
    if (u.tls() && !cfg.client_tls.HasCertificate()) {
      return InvalidArgument("listen-client-urls: " + u.ToString() +
                             " needs client-transport-security.cert-file and key-file");
    }
  }
  if (cfg.client_tls.auto_tls && !cfg.client_tls.HasCertificate()) {
    return InvalidArgument(
        "client-transport-security.auto-tls: self-signed certificates are not supported; "
        "configure cert-file and key-file");
  }
  if (cfg.client_tls.client_cert_auth && cfg.client_tls.trusted_ca_file.empty()) {
    return InvalidArgument(
        "client-transport-security.client-cert-auth: needs trusted-ca-file to verify clients");
  }
  auto self = cfg.initial_cluster.find(cfg.name);
  if (self == cfg.initial_cluster.end()) {
    return InvalidArgument("initial-cluster: has no entry for this member's name \"" + cfg.name +
                           "\"");
  }
  if (cfg.initial_cluster_state == "new") {
    // etcd requires the advertised peer URLs of this member to match its initial-cluster entry.
    auto sorted = [](std::vector<Url> v) {
      std::vector<std::string> s;
      s.reserve(v.size());
      for (auto& u : v) s.push_back(u.ToString());
      std::sort(s.begin(), s.end());
      return s;
    };
    if (sorted(self->second) != sorted(cfg.initial_advertise_peer_urls)) {
      return InvalidArgument("initial-cluster: entry \"" + cfg.name + "=" + JoinUrls(self->second) +
                             "\" does not match initial-advertise-peer-urls " +
                             JoinUrls(cfg.initial_advertise_peer_urls));
    }
  }
  auto lvl = log::ParseLevel(cfg.log_level);
  if (!lvl.ok()) return lvl.status().WithContext("log-level");
  return Status::Ok();
}

Result<EtcdConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument("config file \"" + path + "\": cannot be read: " + std::strerror(errno));
  }
  // An ifstream opens a directory without complaint and then reads nothing, which would pass
  // for an empty config (every default).
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgument("config file \"" + path + "\": cannot be read: Is a directory");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    return InvalidArgument("config file \"" + path + "\": cannot be read: " + std::strerror(errno));
  }
  return ParseConfig(ss.str(), "config file \"" + path + "\"");
}

Status PrepareDataDir(const EtcdConfig& cfg) {
  const std::string& dir = cfg.data_dir;
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return InvalidArgument("data-dir: \"" + dir + "\": " + std::strerror(errno));
    }
    // Create the missing path, parents included, with owner-only permissions as etcd does.
    std::string partial;
    for (const std::string& part : Split(dir, '/')) {
      partial += part;
      if (!partial.empty() && mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
        return InvalidArgument("data-dir: cannot create \"" + dir + "\": " + std::strerror(errno));
      }
      partial += '/';
    }
    if (stat(dir.c_str(), &st) != 0) {
      return InvalidArgument("data-dir: cannot create \"" + dir + "\": " + std::strerror(errno));
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    return InvalidArgument("data-dir: \"" + dir + "\" exists and is not a directory");
  }
  if (access(dir.c_str(), R_OK | W_OK | X_OK) != 0) {
    return InvalidArgument("data-dir: \"" + dir + "\" is not writable: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace etcdw::common
