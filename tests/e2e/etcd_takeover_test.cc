// Differential: etcd 3.4 writes a history into its data directory and stops (SIGTERM, or
// SIGKILL in the middle of writes); etcd-wrapper --config is then started on the very same
// directory, takes it over in place (data_dir::TakeOverEtcdDataDir) and serves what etcd
// served: every key at the current and past uncompacted revisions, the compaction's refusal,
// the leases, and the same member ID and cluster ID; after a kill, every write etcd
// acknowledged; with authentication, the users, roles and permissions and the auth requests
// still only in etcd's WAL, replayed with etcd's permission checks. etcd's own files are kept,
// moved aside.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"
#include "etcdw/bbolt/db.h"
#include "pod.h"
#include "servers.h"

namespace etcdw::testing {
namespace {

namespace fs = std::filesystem;

// Every key at `rev` (0: current) as serialized KeyValues; and the header's revision.
std::vector<std::string> All(Member& m, int64_t rev, int64_t* header_rev) {
  std::vector<std::string> out;
  etcdserverpb::RangeRequest req;
  req.set_key(std::string(1, '\0'));
  req.set_range_end(std::string(1, '\0'));
  req.set_revision(rev);
  etcdserverpb::RangeResponse resp;
  grpc::Status st = m.client().kv->Range(Ctx().get(), req, &resp);
  EXPECT_TRUE(st.ok()) << m.label() << " at " << rev << ": " << st.error_message();
  *header_rev = resp.header().revision();
  for (const auto& kv : resp.kvs()) out.push_back(kv.SerializeAsString());
  return out;
}

struct Identity {
  uint64_t member_id = 0;
  uint64_t cluster_id = 0;
  std::vector<uint64_t> members;
};
Identity IdentityOf(Member& m) {
  Identity id;
  CmdResult list = Etcdctl(m, {"member", "list", "-w", "json"});
  EXPECT_EQ(list.rc, 0) << list.Describe();
  auto j = ParseJson(list.out);
  if (j.is_null()) return id;
  id.cluster_id = j["header"].value("cluster_id", uint64_t{0});
  for (const auto& mem : j["members"]) id.members.push_back(mem.value("ID", uint64_t{0}));
  CmdResult status = Etcdctl(m, {"endpoint", "status", "-w", "json"});
  EXPECT_EQ(status.rc, 0) << status.Describe();
  auto s = ParseJson(status.out);
  if (s.is_array() && !s.empty()) {
    id.member_id = s[0]["Status"]["header"].value("member_id", uint64_t{0});
  }
  return id;
}

class EtcdTakeoverTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "--- etcd log ---\n"
                << etcd_.log() << "--- etcd-wrapper log ---\n"
                << ours_.log();
    }
  }
  void Put(const std::string& k, const std::string& v, int64_t lease = 0) {
    etcdserverpb::PutResponse r;
    grpc::Status st = etcd_.client().Put(k, v, lease, &r);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  int64_t Rev() {
    etcdserverpb::RangeResponse r;
    EXPECT_TRUE(etcd_.client().Get("none", &r).ok());
    return r.header().revision();
  }
  // etcd-wrapper on etcd's data directory, with etcd's name.
  bool StartOursOnEtcdsDir() {
    return ours_.Start({{"data-dir", etcd_.data_dir()}, {"name", "etcd"}},
                       std::chrono::seconds(60));
  }
  void ExpectEtcdFilesMovedAside() {
    const std::string aside = etcd_.data_dir() + "/etcd-taken-over/member";
    EXPECT_TRUE(fs::exists(aside + "/snap/db"));
    EXPECT_TRUE(fs::exists(aside + "/wal"));
    EXPECT_FALSE(fs::exists(etcd_.data_dir() + "/.etcdw-takeover"));
    EXPECT_TRUE(Contains(ours_.log(), "etcd's files moved aside")) << ours_.log();
    EXPECT_TRUE(Contains(ours_.log(), aside.substr(0, aside.size() - 7))) << ours_.log();
    auto took = LogsWithMsg(ours_.log(), "took over etcd's data directory");
    ASSERT_EQ(took.size(), 1u) << ours_.log();
    std::cerr << "took over: revision " << took[0].value("revision", int64_t{0})
              << ", consistent index " << took[0].value("consistent-index", uint64_t{0})
              << ", WAL entries replayed " << took[0].value("replayed-entries", uint64_t{0})
              << "\n";
  }

  Member etcd_{Member::Kind::kEtcd, "etcd"};
  Member ours_{Member::Kind::kEtcdWrapper, "etcd"};
};

