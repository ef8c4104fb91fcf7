// The pod as etcd-druid runs it, end to end: the real sidecar with druid's argument list and
// environment against the Kubernetes API test server (HTTPS, a bearer token, a kubeconfig),
// the real wrapper under a kubelet-like supervisor.
//   - the three leases (member, full snapshot, delta snapshot) renewed with the right contents,
//     through conflicts and an API server that fails or goes away;
//   - seed 002: one pod with http peer URLs and writes going on; the config moves to https
//     peer URLs: MemberUpdate, /stop, restart, tls-enabled "true"; then two more pods join as
//     learners, catch up and are promoted; every acknowledged write is on every member;
//   - seed 000: a known member of three whose volume is lost, with no backup store, rejoins
//     from its peers as a learner and is promoted (never started as a new cluster).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "kube_api_server.h"
#include "pod.h"
#include "test_certs.h"

namespace etcdw::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr char kNs[] = "shoot--test";
constexpr char kToken[] = "druid-sidecar-token";

nlohmann::json DruidLease(const std::string& name) {
  // As etcd-druid creates them: no holder, a label, an annotation of druid's.
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata",
           {{"name", name},
            {"labels", {{"app.kubernetes.io/part-of", "etcd-main"}}},
            {"annotations", {{"druid.gardener.cloud/owner", "etcd-main"}}}}},
          {"spec", nlohmann::json::object()}};
}

class DruidPodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(certs_.AddCa("kube-ca")) << certs_.log();
    ASSERT_TRUE(certs_.Issue("kube-api", "kube-ca")) << certs_.log();
    ASSERT_TRUE(certs_.AddCa("peer-ca")) << certs_.log();
    ASSERT_TRUE(certs_.Issue("peer", "peer-ca")) << certs_.log();
    KubeApiServerOptions o;
    o.cert_file = certs_.Crt("kube-api");
    o.key_file = certs_.Key("kube-api");
    o.token = kToken;
    api_ = std::make_unique<KubeApiServer>(o);
    ASSERT_TRUE(api_->Start().ok());
    WriteFile(kubeconfig_.File("config"),
              "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: " +
                  api_->url() + "\n    certificate-authority: " + certs_.Crt("kube-ca") +
                  "\nusers:\n- name: sidecar\n  user:\n    token: " + kToken +
                  "\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: "
                  "sidecar\n    namespace: " +
                  kNs + "\ncurrent-context: test\n");
    for (const char* name : {"etcd-main-0", "etcd-main-1", "etcd-main-2", "etcd-main-full-snap",
                             "etcd-main-delta-snap"}) {
      api_->Put(kNs, DruidLease(name));
    }
  }
  void TearDown() override {
    if (HasFailure()) {
      for (auto& p : pods_) std::cerr << p->Logs() << "\n";
    }
  }

  Pod& AddPod(size_t index, const std::vector<PodPorts>& ports) {
    pods_.push_back(std::make_unique<Pod>(index, ports));
    pods_.back()->AddEnv("KUBECONFIG=" + kubeconfig_.File("config"));
    return *pods_.back();
  }
  PeerTlsFiles PeerTls() const {
    return {certs_.Crt("peer"), certs_.Key("peer"), certs_.Crt("peer-ca")};
  }

  nlohmann::json Lease(const std::string& name) { return api_->Get(kNs, name).value(); }
  std::string Holder(const std::string& name) {
    const nlohmann::json spec = Lease(name)["spec"];
    return spec.contains("holderIdentity") && spec["holderIdentity"].is_string()
               ? spec["holderIdentity"].get<std::string>()
               : "";
  }
  std::string TlsEnabled(const std::string& name) {
    const nlohmann::json a = Lease(name)["metadata"].value("annotations", nlohmann::json());
    return a.value("member.etcd.gardener.cloud/tls-enabled", "");
  }
  // "<member ID hex>:<cluster ID hex>:<role>" as etcdctl reports the member's status.
  static std::string IdentityOf(const std::string& endpoint, const std::string& role) {
    CmdResult r = Etcdctl(endpoint, {"endpoint", "status", "-w", "json"});
    if (r.rc != 0) return "";
    nlohmann::json j = ParseJson(r.out);
    if (!j.is_array() || j.empty()) return "";
    const auto& h = j[0]["Status"]["header"];
    char buf[64];
    std::snprintf(buf, sizeof buf,
                  "%llx:%llx:", static_cast<unsigned long long>(h["member_id"].get<uint64_t>()),
                  static_cast<unsigned long long>(h["cluster_id"].get<uint64_t>()));
    return std::string(buf) + role;
  }

  TestCerts certs_;
  TempDir kubeconfig_;
  std::unique_ptr<KubeApiServer> api_;
  std::vector<std::unique_ptr<Pod>> pods_;
};

