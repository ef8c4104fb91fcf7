// Differential, the other way round from etcd_import_test: etcd-wrapper writes a history
// (overwrites, single and range deletions, multi-change transactions, 2000 keys, 100 KiB and
// binary values and keys, two leases, a compaction, writes after it), `etcdctl snapshot save`
// copies it from Maintenance.Snapshot (etcd's bbolt format, mvcc/etcd_export.h), `etcdctl
// snapshot status` reads it, `etcdctl snapshot restore` makes an etcd 3.4 data directory of it,
// and a real etcd 3.4 started there answers as we do: every key at the current revision and at
// past revisions down to the compaction, the compaction's error below it, the leases with their
// granted TTLs and keys, and the next write's revision. And the round trip etcd -> us -> etcd.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "servers.h"

namespace etcdw::testing {
namespace {

constexpr int kExportKeys = 2000;
constexpr int64_t kLeaseC = 0x3003, kLeaseD = 0x4004;

std::string ExportKey(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "key/%04d", i);
  return buf;
}

// Every key at `rev` (0: current), paged, as serialized KeyValues; and the header's revision.
std::vector<std::string> Everything(Member& m, int64_t rev, int64_t* header_rev) {
  std::vector<std::string> out;
  std::string from(1, '\0');
  while (true) {
    etcdserverpb::RangeRequest req;
    req.set_key(from);
    req.set_range_end(std::string(1, '\0'));
    req.set_revision(rev);
    req.set_limit(300);
    etcdserverpb::RangeResponse resp;
    grpc::Status st = m.client().kv->Range(Ctx().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << m.label() << " at " << rev << ": " << st.error_message();
    if (!st.ok()) return out;
    *header_rev = resp.header().revision();
    for (const auto& kv : resp.kvs()) out.push_back(kv.SerializeAsString());
    if (!resp.more() || resp.kvs_size() == 0) return out;
    from = resp.kvs(resp.kvs_size() - 1).key() + std::string(1, '\0');
  }
}

class EtcdExportTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "--- etcd-wrapper log ---\n"
                << ours_.log() << "--- etcd log ---\n"
                << etcd_.log();
    }
  }
  void Put(const std::string& k, const std::string& v, int64_t lease = 0) {
    etcdserverpb::PutResponse r;
    grpc::Status st = ours_.client().Put(k, v, lease, &r);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  void Grant(int64_t id, int64_t ttl) {
    etcdserverpb::LeaseGrantRequest g;
    g.set_id(id);
    g.set_ttl(ttl);
    etcdserverpb::LeaseGrantResponse r;
    ASSERT_TRUE(ours_.client().lease->LeaseGrant(Ctx().get(), g, &r).ok());
  }
  void DeleteRange(const std::string& k, const std::string& end) {
    etcdserverpb::DeleteRangeRequest d;
    d.set_key(k);
    d.set_range_end(end);
    etcdserverpb::DeleteRangeResponse r;
    ASSERT_TRUE(ours_.client().kv->DeleteRange(Ctx().get(), d, &r).ok());
  }
  int64_t Rev() {
    etcdserverpb::RangeResponse r;
    EXPECT_TRUE(ours_.client().Get("none", &r).ok());
    return r.header().revision();
  }
  nlohmann::json Status(const std::string& snap) {
    CmdResult r = Etcdctl(ours_, {"snapshot", "status", snap, "-w", "json"});
    EXPECT_EQ(r.rc, 0) << r.Describe();
    return ParseJson(r.out);
  }

  Member ours_{Member::Kind::kEtcdWrapper, "ours"};
  Member etcd_{Member::Kind::kEtcd, "restored"};
};

