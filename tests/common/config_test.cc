#include "etcdw/common/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "support/scratch_dir.h"

namespace etcdw::common {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(ConfigTest, EmptyDocumentGivesEtcdDefaults) {
  auto cfg = ParseConfig("", "test");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->name, "default");
  EXPECT_EQ(cfg->data_dir, "default.etcd");
  EXPECT_EQ(JoinUrls(cfg->listen_client_urls), "http://localhost:2379");
  EXPECT_EQ(cfg->max_request_bytes, 1572864u);
  EXPECT_EQ(cfg->max_txn_ops, 128u);
  EXPECT_EQ(cfg->initial_cluster.at("default").front().ToString(), "http://localhost:2380");
}

TEST(ConfigTest, EveryDefault) {
  auto cfg = ParseConfig("", "test");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(JoinUrls(cfg->advertise_client_urls), "http://localhost:2379");
  EXPECT_EQ(JoinUrls(cfg->listen_peer_urls), "http://localhost:2380");
  EXPECT_EQ(JoinUrls(cfg->initial_advertise_peer_urls), "http://localhost:2380");
  EXPECT_TRUE(cfg->listen_metrics_urls.empty());
  ASSERT_EQ(cfg->initial_cluster.size(), 1u);
  EXPECT_EQ(cfg->initial_cluster_state, "new");
  EXPECT_EQ(cfg->initial_cluster_token, "etcd-cluster");
  EXPECT_EQ(cfg->snapshot_count, 100000u);
  EXPECT_EQ(cfg->heartbeat_interval, milliseconds(100));
  EXPECT_EQ(cfg->election_timeout, milliseconds(1000));
  EXPECT_EQ(cfg->quota_backend_bytes, 0);
  EXPECT_EQ(cfg->EffectiveQuotaBytes(), int64_t{2} * 1024 * 1024 * 1024);
  EXPECT_EQ(cfg->auto_compaction_mode, "periodic");
  EXPECT_EQ(cfg->auto_compaction_retention, "0");
  EXPECT_EQ(cfg->watch_progress_notify_interval, minutes(10));
  EXPECT_FALSE(cfg->client_tls.HasCertificate());
  EXPECT_FALSE(cfg->peer_tls.HasCertificate());
  EXPECT_EQ(cfg->log_level, "info");
}

TEST(ConfigTest, NullValuesKeepDefaults) {
  auto cfg = ParseConfig(
      "initial-cluster-state:\nauto-compaction-mode: ''\n"
      "auto-compaction-retention:\nlisten-metrics-urls: ''\n",
      "t");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->initial_cluster_state, "new");
  EXPECT_EQ(cfg->auto_compaction_mode, "periodic");
  EXPECT_EQ(cfg->auto_compaction_retention, "0");
  EXPECT_TRUE(cfg->listen_metrics_urls.empty());
}

