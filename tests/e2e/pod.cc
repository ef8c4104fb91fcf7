#include "pod.h"

#include <algorithm>
#include <filesystem>

namespace etcdw::testing {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

Pod::Pod(size_t index, const std::vector<PodPorts>& cluster, const S3rver* s3)
    : s3_(s3),
      cluster_(cluster),
      index_(index),
      name_("etcd-main-" + std::to_string(index)),
      sidecar_port_(cluster[index].sidecar),
      wrapper_port_(cluster[index].wrapper),
      client_port_(cluster[index].client),
      peer_port_(cluster[index].peer) {
  fs::create_directories(dir_.File("home"));
  fs::create_directories(dir_.File("data"));
  WriteConfig(cluster.size());
  if (s3_) {
    WriteFile(dir_.File("s3.json"), R"({"accessKeyID": "S3RVER", "secretAccessKey": "S3RVER",
          "region": "us-east-1", "endpoint": ")" +
                                        s3_->endpoint() + R"("})");
  }
}

Pod::~Pod() {
  StopSupervising();
  wrapper_.Kill();
  sidecar_.Kill();
}

void Pod::WriteConfig(size_t cluster_size, const PeerTlsFiles* tls) {
  const bool https = tls != nullptr;
  // The template as etcd-druid writes it: URL keys are maps from member name to URLs.
  std::string clients, peers, initial;
  for (size_t i = 0; i < cluster_size; ++i) {
    const std::string n = "etcd-main-" + std::to_string(i);
    clients += "  " + n + ":\n  - " + cluster_[i].ClientUrl() + "\n";
    peers += "  " + n + ":\n  - " + cluster_[i].PeerUrl(https) + "\n";
    initial += (i ? "," : "") + n + "=" + cluster_[i].PeerUrl(https);
  }
  std::string yaml = "name: etcd-main\ndata-dir: " + DataDir() +
                     "\nlisten-client-urls: " + cluster_[index_].ClientUrl() +
                     "\nadvertise-client-urls:\n" + clients +
                     "listen-peer-urls: " + cluster_[index_].PeerUrl(https) +
                     "\ninitial-advertise-peer-urls:\n" + peers + "initial-cluster: " + initial +
                     "\ninitial-cluster-state: new\ninitial-cluster-token: etcd-cluster\n";
  if (https) {
    yaml += "peer-transport-security:\n  cert-file: " + tls->cert + "\n  key-file: " + tls->key +
            "\n  trusted-ca-file: " + tls->ca + "\n  client-cert-auth: true\n  auto-tls: false\n";
  }
  WriteFile(dir_.File("etcd.conf.yaml"), yaml);
}

std::vector<std::string> Pod::Env() const {
  std::vector<std::string> env = {
      "HOME=" + dir_.File("home"), "ETCD_CONF=" + dir_.File("etcd.conf.yaml"),
      "POD_NAME=" + name_,         "POD_NAMESPACE=shoot--test",
      "STORAGE_CONTAINER",         "AWS_APPLICATION_CREDENTIALS_JSON=" + dir_.File("s3.json")};
  env.insert(env.end(), extra_env_.begin(), extra_env_.end());
  return env;
}

namespace {

// Every member's client URL: a Kubernetes service's role.
std::string ServiceEndpoints(const std::vector<PodPorts>& cluster) {
  std::string out;
  for (size_t i = 0; i < cluster.size(); ++i) out += (i ? "," : "") + cluster[i].ClientUrl();
  return out;
}

}  // namespace

bool Pod::StartSidecar() {
  return StartSidecarWith(
      {"--server-port=" + std::to_string(sidecar_port_), "--endpoints=http://" + Endpoint(),
       "--service-endpoints=" + ServiceEndpoints(cluster_), "--data-dir=" + DataDir(),
       "--restoration-temp-snapshots-dir=" + dir_.File("data/restoration.tmp"),
       "--snapstore-temp-directory=" + dir_.File("data/temp"),
       s3_ ? "--storage-provider=S3" : "--storage-provider=Local",
       s3_ ? "--store-container=etcd-backups" : "--store-container=backups",
       "--store-prefix=etcd-main", "--schedule=0 0 1 1 *", "--delta-snapshot-period=1h",
       "--garbage-collection-period=0s", "--reelection-period=2s",
       "--etcd-connection-timeout-leader-election=2s", "--use-etcd-wrapper=true",
       "--etcd-wrapper-port=" + std::to_string(wrapper_port_)});
}