TEST_F(EtcdTakeoverTest, AfterACleanStopServesTheSameHistoryAndIdentity) {
  // A small snapshot count: the directory holds .snap files and a WAL beyond them.
  ASSERT_TRUE(etcd_.Start({{"snapshot-count", "100"}})) << etcd_.log();
  etcdserverpb::LeaseGrantRequest g;
  g.set_id(0x1234);
  g.set_ttl(900);
  etcdserverpb::LeaseGrantResponse gr;
  ASSERT_TRUE(etcd_.client().lease->LeaseGrant(Ctx().get(), g, &gr).ok());
  for (int i = 0; i < 300; ++i) Put("k/" + std::to_string(i), "v0-" + std::to_string(i));
  for (int i = 0; i < 100; ++i) Put("k/" + std::to_string(i), "v1", i % 10 == 0 ? 0x1234 : 0);
  ASSERT_EQ(Etcdctl(etcd_, {"del", "k/2", "k/3"}).rc, 0);
  etcdserverpb::TxnRequest txn;
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key("txn");
  put->set_value("t");
  txn.add_success()->mutable_request_delete_range()->set_key("k/50");
  etcdserverpb::TxnResponse tr;
  ASSERT_TRUE(etcd_.client().kv->Txn(Ctx().get(), txn, &tr).ok());
  const int64_t compacted = Rev();
  ASSERT_EQ(Etcdctl(etcd_, {"compaction", std::to_string(compacted)}).rc, 0);
  for (int i = 0; i < 20; ++i) Put("after/" + std::to_string(i), std::string(i * 100, 'x'));
  const int64_t last = Rev();
  const std::vector<int64_t> revs = {0, last - 5, compacted + 1, compacted};
  std::vector<std::vector<std::string>> want;
  for (int64_t rev : revs) {
    int64_t r = 0;
    want.push_back(All(etcd_, rev, &r));
  }
  const Identity etcd_id = IdentityOf(etcd_);
  ASSERT_NE(etcd_id.member_id, 0u);
  auto lease_keys = [](Member& m) {  // etcd lists them in map order
    CmdResult r = Etcdctl(m, {"lease", "timetolive", "1234", "--keys", "-w", "json"});
    auto j = ParseJson(r.out);
    EXPECT_EQ(j.value("granted-ttl", 0), 900) << r.Describe();
    std::vector<std::string> keys = j.value("keys", std::vector<std::string>{});
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  const std::vector<std::string> etcd_lease_keys = lease_keys(etcd_);
  ASSERT_EQ(etcd_lease_keys.size(), 8u);  // k/0, k/10, ... k/90 less k/20 and k/50, deleted
  ASSERT_TRUE(etcd_.Stop().has_value());  // etcd 3.4 exits 143 on SIGTERM

  ASSERT_TRUE(StartOursOnEtcdsDir()) << ours_.log();
  for (size_t i = 0; i < revs.size(); ++i) {
    SCOPED_TRACE("revision " + std::to_string(revs[i]));
    int64_t our_rev = 0;
    EXPECT_TRUE(All(ours_, revs[i], &our_rev) == want[i]);
    EXPECT_EQ(our_rev, last);
  }
  CmdResult old = Etcdctl(ours_, {"get", "k/1", "--rev=" + std::to_string(compacted - 1)});
  EXPECT_NE(old.err.find("required revision has been compacted"), std::string::npos)
      << old.Describe();
  EXPECT_EQ(lease_keys(ours_), etcd_lease_keys);
  const Identity our_id = IdentityOf(ours_);
  EXPECT_EQ(our_id.member_id, etcd_id.member_id);
  EXPECT_EQ(our_id.cluster_id, etcd_id.cluster_id);
  EXPECT_EQ(our_id.members, etcd_id.members);
  ExpectEtcdFilesMovedAside();
  etcdserverpb::PutResponse next;
  ASSERT_TRUE(ours_.client().Put("next", "x", 0, &next).ok());
  EXPECT_EQ(next.header().revision(), last + 1);

  // Restarted, it is our own directory now.
  ASSERT_EQ(ours_.Stop(), 0);
  ASSERT_TRUE(StartOursOnEtcdsDir()) << ours_.log();
  etcdserverpb::RangeResponse got;
  ASSERT_TRUE(ours_.client().Get("next", &got).ok());
  EXPECT_EQ(got.kvs_size(), 1);
  EXPECT_FALSE(fs::exists(etcd_.data_dir() + "/etcd-taken-over-2"));
}

TEST_F(EtcdTakeoverTest, AfterAKillDuringWritesKeepsEveryAcknowledgedWrite) {
  ASSERT_TRUE(etcd_.Start({{"snapshot-count", "200"}})) << etcd_.log();
  std::atomic<int> acked{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  std::vector<std::vector<int>> done(4);
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      Client c(etcd_.NewChannel());
      for (int i = 0; !stop.load(); ++i) {
        etcdserverpb::PutResponse r;
        if (!c.Put("w" + std::to_string(w) + "/" + std::to_string(i), std::to_string(i), 0, &r)
                 .ok()) {
          return;
        }
        done[static_cast<size_t>(w)].push_back(i);
        ++acked;
      }
    });
  }
  for (int i = 0; i < 1000 && acked.load() < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  etcd_.Kill();
  stop = true;
  for (auto& t : writers) t.join();
  ASSERT_GE(acked.load(), 600);

  ASSERT_TRUE(StartOursOnEtcdsDir()) << ours_.log();
  int64_t rev = 0;
  std::vector<std::string> all = All(ours_, 0, &rev);
  std::set<std::string> keys;
  for (const std::string& b : all) {
    mvccpb::KeyValue kv;
    ASSERT_TRUE(kv.ParseFromString(b));
    keys.insert(kv.key());
    const std::string k = kv.key();
    EXPECT_EQ(kv.value(), k.substr(k.find('/') + 1));
  }
  int missing = 0;
  for (int w = 0; w < 4; ++w) {
    for (int i : done[static_cast<size_t>(w)]) {
      if (keys.count("w" + std::to_string(w) + "/" + std::to_string(i)) == 0) ++missing;
    }
  }
  EXPECT_EQ(missing, 0) << "of " << acked.load() << " acknowledged writes";
  EXPECT_GE(static_cast<int>(keys.size()), acked.load());
  EXPECT_EQ(rev, static_cast<int64_t>(keys.size()) + 1);  // one revision per put, from 2
  ExpectEtcdFilesMovedAside();
}