TEST_F(EtcdExportTest, EtcdRestoresOurSnapshotAndServesTheSameHistory) {
  ASSERT_TRUE(ours_.Start()) << ours_.log();
  std::mt19937_64 rng(92);
  auto random_bytes = [&](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  };
  Grant(kLeaseC, 600);
  Grant(kLeaseD, 3000);
  for (int i = 0; i < kExportKeys; ++i) {
    Put(ExportKey(i), "v0-" + std::to_string(i),
        i % 97 == 0 ? kLeaseC : (i % 101 == 0 ? kLeaseD : 0));
  }
  for (int i = 0; i < 10; ++i) Put("big/" + std::to_string(i), random_bytes(100 << 10));
  for (int i = 0; i < 20; ++i) Put(std::string("bin\0\xff", 5) + random_bytes(8), random_bytes(64));
  for (int i = 0; i < 500; ++i) Put(ExportKey(i), "v1-" + std::to_string(i));  // overwrites
  DeleteRange(ExportKey(600), ExportKey(700));  // one revision, 100 changes
  etcdserverpb::TxnRequest txn;                 // one revision, three changes
  for (const char* k : {"txn/a", "txn/b"}) {
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(k);
    put->set_value("t");
  }
  txn.add_success()->mutable_request_delete_range()->set_key(ExportKey(800));
  etcdserverpb::TxnResponse txn_resp;
  ASSERT_TRUE(ours_.client().kv->Txn(Ctx().get(), txn, &txn_resp).ok());
  const int64_t compacted = Rev();
  etcdserverpb::CompactionRequest c;
  c.set_revision(compacted);
  c.set_physical(true);
  etcdserverpb::CompactionResponse cr;
  ASSERT_TRUE(ours_.client().kv->Compact(Ctx().get(), c, &cr).ok());
  for (int i = 0; i < 5; ++i) Put("big/" + std::to_string(i), random_bytes(100 << 10));
  for (int i = 0; i < 50; ++i) Put(ExportKey(i * 3), "v2", kLeaseD);
  DeleteRange("big/5", "big/8");
  etcdserverpb::TxnRequest txn2;  // a transaction after the compaction: sub-revisions 0..2
  for (const char* k : {"txn/c", "txn/d", "txn/e"}) {
    auto* put = txn2.add_success()->mutable_request_put();
    put->set_key(k);
    put->set_value("u");
  }
  ASSERT_TRUE(ours_.client().kv->Txn(Ctx().get(), txn2, &txn_resp).ok());
  const int64_t last = Rev();
  ASSERT_GT(compacted, 2500);

  // `etcdctl snapshot save` from us; `snapshot status` reads it as etcd's database.
  const std::string snap = ours_.dir() + "/snapshot.db";
  const auto start = std::chrono::steady_clock::now();
  CmdResult saved = Etcdctl(ours_, {"snapshot", "save", snap});
  ASSERT_EQ(saved.rc, 0) << saved.Describe();
  std::cerr << "snapshot save took "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s, " << std::filesystem::file_size(snap) << " bytes\n";
  EXPECT_EQ(std::filesystem::file_size(snap) % 512, 32u);
  nlohmann::json status = Status(snap);
  EXPECT_EQ(status["revision"].get<int64_t>(), last) << status.dump();
  // Every record of every bucket (bbolt's integrity check passed first): about 1930 versions
  // below the compaction, some 60 changes from it on, and a few records in auth, cluster, lease,
  // members and meta.
  EXPECT_GT(status["totalKey"].get<int64_t>(), 1950) << status.dump();
  EXPECT_LT(status["totalKey"].get<int64_t>(), 2050) << status.dump();
  EXPECT_NE(status["hash"].get<uint64_t>(), 0u) << status.dump();
  EXPECT_EQ(status["totalSize"].get<uint64_t>() + 32, std::filesystem::file_size(snap));
  // The same state exports to the same bytes: a second save has the same hash.
  const std::string again = ours_.dir() + "/again.db";
  ASSERT_EQ(Etcdctl(ours_, {"snapshot", "save", again}).rc, 0);
  EXPECT_EQ(Status(again)["hash"], status["hash"]);
  // No export file stays in our data directory.
  for (const auto& e : std::filesystem::directory_iterator(ours_.data_dir() + "/member")) {
    EXPECT_EQ(e.path().filename().string().find("snapshot-export-"), std::string::npos) << e.path();
  }

  // `etcdctl snapshot restore` into the data directory the etcd member starts from.
  std::filesystem::remove_all(etcd_.data_dir());
  CmdResult restored =
      Etcdctl(ours_, {"snapshot", "restore", snap, "--data-dir", etcd_.data_dir(), "--name",
                      "restored", "--initial-cluster", "restored=" + etcd_.peer_url(),
                      "--initial-advertise-peer-urls", etcd_.peer_url()});
  ASSERT_EQ(restored.rc, 0) << restored.Describe();
  ASSERT_TRUE(etcd_.Start()) << etcd_.log();

  for (int64_t rev : {int64_t{0}, last - 1, compacted + 1, compacted}) {
    SCOPED_TRACE("revision " + std::to_string(rev));
    int64_t etcd_rev = 0, our_rev = 0;
    const std::vector<std::string> want = Everything(ours_, rev, &our_rev);
    const std::vector<std::string> got = Everything(etcd_, rev, &etcd_rev);
    EXPECT_EQ(our_rev, last);
    EXPECT_EQ(etcd_rev, last);
    EXPECT_GT(want.size(), 1500u);
    EXPECT_TRUE(got == want) << "etcd " << got.size() << " keys, ours " << want.size();
  }
  for (Member* m : {&etcd_, &ours_}) {
    CmdResult r = Etcdctl(*m, {"get", ExportKey(1), "--rev=" + std::to_string(compacted - 1)});
    EXPECT_NE(r.rc, 0) << m->label();
    EXPECT_NE(r.err.find("required revision has been compacted"), std::string::npos)
        << m->label() << ": " << r.Describe();
  }
  auto lease_list = [](Member& m) {
    std::vector<std::string> lines = Lines(Etcdctl(m, {"lease", "list"}).out);
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  EXPECT_EQ(lease_list(etcd_), lease_list(ours_));
  EXPECT_EQ(lease_list(ours_).size(), 3u);  // "found 2 leases" and the IDs
  for (int64_t id : {kLeaseC, kLeaseD}) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(id));
    auto ttl = [&](Member& m) {
      CmdResult r = Etcdctl(m, {"lease", "timetolive", hex, "--keys", "-w", "json"});
      EXPECT_EQ(r.rc, 0) << r.Describe();
      return ParseJson(r.out);
    };
    nlohmann::json want = ttl(ours_), got = ttl(etcd_);
    EXPECT_EQ(got["granted-ttl"], want["granted-ttl"]) << hex;
    auto keys = [](const nlohmann::json& j) {
      std::vector<std::string> k = j.value("keys", std::vector<std::string>{});
      std::sort(k.begin(), k.end());
      return k;
    };
    EXPECT_EQ(keys(got), keys(want)) << hex;
    EXPECT_GT(keys(want).size(), 10u) << hex;
    EXPECT_GT(got["ttl"].get<int64_t>(), 0) << hex;
  }
  // etcd writes into the restored database: the next write continues the revisions.
  etcdserverpb::PutResponse next;
  ASSERT_TRUE(etcd_.client().Put("after", "x", 0, &next).ok());
  EXPECT_EQ(next.header().revision(), last + 1);
  for (int i = 0; i < 300; ++i)
    ASSERT_TRUE(etcd_.client().Put("more/" + std::to_string(i), random_bytes(5000)).ok());
  etcdserverpb::RangeResponse got_after;
  ASSERT_TRUE(etcd_.client().Get("after", &got_after).ok());
  ASSERT_EQ(got_after.kvs_size(), 1);
  EXPECT_EQ(got_after.kvs(0).value(), "x");
}

