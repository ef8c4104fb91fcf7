// etcd-druid's etcd configuration template (the ConfigMap its configmap component renders, keys
// and value formats as druid's etcdconfig.go writes them) -> the sidecar's /config rendering ->
// the config parser etcd-wrapper runs the member with. No key druid writes may be rejected or
// reported unknown by either side.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "etcdw/common/config.h"
#include "etcdw/common/logging.h"
#include "etcdw/sidecar/etcd_config.h"

namespace etcdw::sidecar {
namespace {

// Three members "etcd-main-{0,1,2}" in namespace shoot--dev--foo, TLS on the client and peer
// ports (druid's mount paths), default quota, snapshot count, compaction and freelist type.
const char kThreeMembersWithTls[] = R"(advertise-client-urls:
  etcd-main-0:
  - https://etcd-main-0.etcd-main-peer.shoot--dev--foo.svc:2379
  etcd-main-1:
  - https://etcd-main-1.etcd-main-peer.shoot--dev--foo.svc:2379
  etcd-main-2:
  - https://etcd-main-2.etcd-main-peer.shoot--dev--foo.svc:2379
auto-compaction-mode: periodic
auto-compaction-retention: 30m
backend-bbolt-freelist-type: array
client-transport-security:
  auto-tls: false
  cert-file: /var/etcd/ssl/server/tls.crt
  client-cert-auth: true
  key-file: /var/etcd/ssl/server/tls.key
  trusted-ca-file: /var/etcd/ssl/ca/bundle.crt
data-dir: /var/etcd/data/new.etcd
enable-grpc-gateway: false
initial-advertise-peer-urls:
  etcd-main-0:
  - https://etcd-main-0.etcd-main-peer.shoot--dev--foo.svc:2380
  etcd-main-1:
  - https://etcd-main-1.etcd-main-peer.shoot--dev--foo.svc:2380
  etcd-main-2:
  - https://etcd-main-2.etcd-main-peer.shoot--dev--foo.svc:2380
initial-cluster: etcd-main-0=https://etcd-main-0.etcd-main-peer.shoot--dev--foo.svc:2380,etcd-main-1=https://etcd-main-1.etcd-main-peer.shoot--dev--foo.svc:2380,etcd-main-2=https://etcd-main-2.etcd-main-peer.shoot--dev--foo.svc:2380
initial-cluster-state: new
initial-cluster-token: etcd-cluster
listen-client-urls: https://0.0.0.0:2379
listen-peer-urls: https://0.0.0.0:2380
metrics: basic
name: etcd-config
next-cluster-version-compatible: true
peer-transport-security:
  auto-tls: false
  cert-file: /var/etcd/ssl/peer/server/tls.crt
  client-cert-auth: true
  key-file: /var/etcd/ssl/peer/server/tls.key
  skip-client-san-verification: true
  trusted-ca-file: /var/etcd/ssl/peer/ca/bundle.crt
quota-backend-bytes: 8589934592
snapshot-count: 10000
)";

// One member with a member-name prefix, plain http on both ports (druid then writes no
// transport-security block), an additional advertised peer URL, revision compaction, the gRPC
// gateway and extensive metrics.
const char kOneMemberPlain[] = R"(advertise-client-urls:
  shoot--dev--bar-etcd-events-0:
  - http://etcd-events-0.etcd-events-peer.shoot--dev--bar.svc:2379
auto-compaction-mode: revision
auto-compaction-retention: "1000"
data-dir: /var/etcd/data/new.etcd
enable-grpc-gateway: true
initial-advertise-peer-urls:
  shoot--dev--bar-etcd-events-0:
  - http://etcd-events-0.etcd-events-peer.shoot--dev--bar.svc:2380
  - http://10.1.2.3:2380
initial-cluster: shoot--dev--bar-etcd-events-0=http://etcd-events-0.etcd-events-peer.shoot--dev--bar.svc:2380,shoot--dev--bar-etcd-events-0=http://10.1.2.3:2380
initial-cluster-state: new
initial-cluster-token: etcd-cluster
listen-client-urls: http://0.0.0.0:2379
listen-peer-urls: http://0.0.0.0:2380
member-name-prefix: shoot--dev--bar
metrics: extensive
name: etcd-config
next-cluster-version-compatible: true
quota-backend-bytes: 6442450944
snapshot-count: 75000
)";

std::vector<std::string> Strings(const std::vector<common::Url>& urls) {
  std::vector<std::string> out;
  for (const auto& u : urls) out.push_back(u.ToString());
  return out;
}