// etcd's auth revision as its backend holds it (the auth bucket's authRevision, big-endian), read
// once etcd has stopped.
uint64_t EtcdBackendAuthRevision(const std::string& data_dir) {
  auto db = bbolt::BoltDb::Open(data_dir + "/member/snap/db");
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  if (!db.ok()) return 0;
  auto rev = (*db)->Get({"auth"}, "authRevision");
  EXPECT_TRUE(rev.ok() && *rev && (*rev)->size() == 8);
  if (!rev.ok() || !*rev || (*rev)->size() != 8) return 0;
  uint64_t v = 0;
  for (char c : **rev) v = v << 8 | static_cast<uint8_t>(c);
  return v;
}

// Authentication taken over: etcd 3.4 sets up users, roles and permissions and enables auth,
// stops cleanly (all of it in its backend), then runs again with a backend that commits only
// every hour, so that what it does then is only in its WAL when it is killed: a user added, a
// password changed, a permission granted, a role revoked, a user deleted; a write its user may
// not make and one without a user, both refused by etcd when applied. etcd-wrapper takes the
// directory over, replays those entries as etcd applied them, and answers as etcd answers when
// started again on its own (moved-aside) files: the users log in with their current passwords,
// the permissions hold, the refused writes are absent, and the auth revision is etcd's.
TEST_F(EtcdTakeoverTest, AuthenticationIsTakenOverWithWhatIsOnlyInTheWal) {
  ASSERT_TRUE(etcd_.Start()) << etcd_.log();
  const std::string root = "--user=root:rootpw";
  const std::vector<std::vector<std::string>> setup = {
      {"user", "add", "root:rootpw"},
      {"user", "grant-role", "root", "root"},
      {"user", "add", "alice:alicepw"},
      {"role", "add", "reader"},
      {"role", "grant-permission", "reader", "read", "pub/", "--prefix"},
      {"user", "grant-role", "alice", "reader"},
      {"role", "add", "writer"},
      {"role", "grant-permission", "writer", "readwrite", "w/", "--prefix"},
      {"user", "add", "carol:carolpw"},
      {"user", "add", "dave:davepw"},
      {"user", "grant-role", "dave", "reader"},
      {"put", "pub/1", "v1"},
      {"put", "extra/1", "e1"},
      {"put", "secret", "s"},
      {"auth", "enable"}};
  for (const auto& cmd : setup) {
    CmdResult r = Etcdctl(etcd_, cmd);
    ASSERT_EQ(r.rc, 0) << r.Describe();
  }
  ASSERT_TRUE(etcd_.Stop().has_value());
  const uint64_t backend_auth_revision = EtcdBackendAuthRevision(etcd_.data_dir());

  ASSERT_TRUE(etcd_.Start({{"backend-batch-interval", "1h"}, {"backend-batch-limit", "1000000"}}))
      << etcd_.log();
  const std::vector<std::vector<std::string>> wal_only = {
      {root, "user", "add", "bob:bobpw"},
      {root, "user", "grant-role", "bob", "writer"},
      {root, "role", "grant-permission", "reader", "read", "extra/", "--prefix"},
      {root, "user", "revoke-role", "dave", "reader"},
      {root, "user", "delete", "carol"},
      {"--user=bob:bobpw", "put", "w/bob", "b"}};
  for (const auto& cmd : wal_only) {
    CmdResult r = Etcdctl(etcd_, cmd);
    ASSERT_EQ(r.rc, 0) << r.Describe();
  }
  CmdResult passwd =
      Etcdctl(etcd_, {root, "user", "passwd", "alice", "--interactive=false"}, "alicepw2\n");
  ASSERT_EQ(passwd.rc, 0) << passwd.Describe();
  // Proposed, then refused by etcd's applier: entries the replay must refuse too.
  CmdResult stolen = Etcdctl(etcd_, {"--user=alice:alicepw2", "put", "secret", "stolen"});
  ASSERT_TRUE(Contains(stolen.err, "etcdserver: permission denied")) << stolen.Describe();
  CmdResult anonymous = Etcdctl(etcd_, {"put", "anon", "x"});
  ASSERT_TRUE(Contains(anonymous.err, "etcdserver: user name is empty")) << anonymous.Describe();
  etcd_.Kill();

  ASSERT_TRUE(StartOursOnEtcdsDir()) << ours_.log();
  ExpectEtcdFilesMovedAside();
  auto took = LogsWithMsg(ours_.log(), "took over etcd's data directory");
  ASSERT_EQ(took.size(), 1u);
  EXPECT_TRUE(took[0].value("auth-enabled", false)) << took[0].dump();
  // The auth changes after the clean stop were only in the WAL (six, plus the password).
  EXPECT_GE(took[0].value("auth-requests", uint64_t{0}), 6u) << took[0].dump();
  EXPECT_FALSE(Contains(ours_.log(), "alicepw")) << "a password was logged";

  const std::vector<std::vector<std::string>> checks = {
      {"--user=alice:alicepw2", "get", "pub/1"},
      {"--user=alice:alicepw", "get", "pub/1"},
      {"--user=alice:alicepw2", "get", "extra/1"},
      {"--user=alice:alicepw2", "put", "pub/2", "x"},
      {"--user=alice:alicepw2", "get", "secret"},
      {"--user=bob:bobpw", "get", "w/bob"},
      {"--user=bob:bobpw", "put", "w/2", "y"},
      {"--user=bob:bobpw", "get", "pub/1"},
      {"--user=carol:carolpw", "get", "pub/1"},
      {"--user=dave:davepw", "get", "pub/1"},
      {"get", "pub/1"},
      {root, "get", "secret"},
      {root, "get", "anon"},
      {root, "get", "", "--prefix"},
      {root, "user", "list"},
      {root, "user", "get", "dave"},
      {root, "role", "get", "reader"}};
  std::vector<CmdResult> ours;
  for (const auto& cmd : checks) ours.push_back(Etcdctl(ours_, cmd));
  EXPECT_EQ(ours[0].rc, 0) << ours[0].Describe();
  EXPECT_TRUE(Contains(ours[0].out, "v1")) << ours[0].Describe();
  EXPECT_TRUE(Contains(ours[1].err, "authentication failed")) << ours[1].Describe();
  EXPECT_TRUE(Contains(ours[2].out, "e1")) << ours[2].Describe();
  EXPECT_TRUE(Contains(ours[3].err, "etcdserver: permission denied")) << ours[3].Describe();
  EXPECT_TRUE(Contains(ours[5].out, "w/bob\nb\n")) << ours[5].Describe();
  EXPECT_TRUE(Contains(ours[8].err, "authentication failed")) << ours[8].Describe();
  EXPECT_TRUE(Contains(ours[9].err, "etcdserver: permission denied")) << ours[9].Describe();
  EXPECT_EQ(ours[11].out, "secret\ns\n") << ours[11].Describe();
  EXPECT_EQ(ours[12].out, "") << ours[12].Describe();
  etcdserverpb::AuthStatusResponse status;
  grpc::Status st =
      ours_.client().auth->AuthStatus(Ctx().get(), etcdserverpb::AuthStatusRequest(), &status);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(status.enabled());

  // etcd itself on a copy of its moved-aside files replays the same WAL: the same answers, and
  // (once stopped) the same auth revision in its backend.
  Member again(Member::Kind::kEtcd, "etcd");
  fs::create_directories(again.data_dir());
  fs::copy(etcd_.data_dir() + "/etcd-taken-over/member", again.data_dir() + "/member",
           fs::copy_options::recursive);
  ASSERT_TRUE(again.Start()) << again.log();
  for (size_t i = 0; i < checks.size(); ++i) {
    CmdResult theirs = Etcdctl(again, checks[i]);
    SCOPED_TRACE(::testing::PrintToString(checks[i]));
    EXPECT_EQ(ours[i].rc, theirs.rc) << "ours:\n"
                                     << ours[i].Describe() << "etcd:\n"
                                     << theirs.Describe();
    EXPECT_EQ(ours[i].out, theirs.out);
    EXPECT_EQ(ErrorLine(ours[i].err), ErrorLine(theirs.err));
  }
  ASSERT_TRUE(again.Stop().has_value());
  EXPECT_EQ(status.authrevision(), EtcdBackendAuthRevision(again.data_dir()));
  EXPECT_GT(status.authrevision(), backend_auth_revision);  // the WAL's changes counted
}