// etcd-druid's list (internal/component/statefulset/builder.go) with its value formats; only
// the host names, ports and paths are the test's. The store is Local: STORAGE_CONTAINER names
// the directory, as druid's Local provider does.
bool Pod::StartSidecarAsDruidDoes() {
  AddEnv("STORAGE_CONTAINER=" + dir_.File("home/backups"));
  return StartSidecarWith({"--server-port=" + std::to_string(sidecar_port_),
                           "--defragmentation-schedule=0 0 */3 * *",
                           "--etcd-defrag-timeout=8m0s",
                           "--auto-compaction-mode=periodic",
                           "--auto-compaction-retention=30m",
                           "--insecure-transport=true",
                           "--insecure-skip-tls-verify=true",
                           "--endpoints=http://" + Endpoint(),
                           "--service-endpoints=" + ServiceEndpoints(cluster_),
                           "--data-dir=" + DataDir(),
                           "--restoration-temp-snapshots-dir=" + dir_.File("data/restoration.temp"),
                           "--snapstore-temp-directory=" + dir_.File("data/temp"),
                           "--etcd-connection-timeout=5m",
                           "--use-etcd-wrapper=true",
                           "--enable-member-lease-renewal=true",
                           "--k8s-heartbeat-duration=1s",
                           "--embedded-etcd-quota-bytes=8589934592",
                           "--etcd-connection-timeout-leader-election=2s",
                           "--reelection-period=2s",
                           "--enable-snapshot-lease-renewal=true",
                           "--full-snapshot-lease-name=etcd-main-full-snap",
                           "--delta-snapshot-lease-name=etcd-main-delta-snap",
                           "--storage-provider=Local",
                           "--store-prefix=etcd-main",
                           "--schedule=0 0 1 1 *",
                           "--delta-snapshot-period=2s",
                           "--delta-snapshot-retention-period=0s",
                           "--delta-snapshot-memory-limit=104857600",
                           "--garbage-collection-policy=LimitBased",
                           "--max-backups=7",
                           "--garbage-collection-period=12h0m0s",
                           "--compress-snapshots=true",
                           "--compression-policy=gzip",
                           "--etcd-snapshot-timeout=15m0s",
                           "--etcd-wrapper-port=" + std::to_string(wrapper_port_)});
}

bool Pod::StartSidecarWith(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {EtcdbrctlBinary(), "server"};
  argv.insert(argv.end(), args.begin(), args.end());
  return sidecar_.Start(argv, dir_.File("sidecar.log"), Env());
}

bool Pod::StartWrapper() {
  std::vector<std::string> argv = {
      EtcdWrapperBinary(),
      "start-etcd",
      "--backup-restore-host-port=127.0.0.1:" + std::to_string(sidecar_port_),
      "--etcd-wrapper-port=" + std::to_string(wrapper_port_),
      "--etcd-client-port=" + std::to_string(client_port_),
      "--etcd-server-name=127.0.0.1",
      "--exit-code-file=" + dir_.File("data/exit_code")};
  // Appended: a restarted wrapper's log follows the previous one's.
  std::lock_guard<std::mutex> l(wrapper_mu_);
  return wrapper_.Start(argv, dir_.File("wrapper.log"), Env());
}

void Pod::SuperviseWrapper() {
  if (supervising_.exchange(true)) return;
  StartWrapper();
  supervisor_ = std::thread([this] {
    while (supervising_.load()) {
      bool exited = false;
      {
        std::lock_guard<std::mutex> l(wrapper_mu_);
        exited = !wrapper_.Running();
      }
      if (exited && supervising_.load()) {
        restarts_.fetch_add(1);
        StartWrapper();
      }
      SleepMs(100);
    }
  });
}

void Pod::StopSupervising() {
  supervising_.store(false);
  if (supervisor_.joinable()) supervisor_.join();
}

Result<common::HttpResponse> Pod::Get(int port, const std::string& target) {
  common::HttpClientOptions o;
  o.timeout = 60s;
  auto c = common::HttpClient::Create(o);
  if (!c.ok()) return c.status();
  return (*c)->Get("127.0.0.1:" + std::to_string(port), target);
}

bool Pod::WaitReady(std::chrono::milliseconds timeout) {
  return WaitUntil(
      [&] {
        auto r = Get(wrapper_port_, "/readyz");
        return r.ok() && r->status == 200;
      },
      timeout);
}

