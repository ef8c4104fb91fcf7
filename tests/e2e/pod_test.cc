// The etcd pod end to end: the real `etcdbrctl server` (Local snapshot store) and the real
// `etcd-wrapper start-etcd` bootstrapped by it. Keys are written, backed up in a full and a
// delta snapshot, the data directory is lost or damaged after a kill -9, and the restarted
// wrapper must serve exactly the backed-up data again.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "e2e_util.h"
#include "etcdw/common/http.h"

namespace etcdw::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class Pod {
 public:
  Pod()
      : sidecar_port_(FreePort()),
        wrapper_port_(FreePort()),
        client_port_(FreePort()),
        peer_port_(FreePort()) {
    fs::create_directories(dir_.File("home"));
    fs::create_directories(dir_.File("data"));
    std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
    std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    // The template as etcd-druid writes it: URL keys are maps from member name to URLs.
    WriteFile(dir_.File("etcd.conf.yaml"),
              "name: etcd-main\ndata-dir: " + DataDir() + "\nlisten-client-urls: " + client +
                  "\nadvertise-client-urls:\n  etcd-main-0:\n  - " + client +
                  "\nlisten-peer-urls: " + peer +
                  "\ninitial-advertise-peer-urls:\n  etcd-main-0:\n  - " + peer +
                  "\ninitial-cluster: etcd-main-0=" + peer +
                  "\ninitial-cluster-state: new\ninitial-cluster-token: etcd-cluster\n");
  }
  ~Pod() {
    wrapper_.Kill();
    sidecar_.Kill();
  }

  std::string DataDir() const { return dir_.File("data/new.etcd"); }
  std::string Endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  std::string Backups() const { return dir_.File("home/backups/etcd-main/v2"); }

  std::vector<std::string> Env() const {
    return {"HOME=" + dir_.File("home"), "ETCD_CONF=" + dir_.File("etcd.conf.yaml"),
            "POD_NAME=etcd-main-0", "POD_NAMESPACE=shoot--test", "STORAGE_CONTAINER"};
  }

  bool StartSidecar() {
    std::vector<std::string> argv = {
        EtcdbrctlBinary(),
        "server",
        "--server-port=" + std::to_string(sidecar_port_),
        "--endpoints=http://" + Endpoint(),
        "--data-dir=" + DataDir(),
        "--restoration-temp-snapshots-dir=" + dir_.File("data/restoration.tmp"),
        "--snapstore-temp-directory=" + dir_.File("data/temp"),
        "--storage-provider=Local",
        "--store-container=backups",
        "--store-prefix=etcd-main",
        "--schedule=0 0 1 1 *",
        "--delta-snapshot-period=1h",
        "--garbage-collection-period=0s",
        "--reelection-period=2s",
        "--etcd-connection-timeout-leader-election=2s",
        "--use-etcd-wrapper=true"};
    return sidecar_.Start(argv, dir_.File("sidecar.log"), Env());
  }

  bool StartWrapper() {
    std::vector<std::string> argv = {
        EtcdWrapperBinary(),
        "start-etcd",
        "--backup-restore-host-port=127.0.0.1:" + std::to_string(sidecar_port_),
        "--etcd-wrapper-port=" + std::to_string(wrapper_port_),
        "--etcd-client-port=" + std::to_string(client_port_),
        "--etcd-server-name=127.0.0.1",
        "--exit-code-file=" + dir_.File("data/exit_code")};
    return wrapper_.Start(argv, dir_.File("wrapper.log"), Env());
  }

  Process& wrapper() { return wrapper_; }

  Result<common::HttpResponse> Get(int port, const std::string& target) {
    common::HttpClientOptions o;
    o.timeout = 60s;
    auto c = common::HttpClient::Create(o);
    if (!c.ok()) return c.status();
    return (*c)->Get("127.0.0.1:" + std::to_string(port), target);
  }
  Result<common::HttpResponse> Sidecar(const std::string& target) {
    return Get(sidecar_port_, target);
  }

  bool WaitReady(std::chrono::milliseconds timeout = 60s) {
    return WaitFor(
        [&] {
          auto r = Get(wrapper_port_, "/readyz");
          return r.ok() && r->status == 200;
        },
        timeout);
  }
  // Until this sidecar leads the backups and its start-up full snapshot is in the store.
  bool WaitBackupLeader(std::chrono::milliseconds timeout = 40s) {
    return WaitFor(
        [&] {
          auto h = Sidecar("/healthz");
          if (!h.ok() || h->status != 200) return false;
          auto r = Sidecar("/snapshot/latest");
          return r.ok() && r->status == 200 &&
                 r->body.find("\"fullSnapshot\":null") == std::string::npos;
        },
        timeout);
  }

  std::string SidecarLog() const { return ReadFileOrEmpty(dir_.File("sidecar.log")); }
  std::string Logs() const {
    return "--- sidecar ---\n" + Tail(ReadFileOrEmpty(dir_.File("sidecar.log"))) +
           "\n--- wrapper ---\n" + Tail(ReadFileOrEmpty(dir_.File("wrapper.log")));
  }

 private:
  static std::string Tail(const std::string& s) {
    return s.size() > 6000 ? s.substr(s.size() - 6000) : s;
  }
  TempDir dir_;
  int sidecar_port_, wrapper_port_, client_port_, peer_port_;
  Process sidecar_, wrapper_;
};

