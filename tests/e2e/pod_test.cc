// The etcd pod end to end: the real `etcdbrctl server` (Local snapshot store, or S3 on an
// s3rver) and the real `etcd-wrapper start-etcd` bootstrapped by it. Keys are written, backed up
// in a full and a delta snapshot, the data directory is lost or damaged after a kill -9, and the
// restarted wrapper must serve exactly the backed-up data again.
#include "pod.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace etcdw::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// kill -9, the data directory deleted, restart: the backup is restored exactly.
void CheckRestoresALostDataDirectory(Pod& pod) {
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

TEST(PodTest, RestoresALostDataDirectoryFromFullAndDeltaSnapshots) {
  Pod pod;
  CheckRestoresALostDataDirectory(pod);
}

// etcd-druid's compaction job: `etcdbrctl compact` with the arguments druid's compaction
// reconciler gives it, against the pod's store, leaves a full snapshot at the last delta's
// revision; with the older snapshots gone, a pod that lost its data directory restores from it
// alone exactly what the full snapshot and its deltas held.
TEST(PodTest, DruidsCompactionJobLeavesAFullSnapshotThatRestoresExactly) {
  Pod pod;
  WriteAndBackUp(pod);
  for (int d = 0; d < 3; ++d) {
    const std::string n = std::to_string(d);
    EXPECT_EQ(Etcdctl(pod.Endpoint(), {"put", "key-5", "round-" + n}).rc, 0);
    EXPECT_EQ(Etcdctl(pod.Endpoint(), {"put", "delta-" + n, n}).rc, 0);
    EXPECT_EQ(Etcdctl(pod.Endpoint(), {"del", "key-" + std::to_string(6 + d)}).rc, 0);
    auto delta = pod.Sidecar("/snapshot/delta");
    ASSERT_TRUE(delta.ok() && delta->status == 200) << pod.Logs();
  }
  const Dump before = DumpAll(pod.Endpoint());
  std::vector<std::string> old;
  for (const auto& e : fs::directory_iterator(pod.Backups())) old.push_back(e.path().string());
  ASSERT_EQ(old.size(), 5u);  // a full snapshot and four deltas

  const std::string job = pod.File("job");
  std::string out, err;
  const int rc = RunCommandSplit(
      {"env", "HOME=" + pod.File("home"), EtcdbrctlBinary(), "compact",
       "--data-dir=" + job + "/compaction.etcd",
       "--restoration-temp-snapshots-dir=" + job + "/compaction.restoration.temp",
       "--snapstore-temp-directory=" + job + "/tmp", "--metrics-scrape-wait-duration=0s",
       "--enable-snapshot-lease-renewal=false", "--full-snapshot-lease-name=etcd-main-full-snap",
       "--delta-snapshot-lease-name=etcd-main-delta-snap", "--embedded-etcd-quota-bytes=8589934592",
       "--etcd-defrag-timeout=8m0s", "--etcd-snapshot-timeout=30m0s", "--storage-provider=Local",
       "--store-prefix=etcd-main", "--store-container=backups"},
      &out, &err, std::chrono::seconds(60));
  ASSERT_EQ(rc, 0) << out << err;
  EXPECT_FALSE(fs::exists(job + "/compaction.etcd")) << "the job left its data directory";
  std::vector<std::string> added;
  for (const auto& e : fs::directory_iterator(pod.Backups())) {
    if (std::find(old.begin(), old.end(), e.path().string()) == old.end()) {
      added.push_back(e.path().filename().string());
    }
  }
  ASSERT_EQ(added.size(), 1u) << out << err;
  char expected_prefix[64];
  std::snprintf(expected_prefix, sizeof expected_prefix, "Full-00000000-%08lld-",
                static_cast<long long>(before.revision));
  EXPECT_EQ(added[0].rfind(expected_prefix, 0), 0u) << added[0];

  pod.wrapper().Kill();
  for (const auto& path : old) fs::remove(path);
  fs::remove_all(pod.DataDir());
  ASSERT_TRUE(pod.StartWrapper());
  ASSERT_TRUE(pod.WaitReady()) << pod.Logs();
  EXPECT_EQ(DumpAll(pod.Endpoint()), before) << pod.Logs();
}

TEST(PodTest, RestoresALostDataDirectoryFromTheS3Store) {
  S3rver s3;
  ASSERT_TRUE(s3.Start({"etcd-backups"})) << s3.log();
  Pod pod(&s3);
  CheckRestoresALostDataDirectory(pod);
  // The objects are gardener's, in the bucket under the prefix.
  int fulls = 0, deltas = 0;
  for (const auto& e : fs::recursive_directory_iterator(s3.data_dir() + "/etcd-backups")) {
    const std::string p = e.path().string();
    if (p.find("etcd-main/v2/Full-") != std::string::npos) ++fulls;
    if (p.find("etcd-main/v2/Incr-") != std::string::npos) ++deltas;
  }
  EXPECT_GE(fulls, 1) << pod.Logs();
  EXPECT_GE(deltas, 1) << pod.Logs();
}

// Flips bytes all over every table and log file of the store in `data_dir`; returns how many
// files it damaged. The full check must notice.
int DamageStore(const std::string& data_dir) {
  int damaged = 0;
  for (const auto& e : fs::recursive_directory_iterator(data_dir)) {
    std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".sst" || ext == ".log") && fs::file_size(e.path()) > 64) {
      std::string data = ReadFile(e.path().string());
      for (size_t i = 16; i < data.size(); i += 97) data[i] = static_cast<char>(~data[i]);
      WriteFile(e.path().string(), data);
      ++damaged;
    }
  }
  return damaged;
}