TEST(ConfigTest, EveryKey) {
  const char* yaml = R"(
name: etcd-main-0
data-dir: /var/etcd/data/new.etcd
listen-client-urls: https://0.0.0.0:2379
advertise-client-urls: https://etcd-main-0.etcd-main-peer:2379,https://10.0.0.1:2379
listen-peer-urls: http://0.0.0.0:2380
initial-advertise-peer-urls: http://etcd-main-0.etcd-main-peer:2380
listen-metrics-urls: http://0.0.0.0:2381
initial-cluster: etcd-main-0=http://etcd-main-0.etcd-main-peer:2380,etcd-main-1=http://b:2380
initial-cluster-state: existing
initial-cluster-token: etcd-cluster-x
snapshot-count: 75000
heartbeat-interval: 200
election-timeout: 2000
quota-backend-bytes: 8589934592
max-request-bytes: 10485760
max-txn-ops: 256
enable-grpc-gateway: false
auto-compaction-mode: revision
auto-compaction-retention: "1000"
experimental-watch-progress-notify-interval: 5s
log-level: debug
client-transport-security:
  cert-file: /var/etcd/ssl/server/tls.crt
  key-file: /var/etcd/ssl/server/tls.key
  trusted-ca-file: /var/etcd/ssl/ca/bundle.crt
  client-cert-auth: true
  auto-tls: false
peer-transport-security:
  cert-file: /p/tls.crt
  key-file: /p/tls.key
  trusted-ca-file: /p/ca.crt
  client-cert-auth: yes
)";
  auto cfg = ParseConfig(yaml, "t");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->name, "etcd-main-0");
  EXPECT_EQ(cfg->data_dir, "/var/etcd/data/new.etcd");
  EXPECT_EQ(JoinUrls(cfg->listen_client_urls), "https://0.0.0.0:2379");
  ASSERT_EQ(cfg->advertise_client_urls.size(), 2u);
  EXPECT_EQ(cfg->advertise_client_urls[1].host, "10.0.0.1");
  EXPECT_EQ(JoinUrls(cfg->listen_peer_urls), "http://0.0.0.0:2380");
  EXPECT_EQ(JoinUrls(cfg->initial_advertise_peer_urls), "http://etcd-main-0.etcd-main-peer:2380");
  EXPECT_EQ(JoinUrls(cfg->listen_metrics_urls), "http://0.0.0.0:2381");
  ASSERT_EQ(cfg->initial_cluster.size(), 2u);
  EXPECT_EQ(JoinUrls(cfg->initial_cluster.at("etcd-main-1")), "http://b:2380");
  EXPECT_EQ(cfg->initial_cluster_state, "existing");
  EXPECT_EQ(cfg->initial_cluster_token, "etcd-cluster-x");
  EXPECT_EQ(cfg->snapshot_count, 75000u);
  EXPECT_EQ(cfg->heartbeat_interval, milliseconds(200));
  EXPECT_EQ(cfg->election_timeout, milliseconds(2000));
  EXPECT_EQ(cfg->quota_backend_bytes, int64_t{8589934592});
  EXPECT_EQ(cfg->EffectiveQuotaBytes(), int64_t{8589934592});
  EXPECT_EQ(cfg->max_request_bytes, 10485760u);
  EXPECT_EQ(cfg->max_txn_ops, 256u);
  EXPECT_FALSE(cfg->enable_grpc_gateway);
  EXPECT_EQ(cfg->auto_compaction_mode, "revision");
  EXPECT_EQ(cfg->auto_compaction_retention, "1000");
  EXPECT_EQ(cfg->watch_progress_notify_interval, seconds(5));
  EXPECT_EQ(cfg->log_level, "debug");
  EXPECT_EQ(cfg->client_tls.cert_file, "/var/etcd/ssl/server/tls.crt");
  EXPECT_EQ(cfg->client_tls.key_file, "/var/etcd/ssl/server/tls.key");
  EXPECT_EQ(cfg->client_tls.trusted_ca_file, "/var/etcd/ssl/ca/bundle.crt");
  EXPECT_TRUE(cfg->client_tls.client_cert_auth);
  EXPECT_FALSE(cfg->client_tls.auto_tls);
  EXPECT_TRUE(cfg->client_tls.HasCertificate());
  EXPECT_EQ(cfg->peer_tls.cert_file, "/p/tls.crt");
  EXPECT_EQ(cfg->peer_tls.key_file, "/p/tls.key");
  EXPECT_EQ(cfg->peer_tls.trusted_ca_file, "/p/ca.crt");
  EXPECT_TRUE(cfg->peer_tls.client_cert_auth);
}

TEST(ConfigTest, DataDirDefaultsToNameDotEtcd) {
  auto cfg = ParseConfig("name: m1\ninitial-cluster: m1=http://localhost:2380\n", "t");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->data_dir, "m1.etcd");
}

TEST(ConfigTest, DefaultClusterUsesNameAndAdvertisedPeerUrls) {
  auto cfg = ParseConfig("name: solo\ninitial-advertise-peer-urls: http://10.1.1.1:2380\n", "t");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  ASSERT_EQ(cfg->initial_cluster.size(), 1u);
  EXPECT_EQ(JoinUrls(cfg->initial_cluster.at("solo")), "http://10.1.1.1:2380");
}

TEST(ConfigTest, UrlListsAsYamlSequences) {
  auto cfg = ParseConfig("listen-client-urls:\n  - http://a:1\n  - http://b:2\n", "t");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(JoinUrls(cfg->listen_client_urls), "http://a:1,http://b:2");
}