// The pod: etcd 3.4 ran on the pod's volume and stopped; `etcdbrctl server` validates the
// directory (full: the last stop was not the wrapper's) and finds it valid, so it neither
// restores nor removes it; `etcd-wrapper start-etcd` takes it over and serves etcd's keys with
// etcd's identity.
TEST(EtcdTakeoverPodTest, StartEtcdTakesOverWhatTheSidecarValidated) {
  PodPorts ports;
  Pod pod(0, {ports});
  Process etcd;
  ASSERT_TRUE(etcd.Start(
      {"etcd", "--name=etcd-main-0", "--data-dir=" + pod.DataDir(),
       "--listen-client-urls=" + ports.ClientUrl(), "--advertise-client-urls=" + ports.ClientUrl(),
       "--listen-peer-urls=" + ports.PeerUrl(), "--initial-advertise-peer-urls=" + ports.PeerUrl(),
       "--initial-cluster=etcd-main-0=" + ports.PeerUrl(), "--initial-cluster-token=etcd-cluster",
       "--snapshot-count=50"},
      pod.File("etcd.log"), {"ETCD_UNSUPPORTED_ARCH="}));
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    up = Etcdctl(pod.Endpoint(), {"endpoint", "health"}).rc == 0;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(up) << ReadFile(pod.File("etcd.log"));
  for (int i = 0; i < 120; ++i) {
    ASSERT_EQ(Etcdctl(pod.Endpoint(), {"put", "k" + std::to_string(i % 40), std::to_string(i)}).rc,
              0);
  }
  ASSERT_EQ(Etcdctl(pod.Endpoint(), {"del", "k1"}).rc, 0);
  const Dump before = DumpAll(pod.Endpoint());
  ASSERT_EQ(before.revision, 122);
  CmdResult status = Etcdctl(pod.Endpoint(), {"endpoint", "status", "-w", "json"});
  auto sj = ParseJson(status.out);
  ASSERT_TRUE(sj.is_array() && !sj.empty()) << status.Describe();
  const uint64_t member_id = sj[0]["Status"]["header"].value("member_id", uint64_t{0});
  const uint64_t cluster_id = sj[0]["Status"]["header"].value("cluster_id", uint64_t{0});
  etcd.Signal(SIGTERM);
  ASSERT_TRUE(etcd.Wait(std::chrono::seconds(20)).has_value());

  ASSERT_TRUE(pod.StartSidecar()) << pod.Logs();
  ASSERT_TRUE(pod.StartWrapper()) << pod.Logs();
  ASSERT_TRUE(pod.WaitReady()) << pod.Logs();
  EXPECT_TRUE(Contains(pod.SidecarLog(), "\"status\":\"DataDirectoryValid\"")) << pod.Logs();
  EXPECT_FALSE(Contains(pod.SidecarLog(), "removing the invalid data directory")) << pod.Logs();
  EXPECT_FALSE(Contains(pod.SidecarLog(), "restoring the data directory")) << pod.Logs();
  EXPECT_EQ(DumpAll(pod.Endpoint()), before) << pod.Logs();
  CmdResult ours = Etcdctl(pod.Endpoint(), {"endpoint", "status", "-w", "json"});
  auto oj = ParseJson(ours.out);
  ASSERT_TRUE(oj.is_array() && !oj.empty()) << ours.Describe();
  EXPECT_EQ(oj[0]["Status"]["header"].value("member_id", uint64_t{0}), member_id);
  EXPECT_EQ(oj[0]["Status"]["header"].value("cluster_id", uint64_t{0}), cluster_id);
  EXPECT_TRUE(fs::exists(pod.DataDir() + "/etcd-taken-over/member/snap/db"));
}