// Renders `tmpl` for `member` (no running cluster: a fresh bootstrap) and parses the result as
// etcd-wrapper does; `log` receives what the parser logged.
common::EtcdConfig RenderAndParse(const char* tmpl, const std::string& member,
                                  std::string* rendered, std::string* log) {
  auto t = EtcdConfigTemplate::Parse(tmpl, "druid template");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return {};
  auto r = t->Render(member, std::nullopt);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  *rendered = *r;
  const log::Level saved = log::GetLevel();
  log::SetLevel(log::Level::kInfo);
  ::testing::internal::CaptureStderr();
  auto cfg = common::ParseConfig(*r, "rendered");
  *log = ::testing::internal::GetCapturedStderr();
  log::SetLevel(saved);
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString() << "\n" << *r;
  return cfg.ok() ? *cfg : common::EtcdConfig{};
}

TEST(DruidEtcdConfigTest, ThreeMembersWithTlsRenderForEachMemberAndParse) {
  auto t = EtcdConfigTemplate::Parse(kThreeMembersWithTls, "druid template");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->ClusterSize(), 3u);
  EXPECT_EQ(t->DataDir(), "/var/etcd/data/new.etcd");
  for (const std::string member : {"etcd-main-0", "etcd-main-1", "etcd-main-2"}) {
    SCOPED_TRACE(member);
    std::string rendered, log;
    common::EtcdConfig cfg = RenderAndParse(kThreeMembersWithTls, member, &rendered, &log);
    const std::string host = member + ".etcd-main-peer.shoot--dev--foo.svc";
    EXPECT_EQ(cfg.name, member);
    EXPECT_EQ(cfg.data_dir, "/var/etcd/data/new.etcd");
    EXPECT_EQ(Strings(cfg.initial_advertise_peer_urls),
              std::vector<std::string>{"https://" + host + ":2380"});
    EXPECT_EQ(Strings(cfg.advertise_client_urls),
              std::vector<std::string>{"https://" + host + ":2379"});
    EXPECT_EQ(Strings(cfg.listen_client_urls), std::vector<std::string>{"https://0.0.0.0:2379"});
    EXPECT_EQ(Strings(cfg.listen_peer_urls), std::vector<std::string>{"https://0.0.0.0:2380"});
    ASSERT_EQ(cfg.initial_cluster.size(), 3u);
    for (const std::string m : {"etcd-main-0", "etcd-main-1", "etcd-main-2"}) {
      ASSERT_EQ(cfg.initial_cluster.count(m), 1u) << m;
      EXPECT_EQ(
          Strings(cfg.initial_cluster.at(m)),
          std::vector<std::string>{"https://" + m + ".etcd-main-peer.shoot--dev--foo.svc:2380"});
    }
    EXPECT_EQ(cfg.initial_cluster_state, "new");
    EXPECT_EQ(cfg.initial_cluster_token, "etcd-cluster");
    EXPECT_EQ(cfg.quota_backend_bytes, int64_t{8589934592});
    EXPECT_EQ(cfg.snapshot_count, 10000u);
    EXPECT_EQ(cfg.auto_compaction_mode, "periodic");
    EXPECT_EQ(cfg.auto_compaction_retention, "30m");
    EXPECT_EQ(cfg.client_tls.cert_file, "/var/etcd/ssl/server/tls.crt");
    EXPECT_EQ(cfg.client_tls.key_file, "/var/etcd/ssl/server/tls.key");
    EXPECT_EQ(cfg.client_tls.trusted_ca_file, "/var/etcd/ssl/ca/bundle.crt");
    EXPECT_TRUE(cfg.client_tls.client_cert_auth);
    EXPECT_FALSE(cfg.client_tls.auto_tls);
    EXPECT_EQ(cfg.peer_tls.cert_file, "/var/etcd/ssl/peer/server/tls.crt");
    EXPECT_EQ(cfg.peer_tls.key_file, "/var/etcd/ssl/peer/server/tls.key");
    EXPECT_EQ(cfg.peer_tls.trusted_ca_file, "/var/etcd/ssl/peer/ca/bundle.crt");
    EXPECT_TRUE(cfg.peer_tls.client_cert_auth);
    EXPECT_EQ(log.find("unknown config key"), std::string::npos) << log;
    EXPECT_EQ(log.find("\"level\":\"error\""), std::string::npos) << log;
  }
}