TEST(ConfigTest, SeveralPeerUrlsForOneMember) {
  auto cfg = ParseConfig(
      "initial-advertise-peer-urls: http://b:2380,http://a:2380\n"
      "initial-cluster: default=http://a:2380,default=http://b:2380\n",
      "t");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->initial_cluster.at("default").size(), 2u);
}

TEST(ConfigTest, UnknownAndInertKeysAreIgnored) {
  auto cfg = ParseConfig(
      "name: x\ninitial-cluster: x=http://localhost:2380\nenable-v2: true\n"
      "no-such-key: 1\nauto-compaction-retention-unit: h\n"
      "client-transport-security:\n  crl-file: /c\n  bogus: 1\n",
      "t");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->name, "x");
}

TEST(ConfigTest, FloatNotationIntegers) {
  // Go's YAML encoder writes large integers like this.
  auto cfg = ParseConfig(
      "quota-backend-bytes: 8.589934592e+09\nsnapshot-count: 1e+06\nmax-request-bytes: 1.5e6\n",
      "t");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->quota_backend_bytes, int64_t{8589934592});
  EXPECT_EQ(cfg->snapshot_count, 1000000u);
  EXPECT_EQ(cfg->max_request_bytes, 1500000u);
}

TEST(ConfigTest, NonIntegersAreRejectedNamingTheKey) {
  auto a = ParseConfig("snapshot-count: 1.5\n", "t");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(a.status().message(), "t: snapshot-count: \"1.5\" is not an integer");
  auto b = ParseConfig("max-txn-ops: lots\n", "t");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "t: max-txn-ops: \"lots\" is not an integer");
  auto c = ParseConfig("snapshot-count: -1\n", "t");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "t: snapshot-count: -1 must not be negative");
  auto d = ParseConfig("max-request-bytes: [1, 2]\n", "t");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            "t: max-request-bytes: expected a single value, not a list or map");
  auto e = ParseConfig("quota-backend-bytes: 1e30\n", "t");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("quota-backend-bytes"), std::string::npos);
}

TEST(ConfigTest, NegativeQuotaMeansNoQuota) {
  auto cfg = ParseConfig("quota-backend-bytes: -1\n", "t");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->EffectiveQuotaBytes(), -1);
}

TEST(ConfigTest, BooleansInYamlSpellings) {
  for (const char* t : {"true", "True", "yes", "on"}) {
    auto cfg = ParseConfig(std::string("client-transport-security:\n  cert-file: c\n"
                                       "  key-file: k\n  trusted-ca-file: ca\n"
                                       "  client-cert-auth: ") +
                               t + "\n",
                           "t");
    ASSERT_TRUE(cfg.ok()) << t << ": " << cfg.status().ToString();
    EXPECT_TRUE(cfg->client_tls.client_cert_auth) << t;
  }
  auto bad = ParseConfig("peer-transport-security:\n  auto-tls: maybe\n", "t");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "t: peer-transport-security: \"maybe\" is not a boolean (want true or false)");
}

TEST(ConfigTest, TransportSecurityMustBeAMap) {
  auto cfg = ParseConfig("client-transport-security: yes\n", "t");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message(), "t: client-transport-security: expected a map of TLS settings");
}

TEST(ConfigTest, BadYamlNamesTheLine) {
  auto cfg = ParseConfig("name: a\ndata-dir: b\nlisten-client-urls: [http://a:1\n", "my.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), Code::kInvalidArgument);
  const std::string& m = cfg.status().message();
  EXPECT_EQ(m.rfind("my.yaml: invalid YAML at line ", 0), 0u) << m;
  // The error is on line 3 or where the unterminated sequence ends (line 4).
  EXPECT_TRUE(m.find("line 3,") != std::string::npos || m.find("line 4,") != std::string::npos)
      << m;

  auto tab = ParseConfig("name: a\n\tdata-dir: b\n", "my.yaml");
  ASSERT_FALSE(tab.ok());
  EXPECT_NE(tab.status().message().find("line 2,"), std::string::npos) << tab.status().message();
}

TEST(ConfigTest, DocumentMustBeAMap) {
  auto cfg = ParseConfig("- a\n- b\n", "t");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message(), "t: the document must be a map of etcd configuration keys");
}

TEST(ConfigTest, BadUrlNamesTheKey) {
  auto cfg = ParseConfig("listen-client-urls: ftp://127.0.0.1:1\n", "f.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message(),
            "f.yaml: listen-client-urls: URL scheme must be http or https: ftp://127.0.0.1:1");
}

