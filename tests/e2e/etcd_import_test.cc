// Differential: etcd 3.4 writes a history (overwrites, single and range deletions, multi-change
// transactions, 2000 keys, 100 KiB and binary values and keys, two leases, a compaction, writes
// after it), `etcdctl snapshot save` copies it, RestoreDataDir turns the copy into a data
// directory of ours and etcd-wrapper serves it. Both then answer alike: every key at the current
// revision and at past revisions down to the compaction, the revision, the compaction's error
// below it, and the leases with their granted TTLs and keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "etcdw/data_dir/data_dir.h"
#include "servers.h"

namespace etcdw::testing {
namespace {

constexpr int kKeys = 2000;
constexpr int64_t kLeaseA = 0x1001, kLeaseB = 0x2002;

std::string Key(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "key/%04d", i);
  return buf;
}

// Every key at `rev` (0: current), paged, as serialized KeyValues; and the header's revision.
std::vector<std::string> All(Member& m, int64_t rev, int64_t* header_rev) {
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

class EtcdImportTest : public ::testing::Test {
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
  void Grant(int64_t id, int64_t ttl) {
    etcdserverpb::LeaseGrantRequest g;
    g.set_id(id);
    g.set_ttl(ttl);
    etcdserverpb::LeaseGrantResponse r;
    ASSERT_TRUE(etcd_.client().lease->LeaseGrant(Ctx().get(), g, &r).ok());
  }
  void DeleteRange(const std::string& k, const std::string& end) {
    etcdserverpb::DeleteRangeRequest d;
    d.set_key(k);
    d.set_range_end(end);
    etcdserverpb::DeleteRangeResponse r;
    ASSERT_TRUE(etcd_.client().kv->DeleteRange(Ctx().get(), d, &r).ok());
  }
  int64_t Rev() {
    etcdserverpb::RangeResponse r;
    EXPECT_TRUE(etcd_.client().Get("none", &r).ok());
    return r.header().revision();
  }

  Member etcd_{Member::Kind::kEtcd, "etcd"};
  Member ours_{Member::Kind::kEtcdWrapper, "restored"};
};

TEST_F(EtcdImportTest, EtcdsSnapshotServesTheSameHistory) {
  ASSERT_TRUE(etcd_.Start()) << etcd_.log();
  std::mt19937_64 rng(29);
  auto random_bytes = [&](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  };
  Grant(kLeaseA, 600);
  Grant(kLeaseB, 3000);
  for (int i = 0; i < kKeys; ++i) {
    Put(Key(i), "v0-" + std::to_string(i), i % 97 == 0 ? kLeaseA : (i % 101 == 0 ? kLeaseB : 0));
  }
  for (int i = 0; i < 10; ++i) Put("big/" + std::to_string(i), random_bytes(100 << 10));
  for (int i = 0; i < 20; ++i) Put(std::string("bin\0\xff", 5) + random_bytes(8), random_bytes(64));
  const int64_t early = Rev();
  for (int i = 0; i < 500; ++i) Put(Key(i), "v1-" + std::to_string(i));  // overwrites
  DeleteRange(Key(600), Key(700));  // one revision, 100 changes
  etcdserverpb::TxnRequest txn;     // one revision, three changes
  for (const char* k : {"txn/a", "txn/b"}) {
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(k);
    put->set_value("t");
  }
  txn.add_success()->mutable_request_delete_range()->set_key(Key(800));
  etcdserverpb::TxnResponse txn_resp;
  ASSERT_TRUE(etcd_.client().kv->Txn(Ctx().get(), txn, &txn_resp).ok());
  const int64_t compacted = Rev();
  etcdserverpb::CompactionRequest c;
  c.set_revision(compacted);
  c.set_physical(true);
  etcdserverpb::CompactionResponse cr;
  ASSERT_TRUE(etcd_.client().kv->Compact(Ctx().get(), c, &cr).ok());
  for (int i = 0; i < 5; ++i) Put("big/" + std::to_string(i), random_bytes(100 << 10));
  for (int i = 0; i < 50; ++i) Put(Key(i * 3), "v2", kLeaseB);
  DeleteRange("big/5", "big/8");
  const int64_t last = Rev();
  ASSERT_GT(early, 2000);

  const std::string snap = etcd_.dir() + "/snapshot.db";
  CmdResult saved = Etcdctl(etcd_, {"snapshot", "save", snap});
  ASSERT_EQ(saved.rc, 0) << saved.Describe();
  const auto start = std::chrono::steady_clock::now();
  data_dir::RestoreTarget target{
      "restored", "restored=" + ours_.peer_url(), "etcd-cluster", {ours_.peer_url()}};
  Status restored = data_dir::RestoreDataDir(snap, ours_.data_dir(), target, false);
  ASSERT_TRUE(restored.ok()) << restored.ToString();
  std::cerr << "restore took "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s\n";
  ASSERT_TRUE(ours_.Start()) << ours_.log();

  // Every key, at the current revision and at past ones down to the compaction.
  for (int64_t rev : {int64_t{0}, last - 1, compacted + 1, compacted}) {
    SCOPED_TRACE("revision " + std::to_string(rev));
    int64_t etcd_rev = 0, our_rev = 0;
    const std::vector<std::string> want = All(etcd_, rev, &etcd_rev);
    const std::vector<std::string> got = All(ours_, rev, &our_rev);
    EXPECT_EQ(etcd_rev, last);
    EXPECT_EQ(our_rev, last);
    EXPECT_GT(want.size(), 1500u);
    EXPECT_TRUE(got == want) << got.size() << " keys, etcd " << want.size();
  }
  // Below the compaction both refuse, with the same words.
  for (Member* m : {&etcd_, &ours_}) {
    CmdResult r = Etcdctl(*m, {"get", Key(1), "--rev=" + std::to_string(compacted - 1)});
    EXPECT_NE(r.rc, 0) << m->label();
    EXPECT_NE(r.err.find("required revision has been compacted"), std::string::npos)
        << m->label() << ": " << r.Describe();
  }
  // The leases, with their granted TTLs and keys.
  auto lease_list = [](Member& m) {  // the lines in order: etcd lists them in map order
    std::vector<std::string> lines = Lines(Etcdctl(m, {"lease", "list"}).out);
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  EXPECT_EQ(lease_list(ours_), lease_list(etcd_));
  EXPECT_EQ(lease_list(etcd_).size(), 3u);  // "found 2 leases" and the IDs
  for (int64_t id : {kLeaseA, kLeaseB}) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(id));
    auto ttl = [&](Member& m) {
      CmdResult r = Etcdctl(m, {"lease", "timetolive", hex, "--keys", "-w", "json"});
      EXPECT_EQ(r.rc, 0) << r.Describe();
      auto j = nlohmann::json::parse(r.out, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << r.out;
      return j;
    };
    nlohmann::json want = ttl(etcd_), got = ttl(ours_);
    EXPECT_EQ(got["granted-ttl"], want["granted-ttl"]) << hex;
    auto keys = [](const nlohmann::json& j) {  // etcd lists them in map order
      std::vector<std::string> k = j.value("keys", std::vector<std::string>{});
      std::sort(k.begin(), k.end());
      return k;
    };
    EXPECT_EQ(keys(got), keys(want)) << hex;
    EXPECT_GT(keys(want).size(), 10u) << hex;
    EXPECT_GT(got["ttl"].get<int64_t>(), 0) << hex;
  }
  // The next write continues the revisions.
  etcdserverpb::PutResponse next;
  ASSERT_TRUE(ours_.client().Put("after", "x", 0, &next).ok());
  EXPECT_EQ(next.header().revision(), last + 1);
}

// etcd's snapshot of a member with authentication enabled brings its users, roles and
// permissions: the passwords etcd hashed (Go's bcrypt) log in on our store, each user may do
// what it may on etcd, and nobody else may read anything.
TEST_F(EtcdImportTest, ASnapshotWithAuthenticationKeepsItsUsersRolesAndPasswords) {
  ASSERT_TRUE(etcd_.Start()) << etcd_.log();
  Put("secret", "s");
  Put("pub/1", "p");
  for (const std::vector<std::string>& args : SnapshotAuthSetup()) {
    CmdResult r = Etcdctl(etcd_, args);
    ASSERT_EQ(r.rc, 0) << r.Describe();
  }
  const std::string snap = etcd_.dir() + "/auth.db";
  CmdResult saved = Etcdctl(etcd_, {"--user", "root:rootpw", "snapshot", "save", snap});
  ASSERT_EQ(saved.rc, 0) << saved.Describe();
  data_dir::RestoreTarget target{
      "restored", "restored=" + ours_.peer_url(), "etcd-cluster", {ours_.peer_url()}};
  Status restored = data_dir::RestoreDataDir(snap, ours_.data_dir(), target, false);
  ASSERT_TRUE(restored.ok()) << restored.ToString();
  ASSERT_TRUE(ours_.Start()) << ours_.log();
  // The same commands answer the same on both.
  std::vector<std::vector<std::string>> checks = SnapshotAuthChecks();
  checks.push_back({"--user", "root:rootpw", "auth", "disable"});
  checks.push_back({"get", "secret"});
  for (const std::vector<std::string>& args : checks) {
    CmdResult theirs = Etcdctl(etcd_, args);
    CmdResult mine = Etcdctl(ours_, args);
    EXPECT_EQ(mine.rc, theirs.rc) << mine.Describe() << "\n" << theirs.Describe();
    EXPECT_EQ(mine.out, theirs.out) << mine.Describe();
    EXPECT_EQ(ErrorLine(mine.err), ErrorLine(theirs.err)) << mine.Describe();
  }
}

}  // namespace
}  // namespace etcdw::testing