TEST_F(DruidPodTest, DruidsArgumentsRenewAllThreeLeases) {
  std::vector<PodPorts> ports(1);
  Pod& pod = AddPod(0, ports);
  ASSERT_TRUE(pod.StartSidecarAsDruidDoes());
  pod.SuperviseWrapper();
  ASSERT_TRUE(pod.WaitReady()) << pod.Logs();
  EXPECT_FALSE(Contains(pod.SidecarLog(), "flag provided but not defined"));

  // The member heartbeat: this member leads; http peer URLs.
  const std::string leader = IdentityOf(pod.Endpoint(), "Leader");
  ASSERT_FALSE(leader.empty());
  EXPECT_TRUE(WaitUntil([&] { return Holder("etcd-main-0") == leader; }, 30s))
      << Lease("etcd-main-0");
  EXPECT_EQ(TlsEnabled("etcd-main-0"), "false");
  EXPECT_EQ(Lease("etcd-main-0")["metadata"]["annotations"]["druid.gardener.cloud/owner"],
            "etcd-main");
  const std::string renewed = Lease("etcd-main-0")["spec"]["renewTime"];
  EXPECT_TRUE(WaitUntil([&] { return Lease("etcd-main-0")["spec"]["renewTime"] != renewed; }, 10s))
      << "renewed every --k8s-heartbeat-duration (1s)";

  // The full lease: the start-up full snapshot's revision.
  ASSERT_TRUE(pod.WaitBackupLeader()) << pod.Logs();
  EXPECT_TRUE(WaitUntil([&] { return !Holder("etcd-main-full-snap").empty(); }, 20s));
  const int64_t full_rev = std::stoll(Holder("etcd-main-full-snap"));
  EXPECT_GE(full_rev, 1);
  // The delta lease: "0" with no delta yet, then the revision of the writes once a delta
  // period (2s) has saved them.
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(Etcdctl(pod.Endpoint(), {"put", "k" + std::to_string(i), "v"}).rc, 0);
  }
  const int64_t written = DumpAll(pod.Endpoint()).revision;
  EXPECT_TRUE(
      WaitUntil([&] { return Holder("etcd-main-delta-snap") == std::to_string(written); }, 30s))
      << Lease("etcd-main-delta-snap") << pod.Logs();
  // A triggered full snapshot moves the full lease up.
  auto full = pod.Sidecar("/snapshot/full");
  ASSERT_TRUE(full.ok() && full->status == 200) << pod.Logs();
  EXPECT_TRUE(
      WaitUntil([&] { return Holder("etcd-main-full-snap") == std::to_string(written); }, 20s));

  // Conflicts on the leases' writes are read again and retried.
  api_->FailNext(3, 409, "PATCH");
  ASSERT_EQ(Etcdctl(pod.Endpoint(), {"put", "after-conflicts", "v"}).rc, 0);
  const int64_t after_conflicts = DumpAll(pod.Endpoint()).revision;
  EXPECT_TRUE(WaitUntil(
      [&] { return Holder("etcd-main-delta-snap") == std::to_string(after_conflicts); }, 30s))
      << pod.Logs();

  // The API server fails, then goes away for a while: log lines only; backups go on.
  api_->FailNext(5, 500);
  api_->Stop();
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(Etcdctl(pod.Endpoint(), {"put", "while-away-" + std::to_string(i), "v"}).rc, 0);
  }
  const int64_t while_away = DumpAll(pod.Endpoint()).revision;
  SleepMs(3000);
  EXPECT_TRUE(pod.sidecar().Running());
  ASSERT_TRUE(api_->Start().ok());
  EXPECT_TRUE(
      WaitUntil([&] { return Holder("etcd-main-delta-snap") == std::to_string(while_away); }, 30s))
      << pod.Logs();
  auto latest = pod.Sidecar("/snapshot/latest");
  ASSERT_TRUE(latest.ok());
  EXPECT_GE(ParseJson(latest->body)["deltaSnapshots"].back()["lastRevision"].get<int64_t>(),
            while_away);
  const std::string log = pod.SidecarLog();
  EXPECT_TRUE(Contains(log, "member lease not renewed")) << log.substr(0, 2000);
  EXPECT_EQ(pod.wrapper_restarts(), 0);
}