bool Pod::WaitBackupLeader(std::chrono::milliseconds timeout) {
  return WaitUntil(
      [&] {
        auto h = Sidecar("/healthz");
        if (!h.ok() || h->status != 200) return false;
        auto r = Sidecar("/snapshot/latest");
        return r.ok() && r->status == 200 &&
               r->body.find("\"fullSnapshot\":null") == std::string::npos;
      },
      timeout);
}

std::string Pod::Logs() const {
  auto tail = [](const std::string& s) { return s.size() > 6000 ? s.substr(s.size() - 6000) : s; };
  return "--- " + name_ + " sidecar ---\n" + tail(ReadFile(dir_.File("sidecar.log"))) + "\n--- " +
         name_ + " wrapper ---\n" + tail(ReadFile(dir_.File("wrapper.log")));
}

Dump DumpAll(const std::string& endpoint) {
  Dump d;
  CmdResult r = Etcdctl(endpoint, {"get", "", "--prefix", "-w", "json"});
  EXPECT_EQ(r.rc, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  if (j.is_null()) return d;
  d.revision = j["header"]["revision"].get<int64_t>();
  for (const auto& kv : j.value("kvs", nlohmann::json::array())) {
    d.kvs.push_back(kv["key"].get<std::string>() + "=" + kv["value"].get<std::string>() + "@" +
                    std::to_string(kv["create_revision"].get<int64_t>()) + "/" +
                    std::to_string(kv["mod_revision"].get<int64_t>()) + "/" +
                    std::to_string(kv["version"].get<int64_t>()));
  }
  return d;
}

std::vector<std::string> MemberNames(const std::string& endpoint) {
  std::vector<std::string> out;
  CmdResult r = Etcdctl(endpoint, {"member", "list", "-w", "json"});
  if (r.rc != 0) return out;
  nlohmann::json j = ParseJson(r.out);
  for (const auto& m : j.value("members", nlohmann::json::array())) {
    out.push_back(m.value("name", "") + (m.value("isLearner", false) ? ":learner" : ":voter"));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Dump WriteAndBackUp(Pod& pod) {
  EXPECT_TRUE(pod.StartSidecar());
  EXPECT_TRUE(pod.StartWrapper());
  EXPECT_TRUE(pod.WaitReady()) << pod.Logs();
  for (int i = 0; i < 20; ++i) {
    CmdResult r =
        Etcdctl(pod.Endpoint(), {"put", "key-" + std::to_string(i), "v" + std::to_string(i)});
    EXPECT_EQ(r.rc, 0) << r.Describe();
  }
  EXPECT_TRUE(pod.WaitBackupLeader()) << pod.Logs();
  auto full = pod.Sidecar("/snapshot/full");
  EXPECT_TRUE(full.ok() && full->status == 200)
      << (full.ok() ? full->body : full.status().ToString()) << pod.Logs();
  if (full.ok() && full->status == 200) {
    nlohmann::json j = ParseJson(full->body);
    EXPECT_EQ(j["kind"], "Full");
    EXPECT_EQ(j["startRevision"], 0);
    EXPECT_GE(j["lastRevision"].get<int64_t>(), 21);
  }
  // After the full snapshot: overwrites, deletes, new keys.
  EXPECT_EQ(Etcdctl(pod.Endpoint(), {"put", "key-3", "changed"}).rc, 0);
  EXPECT_EQ(Etcdctl(pod.Endpoint(), {"del", "key-4"}).rc, 0);
  EXPECT_EQ(Etcdctl(pod.Endpoint(), {"del", "key-1", "--prefix"}).rc, 0);  // key-1, key-1x
  EXPECT_EQ(Etcdctl(pod.Endpoint(), {"put", "late", "after-full"}).rc, 0);
  Dump before = DumpAll(pod.Endpoint());
  auto delta = pod.Sidecar("/snapshot/delta");
  EXPECT_TRUE(delta.ok() && delta->status == 200)
      << (delta.ok() ? delta->body : delta.status().ToString()) << pod.Logs();
  if (delta.ok() && delta->status == 200) {
    nlohmann::json j = ParseJson(delta->body);
    EXPECT_EQ(j["kind"], "Incr");
    EXPECT_EQ(j["lastRevision"].get<int64_t>(), before.revision);
  }
  auto latest = pod.Sidecar("/snapshot/latest");
  EXPECT_TRUE(latest.ok() && latest->status == 200);
  if (latest.ok()) {
    nlohmann::json j = ParseJson(latest->body);
    EXPECT_EQ(j["fullSnapshot"]["kind"], "Full");
    EXPECT_EQ(j["deltaSnapshots"].size(), 1u) << latest->body;
  }
  return before;
}

}  // namespace etcdw::testing