// Our users, roles, permissions and password hashes go to etcd with the snapshot: etcd 3.4
// restores it with authentication enabled, the passwords we hashed log in on etcd, and each
// user may do there what it may here.
TEST_F(EtcdExportTest, EtcdKeepsOurUsersRolesAndPasswords) {
  ASSERT_TRUE(ours_.Start()) << ours_.log();
  Put("secret", "s");
  Put("pub/1", "p");
  for (const std::vector<std::string>& args : SnapshotAuthSetup()) {
    CmdResult r = Etcdctl(ours_, args);
    ASSERT_EQ(r.rc, 0) << r.Describe();
  }
  const std::string snap = ours_.dir() + "/auth.db";
  CmdResult saved = Etcdctl(ours_, {"--user", "root:rootpw", "snapshot", "save", snap});
  ASSERT_EQ(saved.rc, 0) << saved.Describe();
  std::filesystem::remove_all(etcd_.data_dir());
  CmdResult restored =
      Etcdctl(ours_, {"snapshot", "restore", snap, "--data-dir", etcd_.data_dir(), "--name",
                      "restored", "--initial-cluster", "restored=" + etcd_.peer_url(),
                      "--initial-advertise-peer-urls", etcd_.peer_url()});
  ASSERT_EQ(restored.rc, 0) << restored.Describe();
  ASSERT_TRUE(etcd_.Start()) << etcd_.log();
  for (const std::vector<std::string>& args : SnapshotAuthChecks()) {
    CmdResult theirs = Etcdctl(etcd_, args);
    CmdResult mine = Etcdctl(ours_, args);
    EXPECT_EQ(theirs.rc, mine.rc) << theirs.Describe() << "\n" << mine.Describe();
    EXPECT_EQ(theirs.out, mine.out) << theirs.Describe();
    EXPECT_EQ(ErrorLine(theirs.err), ErrorLine(mine.err)) << theirs.Describe();
  }
}