TEST(ConfigTest, BadUrlsInEachUrlKey) {
  for (const char* key : {"listen-client-urls", "advertise-client-urls", "listen-peer-urls",
                          "initial-advertise-peer-urls", "listen-metrics-urls"}) {
    auto cfg = ParseConfig(std::string(key) + ": http://a:1/path\n", "f");
    ASSERT_FALSE(cfg.ok()) << key;
    EXPECT_EQ(cfg.status().message(),
              "f: " + std::string(key) + ": URL must not contain a path: http://a:1/path");
  }
  auto empty = ParseConfig("listen-client-urls: ''\n", "f");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "f: listen-client-urls: no valid URLs given");
}

TEST(ConfigTest, HttpsClientUrlNeedsCertificate) {
  auto cfg = ParseConfig("listen-client-urls: https://0.0.0.0:2379\n", "f");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message(),
            "f: listen-client-urls: https://0.0.0.0:2379 needs client-transport-security."
            "cert-file and key-file");
}

TEST(ConfigTest, ClientCertAuthNeedsTrustedCa) {
  auto cfg = ParseConfig(
      "client-transport-security:\n  cert-file: c\n  key-file: k\n  client-cert-auth: true\n", "f");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message(),
            "f: client-transport-security.client-cert-auth: needs trusted-ca-file to verify "
            "clients");
}

TEST(ConfigTest, AutoTlsIsRefused) {
  auto cfg = ParseConfig("client-transport-security:\n  auto-tls: true\n", "f");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message().rfind("f: client-transport-security.auto-tls:", 0), 0u)
      << cfg.status().message();
}

TEST(ConfigTest, InitialClusterErrors) {
  auto no_eq = ParseConfig("initial-cluster: http://a:2380\n", "f");
  ASSERT_FALSE(no_eq.ok());
  EXPECT_EQ(no_eq.status().message(),
            "f: initial-cluster: \"http://a:2380\" is not of the form name=URL");
  auto empty_name = ParseConfig("initial-cluster: =http://a:2380\n", "f");
  ASSERT_FALSE(empty_name.ok());
  EXPECT_EQ(empty_name.status().message(),
            "f: initial-cluster: \"=http://a:2380\" is not of the form name=URL");
  auto empty = ParseConfig("initial-cluster: ''\n", "f");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "f: initial-cluster: must not be empty");
  auto bad_url = ParseConfig("initial-cluster: default=localhost:2380\n", "f");
  ASSERT_FALSE(bad_url.ok());
  EXPECT_EQ(bad_url.status().message(),
            "f: initial-cluster: URL scheme must be http or https: localhost:2380");
  auto missing_self = ParseConfig("initial-cluster: other=http://localhost:2380\n", "f");
  ASSERT_FALSE(missing_self.ok());
  EXPECT_EQ(missing_self.status().message(),
            "f: initial-cluster: has no entry for this member's name \"default\"");
  auto mismatch = ParseConfig("initial-cluster: default=http://other:2380\n", "f");
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().message(),
            "f: initial-cluster: entry \"default=http://other:2380\" does not match "
            "initial-advertise-peer-urls http://localhost:2380");
  // A joining member's entry is not compared with its advertised URLs.
  auto existing = ParseConfig(
      "initial-cluster-state: existing\ninitial-cluster: default=http://other:2380\n", "f");
  EXPECT_TRUE(existing.ok()) << existing.status().ToString();
}

TEST(ConfigTest, InitialClusterStateMustBeNewOrExisting) {
  auto cfg = ParseConfig("initial-cluster-state: fresh\n", "f");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message(),
            "f: initial-cluster-state: \"fresh\" is invalid (want new or existing)");
}