// Every key with its revisions, and the store's revision, as etcdctl reports them.
struct Dump {
  int64_t revision = 0;
  std::vector<std::string> kvs;  // "key=value@create/mod/version"
  bool operator==(const Dump&) const = default;
};

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

// Starts the pod, writes, takes a full and a delta snapshot; returns the state backed up.
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

TEST(PodTest, RestoresALostDataDirectoryFromFullAndDeltaSnapshots) {
  Pod pod;
  Dump before = WriteAndBackUp(pod);
  ASSERT_FALSE(before.kvs.empty());
  EXPECT_EQ(std::count_if(before.kvs.begin(), before.kvs.end(),
                          [](const std::string& s) { return s.rfind("key-1", 0) == 0; }),
            0);

  pod.wrapper().Kill();
  fs::remove_all(pod.DataDir());
  ASSERT_TRUE(pod.StartWrapper());
  ASSERT_TRUE(pod.WaitReady()) << pod.Logs();
  EXPECT_TRUE(Contains(pod.SidecarLog(), "restoring the data directory from the backup"));
  EXPECT_EQ(DumpAll(pod.Endpoint()), before) << pod.Logs();
  // The restored member takes writes after the restored revision.
  CmdResult put = Etcdctl(pod.Endpoint(), {"put", "after-restore", "x", "-w", "json"});
  ASSERT_EQ(put.rc, 0) << put.Describe();
  EXPECT_EQ(ParseJson(put.out)["header"]["revision"].get<int64_t>(), before.revision + 1);
}

TEST(PodTest, RestoresADamagedDataDirectoryAfterACrash) {
  Pod pod;
  Dump before = WriteAndBackUp(pod);
  pod.wrapper().Kill();  // kill -9: the next start asks for full validation
  // Damage every table and log file of the store: the full check must notice.
  int damaged = 0;
  for (const auto& e : fs::recursive_directory_iterator(pod.DataDir())) {
    std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".sst" || ext == ".log") && fs::file_size(e.path()) > 64) {
      std::string data = ReadFileOrEmpty(e.path().string());
      for (size_t i = 16; i < data.size(); i += 97) data[i] = static_cast<char>(~data[i]);
      WriteFile(e.path().string(), data);
      ++damaged;
    }
  }
  ASSERT_GT(damaged, 0);
  ASSERT_TRUE(pod.StartWrapper());
  ASSERT_TRUE(pod.WaitReady()) << pod.Logs();
  // Damage in table files is found by the checksum check (DataDirectoryCorrupt). Damage in the
  // write-ahead log makes RocksDB's point-in-time recovery drop the records after it, so the store
  // opens behind the backup (RevisionConsistencyError). Either way it must not be served.
  std::string log = pod.SidecarLog();
  EXPECT_TRUE(Contains(log, "\"status\":\"DataDirectoryCorrupt\"") ||
              Contains(log, "\"status\":\"RevisionConsistencyError\""))
      << pod.Logs();
  EXPECT_TRUE(Contains(pod.SidecarLog(), "restoring the data directory from the backup"));
  EXPECT_EQ(DumpAll(pod.Endpoint()), before) << pod.Logs();
}

TEST(PodTest, ServesGardenersHttpApi) {
  Pod pod;
  ASSERT_TRUE(pod.StartSidecar());
  // Before initialisation: New, and not healthy (no etcd yet).
  EXPECT_TRUE(WaitFor([&] {
    auto r = pod.Sidecar("/initialization/status");
    return r.ok() && r->status == 200 && r->body == "New";
  }));
  auto h = pod.Sidecar("/healthz");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(h->body, R"({"health":false})");
  EXPECT_EQ(pod.Sidecar("/nope")->status, 404);
  // Not the backup leader yet: snapshot triggers are refused.
  EXPECT_EQ(pod.Sidecar("/snapshot/full")->status, 405);
  // The rendered config: this member's URLs flattened, state new.
  auto cfg = pod.Sidecar("/config");
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->status, 200);
  EXPECT_NE(cfg->body.find("name: etcd-main-0"), std::string::npos) << cfg->body;
  EXPECT_NE(cfg->body.find("initial-cluster-state: new"), std::string::npos) << cfg->body;
  EXPECT_NE(cfg->body.find("advertise-client-urls: http://127.0.0.1:"), std::string::npos)
      << cfg->body;
  // Initialisation of an empty directory succeeds once, then the state is New again.
  EXPECT_EQ(pod.Sidecar("/initialization/start?mode=sanity")->status, 200);
  std::string final_state;
  EXPECT_TRUE(WaitFor([&] {
    auto r = pod.Sidecar("/initialization/status");
    if (r.ok() && (r->body == "Successful" || r->body == "Failed")) final_state = r->body;
    return !final_state.empty();
  }));
  EXPECT_EQ(final_state, "Successful") << pod.Logs();
  EXPECT_EQ(pod.Sidecar("/initialization/status")->body, "New");
  auto latest = pod.Sidecar("/snapshot/latest");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->status, 200);
  EXPECT_EQ(latest->body, R"({"deltaSnapshots":null,"fullSnapshot":null})");
}

}  // namespace
}  // namespace etcdw::testing