// A 3-member etcd cluster stopped with SIGTERM, each member's directory given to etcd-wrapper
// with the member's name and peer URL: every member is taken over with its own ID, the three form
// the same cluster again (same cluster ID and member IDs), serve etcd's keys at etcd's revision,
// and take writes.
TEST(EtcdClusterTakeoverTest, EveryMemberOfAThreeMemberClusterIsTakenOver) {
  TestCluster etcd(3, Member::Kind::kEtcd);
  ASSERT_TRUE(etcd.StartAll()) << etcd.LogTails();
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(etcd.member(i % 3).client().Put("k/" + std::to_string(i), std::to_string(i)).ok());
  }
  ASSERT_EQ(Etcdctl(etcd.member(1), {"del", "k/1", "--prefix"}).rc, 0);
  int64_t etcd_rev = 0;
  const std::vector<std::string> want = All(etcd.member(0), 0, &etcd_rev);
  const Identity etcd_id = IdentityOf(etcd.member(0));
  std::vector<uint64_t> etcd_members = etcd_id.members;
  std::sort(etcd_members.begin(), etcd_members.end());
  ASSERT_EQ(etcd_members.size(), 3u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(etcd.member(i).Stop().has_value());

  std::vector<std::unique_ptr<Member>> ours;
  for (int i = 0; i < 3; ++i) {
    Member& e = etcd.member(i);
    ours.push_back(std::make_unique<Member>(Member::Kind::kEtcdWrapper, e.name()));
    ASSERT_TRUE(ours.back()->Launch({{"data-dir", e.data_dir()},
                                     {"listen-peer-urls", e.peer_url()},
                                     {"initial-advertise-peer-urls", e.peer_url()},
                                     {"initial-cluster", etcd.InitialCluster()},
                                     {"initial-cluster-token", "test-cluster"}}));
  }
  for (auto& m : ours) ASSERT_TRUE(m->WaitReady(std::chrono::seconds(60))) << m->log();
  std::set<uint64_t> own_ids;
  for (auto& m : ours) {
    SCOPED_TRACE(m->name());
    EXPECT_TRUE(Contains(m->log(), "etcd's files moved aside")) << m->log();
    const Identity id = IdentityOf(*m);
    EXPECT_EQ(id.cluster_id, etcd_id.cluster_id);
    std::vector<uint64_t> members = id.members;
    std::sort(members.begin(), members.end());
    EXPECT_EQ(members, etcd_members);
    own_ids.insert(id.member_id);
    int64_t rev = 0;
    EXPECT_TRUE(All(*m, 0, &rev) == want);
    EXPECT_EQ(rev, etcd_rev);
  }
  EXPECT_EQ(own_ids, std::set<uint64_t>(etcd_members.begin(), etcd_members.end()));
  etcdserverpb::PutResponse put;
  ASSERT_TRUE(ours[2]->client().Put("after", "x", 0, &put).ok());
  EXPECT_EQ(put.header().revision(), etcd_rev + 1);
}

}  // namespace
}  // namespace etcdw::testing