TEST(ConfigTest, ElectionTimeoutBounds) {
  auto short_et = ParseConfig("heartbeat-interval: 100\nelection-timeout: 499\n", "f");
  ASSERT_FALSE(short_et.ok());
  EXPECT_EQ(short_et.status().message(),
            "f: election-timeout: 499ms should be at least 5 times heartbeat-interval (100ms)");
  auto exactly5 = ParseConfig("heartbeat-interval: 100\nelection-timeout: 500\n", "f");
  EXPECT_TRUE(exactly5.ok()) << exactly5.status().ToString();
  auto long_et = ParseConfig("election-timeout: 50001\n", "f");
  ASSERT_FALSE(long_et.ok());
  EXPECT_EQ(long_et.status().message(),
            "f: election-timeout: 50001ms is too long, and should be set less than 50000ms");
  auto zero_hb = ParseConfig("heartbeat-interval: 0\n", "f");
  ASSERT_FALSE(zero_hb.ok());
  EXPECT_EQ(zero_hb.status().message(), "f: heartbeat-interval: must be greater than 0");
}

TEST(ConfigTest, HugeHeartbeatDoesNotOverflowTheElectionCheck) {
  // 5 * heartbeat overflows 64 bits; the check must still reject it.
  auto cfg = ParseConfig("heartbeat-interval: 2000000000000000000\n", "f");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message().rfind("f: election-timeout: 1000ms should be at least", 0), 0u)
      << cfg.status().message();
}

TEST(ConfigTest, OtherValidationErrorsNameTheKey) {
  struct Case {
    const char* yaml;
    const char* message;
  } cases[] = {
      {"name: ''\n", "f: name: must not be empty"},
      {"max-request-bytes: 0\n", "f: max-request-bytes: must be greater than 0"},
      {"max-txn-ops: 0\n", "f: max-txn-ops: must be greater than 0"},
      {"auto-compaction-mode: daily\n",
       "f: auto-compaction-mode: \"daily\" is invalid (want periodic or revision)"},
      {"auto-compaction-mode: revision\nauto-compaction-retention: 1h\n",
       "f: auto-compaction-retention: \"1h\" must be a number of revisions in revision mode"},
      {"auto-compaction-retention: 1y\n",
       "f: auto-compaction-retention: invalid duration \"1y\": unknown unit \"y\""},
      {"watch-progress-notify-interval: 10ms\n",
       "f: watch-progress-notify-interval: must be at least 100ms"},
      {"log-level: loud\n",
       "f: log-level: unknown log level 'loud' (want debug, info, warn, error, dpanic, panic or "
       "fatal)"},
  };
  for (const auto& c : cases) {
    auto cfg = ParseConfig(c.yaml, "f");
    ASSERT_FALSE(cfg.ok()) << c.yaml;
    EXPECT_EQ(cfg.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(cfg.status().message(), c.message) << c.yaml;
  }
}

TEST(ConfigTest, PeriodicRetentionAcceptsHoursAndDurations) {
  for (const char* r : {"1", "\"1\"", "30m", "1h30m", "72h"}) {
    auto cfg = ParseConfig(std::string("auto-compaction-retention: ") + r + "\n", "f");
    EXPECT_TRUE(cfg.ok()) << r << ": " << cfg.status().ToString();
  }
}

TEST(ConfigTest, WatchProgressIntervalAsNanosecondsOrDuration) {
  auto ns = ParseConfig("experimental-watch-progress-notify-interval: 600000000000\n", "f");
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  EXPECT_EQ(ns->watch_progress_notify_interval, minutes(10));
  auto d = ParseConfig("watch-progress-notify-interval: 1m30s\n", "f");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->watch_progress_notify_interval, seconds(90));
  auto bad = ParseConfig("watch-progress-notify-interval: soon\n", "f");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("f: watch-progress-notify-interval: ", 0), 0u);
}

TEST(ConfigTest, GrpcKeepaliveSettingsAsNanosecondsOrDuration) {
  auto def = ParseConfig("name: x\n", "f");
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(def->grpc_keepalive_min_time, seconds(5));  // etcd's defaults
  EXPECT_EQ(def->grpc_keepalive_interval, hours(2));
  EXPECT_EQ(def->grpc_keepalive_timeout, seconds(20));
  auto cfg = ParseConfig(
      "grpc-keepalive-min-time: 1000000000\ngrpc-keepalive-interval: 30s\n"
      "grpc-keepalive-timeout: 0\n",
      "f");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->grpc_keepalive_min_time, seconds(1));
  EXPECT_EQ(cfg->grpc_keepalive_interval, seconds(30));
  EXPECT_EQ(cfg->grpc_keepalive_timeout, seconds(0));
  auto bad = ParseConfig("grpc-keepalive-interval: often\n", "f");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("f: grpc-keepalive-interval: ", 0), 0u);
}