TEST(PodTest, RestoresADamagedDataDirectoryAfterACrash) {
  Pod pod;
  Dump before = WriteAndBackUp(pod);
  pod.wrapper().Kill();  // kill -9: the next start asks for full validation
  ASSERT_GT(DamageStore(pod.DataDir()), 0);
  ASSERT_TRUE(pod.StartWrapper());
  ASSERT_TRUE(pod.WaitReady()) << pod.Logs();
  // Damage in table files fails their checksums, damage in the write-ahead log fails the open:
  // either way the full check reports the directory corrupt, and it is never served.
  EXPECT_TRUE(Contains(pod.SidecarLog(), "\"status\":\"DataDirectoryCorrupt\"")) << pod.Logs();
  EXPECT_TRUE(Contains(pod.SidecarLog(), "restoring the data directory from the backup"));
  EXPECT_EQ(DumpAll(pod.Endpoint()), before) << pod.Logs();
}

// Three pods. A follower crashes and its store is damaged: its sidecar removes it from the
// cluster, wipes it and adds it back as a learner (no restore from backups in a cluster); the
// wrapper joins as a learner, catches up from the peers, and its sidecar promotes it.
TEST(PodTest, ADamagedMemberOfAClusterResynchronisesFromItsPeers) {
  std::vector<PodPorts> ports(3);
  std::vector<std::unique_ptr<Pod>> pods;
  for (size_t i = 0; i < ports.size(); ++i) pods.push_back(std::make_unique<Pod>(i, ports));
  for (auto& p : pods) ASSERT_TRUE(p->StartSidecar());
  for (auto& p : pods) ASSERT_TRUE(p->StartWrapper());
  for (auto& p : pods) ASSERT_TRUE(p->WaitReady()) << p->Logs();
  const std::vector<std::string> voters = {"etcd-main-0:voter", "etcd-main-1:voter",
                                           "etcd-main-2:voter"};
  EXPECT_EQ(MemberNames(pods[0]->Endpoint()), voters);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(Etcdctl(pods[0]->Endpoint(), {"put", "key-" + std::to_string(i), "v"}).rc, 0);
  }
  // A member whose sidecar does not lead the backups.
  Pod* victim = nullptr;
  ASSERT_TRUE(WaitUntil(
      [&] {
        int leaders = 0;
        Pod* follower = nullptr;
        for (auto& p : pods) {
          auto h = p->Sidecar("/healthz");
          if (h.ok() && h->status == 200) ++leaders;
          if (h.ok() && h->status == 503) follower = p.get();
        }
        victim = follower;
        return leaders == 1 && follower != nullptr;
      },
      30s));
  victim->wrapper().Kill();
  ASSERT_GT(DamageStore(victim->DataDir()), 0);
  const std::string survivor = pods[0].get() == victim ? pods[1]->Endpoint() : pods[0]->Endpoint();
  ASSERT_EQ(Etcdctl(survivor, {"put", "while-down", "x"}).rc, 0);
  ASSERT_TRUE(victim->StartWrapper());
  // Promoted by its sidecar once caught up (a learner is not ready: it refuses linearizable
  // reads, as etcd's do); then ready, serving every key.
  EXPECT_TRUE(WaitUntil([&] { return MemberNames(survivor) == voters; }, 90s)) << victim->Logs();
  ASSERT_TRUE(victim->WaitReady(30s)) << victim->Logs();
  const std::string log = victim->SidecarLog();
  EXPECT_TRUE(Contains(log, "resynchronising from peers")) << victim->Logs();
  EXPECT_TRUE(Contains(log, "added this member to the cluster as a learner")) << victim->Logs();
  EXPECT_TRUE(Contains(log, "promoted this member to a voting member")) << victim->Logs();
  Dump expected = DumpAll(survivor);
  EXPECT_EQ(expected.kvs.size(), 21u);
  EXPECT_TRUE(WaitUntil([&] { return DumpAll(victim->Endpoint()).kvs == expected.kvs; }, 20s))
      << victim->Logs();
}