// The round trip: etcd 3.4 writes a history, `etcd-wrapper snapshot restore` takes its
// snapshot in, our member serves it, `etcdctl snapshot save` takes it out again, and a second
// etcd restored from that serves what the first one served: every key at the current revision
// and at every revision down to the compaction, the leases, and the revisions after it.
TEST(EtcdRoundTripTest, EtcdToUsToEtcdKeepsEveryRevision) {
  Member first(Member::Kind::kEtcd, "first");
  Member ours(Member::Kind::kEtcdWrapper, "ours");
  Member back(Member::Kind::kEtcd, "back");
  ASSERT_TRUE(first.Start()) << first.log();
  etcdserverpb::LeaseGrantRequest g;
  g.set_id(0x5005);
  g.set_ttl(900);
  etcdserverpb::LeaseGrantResponse gr;
  ASSERT_TRUE(first.client().lease->LeaseGrant(Ctx().get(), g, &gr).ok());
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(first.client()
                    .Put(ExportKey(i), std::string(i * 37 % 9000, 'v'), i % 7 == 0 ? 0x5005 : 0)
                    .ok());
  }
  for (int i = 0; i < 150; ++i) ASSERT_TRUE(first.client().Put(ExportKey(i), "again").ok());
  CmdResult del = Etcdctl(first, {"del", "key/02", "--prefix"});
  ASSERT_EQ(del.rc, 0) << del.Describe();
  etcdserverpb::RangeResponse r;
  ASSERT_TRUE(first.client().Get("none", &r).ok());
  const int64_t compacted = r.header().revision() - 20;
  ASSERT_EQ(Etcdctl(first, {"compact", std::to_string(compacted), "--physical"}).rc, 0);
  for (int i = 300; i < 330; ++i) ASSERT_TRUE(first.client().Put(ExportKey(i), "late").ok());
  ASSERT_TRUE(first.client().Get("none", &r).ok());
  const int64_t last = r.header().revision();

  const std::string in = first.dir() + "/in.db";
  ASSERT_EQ(Etcdctl(first, {"snapshot", "save", in}).rc, 0);
  CmdResult imported = RunWrapper({"snapshot", "restore", in, "--data-dir", ours.data_dir(),
                                   "--name", "ours", "--initial-cluster", "ours=" + ours.peer_url(),
                                   "--initial-advertise-peer-urls", ours.peer_url()});
  ASSERT_EQ(imported.rc, 0) << imported.Describe();
  ASSERT_TRUE(ours.Start()) << ours.log();
  const std::string out = ours.dir() + "/out.db";
  ASSERT_EQ(Etcdctl(ours, {"snapshot", "save", out}).rc, 0);
  std::filesystem::remove_all(back.data_dir());
  CmdResult restored =
      Etcdctl(ours, {"snapshot", "restore", out, "--data-dir", back.data_dir(), "--name", "back",
                     "--initial-cluster", "back=" + back.peer_url(),
                     "--initial-advertise-peer-urls", back.peer_url()});
  ASSERT_EQ(restored.rc, 0) << restored.Describe();
  ASSERT_TRUE(back.Start()) << back.log();

  for (int64_t rev = compacted; rev <= last; ++rev) {
    SCOPED_TRACE("revision " + std::to_string(rev));
    int64_t first_rev = 0, back_rev = 0;
    const std::vector<std::string> want = Everything(first, rev, &first_rev);
    const std::vector<std::string> got = Everything(back, rev, &back_rev);
    ASSERT_EQ(back_rev, first_rev);
    ASSERT_TRUE(got == want) << "back " << got.size() << " keys, first " << want.size();
  }
  CmdResult below = Etcdctl(back, {"get", ExportKey(1), "--rev=" + std::to_string(compacted - 1)});
  EXPECT_NE(below.err.find("required revision has been compacted"), std::string::npos)
      << below.Describe();
  CmdResult ttl = Etcdctl(back, {"lease", "timetolive", "5005", "--keys", "-w", "json"});
  ASSERT_EQ(ttl.rc, 0) << ttl.Describe();
  nlohmann::json tj = ParseJson(ttl.out);
  EXPECT_EQ(tj["granted-ttl"].get<int64_t>(), 900);
  EXPECT_GT(tj.value("keys", nlohmann::json::array()).size(), 5u) << ttl.out;
  EXPECT_EQ(tj.value("keys", nlohmann::json::array()).size(),
            ParseJson(Etcdctl(first, {"lease", "timetolive", "5005", "--keys", "-w", "json"}).out)
                .value("keys", nlohmann::json::array())
                .size());
  etcdserverpb::PutResponse next;
  ASSERT_TRUE(back.client().Put("after", "x", 0, &next).ok());
  EXPECT_EQ(next.header().revision(), last + 1);
}

}  // namespace
}  // namespace etcdw::testing