// Writes keys through `endpoint` until stopped, recording the acknowledged ones and the
// longest time writes kept failing.
class Writer {
 public:
  explicit Writer(std::string endpoint) : endpoint_(std::move(endpoint)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Writer() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // Starts measuring the longest failure streak from now.
  void ResetLongestGap() {
    std::lock_guard<std::mutex> l(mu_);
    longest_gap_ = 0ms;
  }
  std::chrono::milliseconds longest_gap() {
    std::lock_guard<std::mutex> l(mu_);
    return longest_gap_;
  }
  std::vector<std::string> acknowledged() {
    std::lock_guard<std::mutex> l(mu_);
    return acked_;
  }

 private:
  void Run() {
    auto failing_since = std::chrono::steady_clock::time_point();
    for (int i = 0; !stop_.load(); ++i) {
      const std::string key = "w" + std::to_string(i);
      CmdResult r = Etcdctl(endpoint_, {"put", key, "v"}, "", 10s);
      const auto now = std::chrono::steady_clock::now();
      std::lock_guard<std::mutex> l(mu_);
      if (r.rc == 0) {
        acked_.push_back(key);
        failing_since = {};
      } else {
        if (failing_since == std::chrono::steady_clock::time_point()) failing_since = now;
        longest_gap_ =
            std::max(longest_gap_,
                     std::chrono::duration_cast<std::chrono::milliseconds>(now - failing_since));
      }
    }
  }
  const std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> acked_;
  std::chrono::milliseconds longest_gap_{0};
  std::thread thread_;
};

TEST_F(DruidPodTest, PeerTlsEnablementThenScaleUpFromOneToThree) {
  std::vector<PodPorts> ports(3);
  Pod& p0 = AddPod(0, ports);
  p0.WriteConfig(1);
  ASSERT_TRUE(p0.StartSidecarAsDruidDoes());
  p0.SuperviseWrapper();
  ASSERT_TRUE(p0.WaitReady()) << p0.Logs();
  EXPECT_TRUE(WaitUntil([&] { return TlsEnabled("etcd-main-0") == "false"; }, 30s));
  Writer writer(p0.Endpoint());

  // druid switches the config to https peer URLs and restarts the pod.
  const PeerTlsFiles tls = PeerTls();
  p0.StopSupervising();
  p0.sidecar().Kill();
  p0.wrapper().Kill();
  p0.WriteConfig(1, &tls);
  ASSERT_TRUE(p0.StartSidecarAsDruidDoes());
  p0.SuperviseWrapper();
  // The sidecar moves the registration to https and restarts etcd through the wrapper.
  EXPECT_TRUE(WaitUntil([&] { return TlsEnabled("etcd-main-0") == "true"; }, 90s)) << p0.Logs();
  EXPECT_GE(p0.wrapper_restarts(), 1) << "etcd restarted through /stop";
  EXPECT_TRUE(Contains(p0.SidecarLog(), "asked etcd-wrapper to restart etcd")) << p0.Logs();
  CmdResult list = Etcdctl(p0.Endpoint(), {"member", "list"});
  EXPECT_TRUE(Contains(list.out, ports[0].PeerUrl(true))) << list.Describe();
  ASSERT_TRUE(p0.WaitReady()) << p0.Logs();

  // Scale to three: pods 1 and 2 start with empty volumes and the three-member config.
  writer.ResetLongestGap();
  Pod& p1 = AddPod(1, ports);
  Pod& p2 = AddPod(2, ports);
  for (Pod* p : {&p1, &p2}) {
    p->WriteConfig(3, &tls);
    ASSERT_TRUE(p->StartSidecarAsDruidDoes());
    p->SuperviseWrapper();
  }
  const std::vector<std::string> voters = {"etcd-main-0:voter", "etcd-main-1:voter",
                                           "etcd-main-2:voter"};
  EXPECT_TRUE(WaitUntil([&] { return MemberNames(p0.Endpoint()) == voters; }, 180s))
      << p1.Logs() << p2.Logs();
  EXPECT_LE(writer.longest_gap(), 5000ms) << "writes failed for longer than a leader election";
  for (Pod* p : {&p1, &p2}) {
    EXPECT_TRUE(p->WaitReady()) << p->Logs();
    EXPECT_TRUE(Contains(p->SidecarLog(), "joining as a learner")) << p->Logs();
    EXPECT_TRUE(Contains(p->SidecarLog(), "promoted this member to a voting member")) << p->Logs();
  }
  writer.Stop();
  const std::vector<std::string> acked = writer.acknowledged();
  ASSERT_GT(acked.size(), 10u);
  // Every acknowledged write is on every member.
  for (Pod* p : {&p0, &p1, &p2}) {
    std::vector<std::string> missing;
    EXPECT_TRUE(WaitUntil(
        [&] {
          CmdResult r = Etcdctl(p->Endpoint(), {"get", "w", "--prefix", "--keys-only"});
          std::set<std::string> keys;
          for (const auto& line : Lines(r.out)) keys.insert(line);
          missing.clear();
          for (const auto& k : acked) {
            if (keys.count(k) == 0) missing.push_back(k);
          }
          return missing.empty();
        },
        30s))
        << p->name() << " misses " << missing.size() << " of " << acked.size()
        << " acknowledged writes, the first: " << (missing.empty() ? "" : missing.front())
        << ", the last: " << (missing.empty() ? "" : missing.back());
  }
  // Every member's heartbeat, each with https peers.
  for (const char* name : {"etcd-main-0", "etcd-main-1", "etcd-main-2"}) {
    EXPECT_TRUE(WaitUntil([&] { return TlsEnabled(name) == "true" && !Holder(name).empty(); }, 30s))
        << name << ": " << Lease(name);
  }
}

TEST_F(DruidPodTest, AKnownMemberWithALostVolumeAndNoBackupsRejoinsFromItsPeers) {
  std::vector<PodPorts> ports(3);
  std::vector<Pod*> pods;
  for (size_t i = 0; i < 3; ++i) pods.push_back(&AddPod(i, ports));
  const auto args = [&](Pod& p, size_t i) {
    // No --storage-provider: no backups at all.
    return std::vector<std::string>{"--server-port=" + std::to_string(ports[i].sidecar),
                                    "--endpoints=http://" + p.Endpoint(),
                                    "--service-endpoints=" + ports[0].ClientUrl() + "," +
                                        ports[1].ClientUrl() + "," + ports[2].ClientUrl(),
                                    "--data-dir=" + p.DataDir(),
                                    "--reelection-period=2s",
                                    "--etcd-connection-timeout-leader-election=2s",
                                    "--enable-member-lease-renewal=true",
                                    "--k8s-heartbeat-duration=1s",
                                    "--use-etcd-wrapper=true",
                                    "--etcd-wrapper-port=" + std::to_string(ports[i].wrapper)};
  };
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(pods[i]->StartSidecarWith(args(*pods[i], i)));
  for (Pod* p : pods) ASSERT_TRUE(p->StartWrapper());
  for (Pod* p : pods) ASSERT_TRUE(p->WaitReady()) << p->Logs();
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(Etcdctl(pods[0]->Endpoint(), {"put", "key-" + std::to_string(i), "v"}).rc, 0);
  }
  // A member whose sidecar does not lead loses its volume: once one sidecar leads (before
  // that every sidecar answers 503, the Raft leader's too).
  Pod* victim = nullptr;
  ASSERT_TRUE(WaitUntil(
      [&] {
        int leaders = 0;
        victim = nullptr;
        for (Pod* p : pods) {
          auto h = p->Sidecar("/healthz");
          if (h.ok() && h->status == 200) ++leaders;
          if (h.ok() && h->status == 503) victim = p;
        }
        return leaders == 1 && victim != nullptr;
      },
      30s));
  EXPECT_TRUE(WaitUntil([&] { return !Holder(victim->name()).empty(); }, 20s));
  victim->wrapper().Kill();
  fs::remove_all(victim->DataDir());
  Pod* survivor = victim == pods[0] ? pods[1] : pods[0];
  ASSERT_EQ(Etcdctl(survivor->Endpoint(), {"put", "while-down", "x"}).rc, 0);
  ASSERT_TRUE(victim->StartWrapper());
  const std::vector<std::string> voters = {"etcd-main-0:voter", "etcd-main-1:voter",
                                           "etcd-main-2:voter"};
  EXPECT_TRUE(WaitUntil([&] { return MemberNames(survivor->Endpoint()) == voters; }, 90s))
      << victim->Logs();
  ASSERT_TRUE(victim->WaitReady(30s)) << victim->Logs();
  const std::string log = victim->SidecarLog();
  EXPECT_TRUE(Contains(log, "resynchronising from peers")) << victim->Logs();
  EXPECT_TRUE(Contains(log, "added this member to the cluster as a learner")) << victim->Logs();
  EXPECT_FALSE(Contains(log, "no backups: removing the invalid data directory")) << victim->Logs();
  Dump expected = DumpAll(survivor->Endpoint());
  EXPECT_EQ(expected.kvs.size(), 21u);
  EXPECT_TRUE(WaitUntil([&] { return DumpAll(victim->Endpoint()).kvs == expected.kvs; }, 20s))
      << victim->Logs();
}

}  // namespace
}  // namespace etcdw::testing