TEST(ParseDurationTest, BareIntegersUseTheBareUnit) {
  auto h = ParseDuration("3", hours(1));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, hours(3));
  auto ms = ParseDuration(" 250 ", milliseconds(1));
  ASSERT_TRUE(ms.ok());
  EXPECT_EQ(*ms, milliseconds(250));
  auto zero = ParseDuration("0", hours(1));
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, milliseconds(0));
}

TEST(ParseDurationTest, GoSyntax) {
  struct Case {
    const char* text;
    milliseconds want;
  } cases[] = {
      {"1h", hours(1)},
      {"1h30m", minutes(90)},
      {"2m3s", seconds(123)},
      {"500ms", milliseconds(500)},
      {"1.5s", milliseconds(1500)},
      {"0.5h", minutes(30)},
      {"2000us", milliseconds(2)},
      {"2000\xC2\xB5s", milliseconds(2)},
      {"3000000ns", milliseconds(3)},
      {"1h0m0s", hours(1)},
  };
  for (const auto& c : cases) {
    auto d = ParseDuration(c.text, hours(1));
    ASSERT_TRUE(d.ok()) << c.text << ": " << d.status().ToString();
    EXPECT_EQ(*d, c.want) << c.text;
  }
}

TEST(ParseDurationTest, Errors) {
  auto empty = ParseDuration("  ", hours(1));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "empty duration");
  auto unit = ParseDuration("5d", hours(1));
  ASSERT_FALSE(unit.ok());
  EXPECT_EQ(unit.status().message(), "invalid duration \"5d\": unknown unit \"d\"");
  auto missing = ParseDuration("1.5", hours(1));
  EXPECT_FALSE(missing.ok());
  auto letters = ParseDuration("h", hours(1));
  ASSERT_FALSE(letters.ok());
  EXPECT_EQ(letters.status().message(), "invalid duration \"h\"");
  EXPECT_FALSE(ParseDuration("1.2.3s", hours(1)).ok());
  EXPECT_FALSE(ParseDuration(".s", hours(1)).ok());
}

TEST(ParseDurationTest, OutOfRangeBareIntegersAreErrorsNotZero) {
  EXPECT_FALSE(ParseDuration("99999999999999999999", hours(1)).ok());
  // Fits in 64 bits as hours but not as milliseconds.
  EXPECT_FALSE(ParseDuration("9000000000000000", hours(1)).ok());
}

TEST(LoadConfigFileTest, ReadsFileAndNamesItInErrors) {
  testsupport::ScratchDir dir("config-test");
  const std::string good = dir.path() + "/good.yaml";
  std::ofstream(good) << "name: f1\ninitial-cluster: f1=http://localhost:2380\n";
  auto cfg = LoadConfigFile(good);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->name, "f1");

  const std::string bad = dir.path() + "/bad.yaml";
  std::ofstream(bad) << "listen-client-urls: ftp://a:1\n";
  auto b = LoadConfigFile(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "config file \"" + bad +
                                      "\": listen-client-urls: URL scheme must be http or "
                                      "https: ftp://a:1");

  auto missing = LoadConfigFile(dir.path() + "/none.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "config file \"" + dir.path() +
                                            "/none.yaml\": cannot be read: No such file or "
                                            "directory");
}

TEST(PrepareDataDirTest, CreatesMissingDirectoriesOwnerOnly) {
  testsupport::ScratchDir dir("config-test");
  EtcdConfig cfg;
  cfg.data_dir = dir.path() + "/a/b/member.etcd";
  ASSERT_TRUE(PrepareDataDir(cfg).ok());
  struct stat st {};
  ASSERT_EQ(stat(cfg.data_dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Idempotent.
  EXPECT_TRUE(PrepareDataDir(cfg).ok());
}

TEST(PrepareDataDirTest, RejectsAFile) {
  testsupport::ScratchDir dir("config-test");
  EtcdConfig cfg;
  cfg.data_dir = dir.path() + "/file";
  std::ofstream(cfg.data_dir) << "x";
  Status st = PrepareDataDir(cfg);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "data-dir: \"" + cfg.data_dir + "\" exists and is not a directory");
}

}  // namespace
}  // namespace etcdw::common