TEST(PodTest, ServesGardenersHttpApi) {
  Pod pod;
  ASSERT_TRUE(pod.StartSidecar());
  // Before initialisation: New, and not healthy (no etcd yet).
  EXPECT_TRUE(WaitUntil([&] {
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
  EXPECT_TRUE(WaitUntil([&] {
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
  // gardener's metrics page: the initialisation above validated the directory of a
  // one-member cluster.
  auto metrics = pod.Sidecar("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->headers["Content-Type"], "text/plain; version=0.0.4; charset=utf-8");
  for (const char* line :
       {"\netcdbr_validation_duration_seconds_count{succeeded=\"true\"} 1\n",
        "\netcdbr_cluster_size 1\n", "\n# TYPE etcdbr_snapshot_duration_seconds histogram\n",
        "\n# TYPE process_cpu_seconds_total counter\n"}) {
    EXPECT_NE(metrics->body.find(line), std::string::npos) << line << metrics->body;
  }
}

// A gzip file's content, decompressed by the gzip command.
std::string Gunzip(const std::string& path) {
  std::string out, err;
  int rc = RunCommandSplit({"gzip", "-dc", path}, &out, &err);
  EXPECT_EQ(rc, 0) << path << ": " << err;
  return out;
}

// The sidecar reaches etcd only through the v3 client API, so it backs up a plain etcd 3.4
// member too: /healthz, the start-up full snapshot (etcd's own bbolt file, checked by etcdctl),
// triggered full and delta snapshots with the events written. Then the bucket, as a sidecar
// leaves it for a plain etcd (gardener's names, etcd's full snapshot, deltas), seeds a pod of
// ours: `etcdbrctl server` restores it and `etcd-wrapper start-etcd` serves exactly etcd's data.
TEST(SidecarWithEtcdTest, BacksUpAPlainEtcd34MemberAndAPodRestoresTheBucket) {
  Member etcd(Member::Kind::kEtcd, "etcd-main-0");
  ASSERT_TRUE(etcd.Start()) << etcd.log();
  // A lease (granting one changes no revision), for keys written after the full snapshot.
  CmdResult grant = Etcdctl(etcd, {"lease", "grant", "600", "-w", "json"});
  ASSERT_EQ(grant.rc, 0) << grant.Describe();
  const int64_t lease = ParseJson(grant.out)["ID"].get<int64_t>();
  char lease_hex[32];
  std::snprintf(lease_hex, sizeof lease_hex, "%llx", static_cast<unsigned long long>(lease));
  TempDir dir;
  fs::create_directories(dir.File("home"));
  // The config template as etcd-druid writes it, describing the etcd member.
  WriteFile(dir.File("etcd.conf.yaml"),
            "name: etcd-main-0\ndata-dir: " + etcd.data_dir() +
                "\ninitial-cluster: etcd-main-0=" + etcd.peer_url() +
                "\ninitial-advertise-peer-urls:\n  etcd-main-0:\n  - " + etcd.peer_url() +
                "\nadvertise-client-urls:\n  etcd-main-0:\n  - " + etcd.url() + "\n");
  const int port = FreePort();
  Process sidecar;
  ASSERT_TRUE(sidecar.Start(
      {EtcdbrctlBinary(), "server", "--server-port=" + std::to_string(port),
       "--endpoints=" + etcd.url(), "--data-dir=" + etcd.data_dir(),
       "--snapstore-temp-directory=" + dir.File("temp"), "--storage-provider=Local",
       "--store-container=backups", "--store-prefix=etcd-main", "--schedule=0 0 1 1 *",
       "--delta-snapshot-period=1h", "--garbage-collection-period=0s", "--reelection-period=2s",
       "--use-etcd-wrapper=false"},
      dir.File("sidecar.log"),
      {"HOME=" + dir.File("home"), "ETCD_CONF=" + dir.File("etcd.conf.yaml"),
       "POD_NAME=etcd-main-0", "STORAGE_CONTAINER"}));
  auto get = [&](const std::string& target) {
    common::HttpClientOptions o;
    o.timeout = 60s;
    auto c = common::HttpClient::Create(o);
    EXPECT_TRUE(c.ok());
    return (*c)->Get("127.0.0.1:" + std::to_string(port), target);
  };
  const std::string log = dir.File("sidecar.log");
  // Backup leader of the one-member cluster, with its start-up full snapshot.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto h = get("/healthz");
        if (!h.ok() || h->status != 200 || h->body != R"({"health":true})") return false;
        auto l = get("/snapshot/latest");
        return l.ok() && l->body.find("\"fullSnapshot\":null") == std::string::npos;
      },
      40s))
      << ReadFile(log);

  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(Etcdctl(etcd, {"put", "k" + std::to_string(i), "v"}).rc, 0);
  }
  auto full = get("/snapshot/full");
  ASSERT_TRUE(full.ok() && full->status == 200) << ReadFile(log);
  nlohmann::json fj = ParseJson(full->body);
  const int64_t full_rev = fj["lastRevision"].get<int64_t>();
  EXPECT_EQ(fj["kind"], "Full");
  EXPECT_EQ(full_rev, 6);  // etcd starts at revision 1; five puts
  // The stored object (its name ends in .gz: gzip is the default) is etcd's snapshot as etcd sent
  // it: etcdctl reads it.
  const std::string db = dir.File("full.db");
  WriteFile(db, Gunzip(dir.File("home/backups/etcd-main/v2/") + fj["snapName"].get<std::string>()));
  CmdResult status;
  status.rc = RunCommandSplit({"etcdctl", "snapshot", "status", db, "-w", "json"}, &status.out,
                              &status.err, 30s);
  ASSERT_EQ(status.rc, 0) << status.Describe();
  nlohmann::json sj = ParseJson(status.out);
  EXPECT_EQ(sj["revision"].get<int64_t>(), full_rev);

  ASSERT_EQ(Etcdctl(etcd, {"put", "k1", "changed"}).rc, 0);
  ASSERT_EQ(Etcdctl(etcd, {"del", "k2"}).rc, 0);
  auto delta = get("/snapshot/delta");
  ASSERT_TRUE(delta.ok() && delta->status == 200) << ReadFile(log);
  nlohmann::json dj = ParseJson(delta->body);
  EXPECT_EQ(dj["kind"], "Incr");
  EXPECT_EQ(dj["startRevision"].get<int64_t>(), full_rev + 1);
  EXPECT_EQ(dj["lastRevision"].get<int64_t>(), full_rev + 2);
  // The delta holds the two events, in gardener's JSON with its SHA-256 trailer.
  std::string events =
      Gunzip(dir.File("home/backups/etcd-main/v2/") + dj["snapName"].get<std::string>());
  ASSERT_GT(events.size(), 32u);
  nlohmann::json ej = ParseJson(events.substr(0, events.size() - 32));
  ASSERT_EQ(ej.size(), 2u) << events;
  EXPECT_EQ(ej[0]["etcdEvent"]["kv"]["mod_revision"].get<int64_t>(), full_rev + 1);
  EXPECT_EQ(ej[1]["etcdEvent"]["type"], 1);  // DELETE

  // More history in a second delta: leased keys, overwrites, a range deletion, a transaction.
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(Etcdctl(etcd, {"put", "leased/" + std::to_string(i), "l", "--lease", lease_hex}).rc,
              0);
  }
  ASSERT_EQ(Etcdctl(etcd, {"put", "k3", "changed"}).rc, 0);
  ASSERT_EQ(Etcdctl(etcd, {"del", "leased/1", "--prefix"}).rc, 0);  // leased/1, leased/1x
  ASSERT_EQ(Etcdctl(etcd, {"txn"}, "\nput t1 a\nput t2 b\ndel k0\n\n\n").rc, 0);
  auto delta2 = get("/snapshot/delta");
  ASSERT_TRUE(delta2.ok() && delta2->status == 200) << ReadFile(log);
  const Dump want = DumpAll(etcd.endpoint());
  EXPECT_EQ(ParseJson(delta2->body)["lastRevision"].get<int64_t>(), want.revision);
  ASSERT_GT(want.kvs.size(), 30u);
  sidecar.Kill();
  ASSERT_TRUE(etcd.Stop().has_value());

  Pod pod;
  fs::copy(dir.File("home/backups"), pod.File("home/backups"), fs::copy_options::recursive);
  ASSERT_TRUE(pod.StartSidecar());
  ASSERT_TRUE(pod.StartWrapper());
  ASSERT_TRUE(pod.WaitReady()) << pod.Logs();
  EXPECT_TRUE(Contains(pod.SidecarLog(), "restoring the data directory from the backup"))
      << pod.Logs();
  EXPECT_TRUE(Contains(pod.SidecarLog(), "imported an etcd snapshot")) << pod.Logs();
  EXPECT_EQ(DumpAll(pod.Endpoint()), want) << pod.Logs();
  // The keys written with etcd's lease after the full snapshot keep it.
  CmdResult ttl =
      Etcdctl(pod.Endpoint(), {"lease", "timetolive", lease_hex, "--keys", "-w", "json"});
  ASSERT_EQ(ttl.rc, 0) << ttl.Describe();
  nlohmann::json tj = ParseJson(ttl.out);
  EXPECT_EQ(tj["granted-ttl"].get<int64_t>(), 600);
  EXPECT_EQ(tj.value("keys", nlohmann::json::array()).size(), 29u) << ttl.out;  // 40 - 11
  // Writes continue etcd's revisions.
  CmdResult put = Etcdctl(pod.Endpoint(), {"put", "after", "x", "-w", "json"});
  ASSERT_EQ(put.rc, 0) << put.Describe();
  EXPECT_EQ(ParseJson(put.out)["header"]["revision"].get<int64_t>(), want.revision + 1);
}

}  // namespace
}  // namespace etcdw::testing