TEST(DruidEtcdConfigTest, ARunningClusterWithALearnerMakesTheStateExisting) {
  auto t = EtcdConfigTemplate::Parse(kThreeMembersWithTls, "druid template");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // etcd-main-2 joins a cluster of two as a learner.
  std::vector<EtcdConfigTemplate::Member> running = {
      {"etcd-main-0", false}, {"etcd-main-1", false}, {"etcd-main-2", true}};
  auto r = t->Render("etcd-main-2", running);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto cfg = common::ParseConfig(*r, "rendered");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString() << "\n" << *r;
  EXPECT_EQ(cfg->initial_cluster_state, "existing");
  EXPECT_EQ(cfg->initial_cluster.size(), 3u);
  EXPECT_EQ(cfg->name, "etcd-main-2");
}

TEST(DruidEtcdConfigTest, OneMemberWithHttpPeersAndANamePrefixParses) {
  auto t = EtcdConfigTemplate::Parse(kOneMemberPlain, "druid template");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->ClusterSize(), 2u);  // two entries, both this member's
  std::string rendered, log;
  const std::string member = "shoot--dev--bar-etcd-events-0";
  common::EtcdConfig cfg = RenderAndParse(kOneMemberPlain, member, &rendered, &log);
  EXPECT_EQ(cfg.name, member);
  EXPECT_EQ(
      Strings(cfg.initial_advertise_peer_urls),
      (std::vector<std::string>{"http://etcd-events-0.etcd-events-peer.shoot--dev--bar.svc:2380",
                                "http://10.1.2.3:2380"}));
  EXPECT_EQ(
      Strings(cfg.advertise_client_urls),
      std::vector<std::string>{"http://etcd-events-0.etcd-events-peer.shoot--dev--bar.svc:2379"});
  ASSERT_EQ(cfg.initial_cluster.size(), 1u);
  EXPECT_EQ(cfg.initial_cluster.at(member).size(), 2u);
  EXPECT_EQ(cfg.initial_cluster_state, "new");
  EXPECT_EQ(cfg.quota_backend_bytes, int64_t{6442450944});
  EXPECT_EQ(cfg.snapshot_count, 75000u);
  EXPECT_EQ(cfg.auto_compaction_mode, "revision");
  EXPECT_EQ(cfg.auto_compaction_retention, "1000");
  EXPECT_FALSE(cfg.client_tls.HasCertificate());
  EXPECT_FALSE(cfg.peer_tls.HasCertificate());
  EXPECT_EQ(log.find("unknown config key"), std::string::npos) << log;
  // The prefix and the rest of druid's keys pass through to the rendered file.
  EXPECT_NE(rendered.find("member-name-prefix: shoot--dev--bar"), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("metrics: extensive"), std::string::npos) << rendered;
}

TEST(DruidEtcdConfigTest, TheMemberNameIsThePrefixAndThePodName) {
  auto t = EtcdConfigTemplate::Parse(kOneMemberPlain, "druid template");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const char* saved = std::getenv("POD_NAME");
  const std::string saved_value = saved != nullptr ? saved : "";
  setenv("POD_NAME", "etcd-events-0", 1);
  EXPECT_EQ(t->MemberName(), "shoot--dev--bar-etcd-events-0");
  if (saved != nullptr) {
    setenv("POD_NAME", saved_value.c_str(), 1);
  } else {
    unsetenv("POD_NAME");
  }
}

// Every key druid's etcdconfig.go writes is known to the parser (acted on or accepted without
// effect), the TLS blocks' keys included.
TEST(DruidEtcdConfigTest, NoKeyDruidWritesIsUnknown) {
  for (const char* tmpl : {kThreeMembersWithTls, kOneMemberPlain}) {
    std::string rendered, log;
    const std::string member =
        tmpl == kOneMemberPlain ? "shoot--dev--bar-etcd-events-0" : "etcd-main-1";
    RenderAndParse(tmpl, member, &rendered, &log);
    EXPECT_EQ(log.find("unknown config key"), std::string::npos) << log;
    // (enable-grpc-gateway is a setting of ours: the gateway is served.)
    for (const char* key : {"metrics", "next-cluster-version-compatible"}) {
      EXPECT_NE(log.find(std::string("\"key\":\"") + key + "\""), std::string::npos)
          << key << " is not reported as accepted without effect:\n"
          << log;
    }
  }
}

}  // namespace
}  // namespace etcdw::sidecar
