// `etcd-wrapper snapshot restore` against `etcdctl snapshot restore` (etcd 3.4): the same
// snapshot file restored by both with the same flags gives a member with the same ID in a
// cluster with the same ID, serving the same keys at the same revision; and the command line
// answers mistakes with etcdctl's exit codes and words.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "servers.h"

namespace etcdw::testing {
namespace {

// Every key at the current revision as serialized KeyValues, and the header's revision.
std::vector<std::string> AllKeys(Member& m, int64_t* rev) {
  etcdserverpb::RangeResponse resp;
  grpc::Status st = m.client().Get(std::string(1, '\0'), &resp, std::string(1, '\0'));
  EXPECT_TRUE(st.ok()) << m.label() << ": " << st.error_message();
  *rev = resp.header().revision();
  std::vector<std::string> out;
  for (const auto& kv : resp.kvs()) out.push_back(kv.SerializeAsString());
  return out;
}

struct Identity {
  std::string member_id;  // as `etcdctl member list -w json` prints them (decimal)
  std::string cluster_id;
  std::vector<std::string> peer_urls;
};

Identity IdentityOf(Member& m) {
  CmdResult r = Etcdctl(m, {"member", "list", "-w", "json"});
  EXPECT_EQ(r.rc, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  Identity id;
  if (j.is_null() || j["members"].size() != 1) {
    ADD_FAILURE() << m.label() << ": " << r.out;
    return id;
  }
  id.member_id = j["members"][0]["ID"].dump();
  id.cluster_id = j["header"]["cluster_id"].dump();
  id.peer_urls = j["members"][0]["peerURLs"].get<std::vector<std::string>>();
  return id;
}

TEST(SnapshotRestoreCliTest, RestoresAsEtcdctlDoesWithTheSameMemberAndClusterIds) {
  Member source(Member::Kind::kEtcd, "source");
  ASSERT_TRUE(source.Start()) << source.log();
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(source.client().Put("k/" + std::to_string(i), "v" + std::to_string(i)).ok());
  }
  ASSERT_TRUE(source.client().Put("k/7", "again").ok());
  CmdResult del = Etcdctl(source, {"del", "k/1", "--prefix"});  // k/1, k/10..k/19, k/100..
  ASSERT_EQ(del.rc, 0) << del.Describe();
  const std::string snap = source.dir() + "/snapshot.db";
  CmdResult saved = Etcdctl(source, {"snapshot", "save", snap});
  ASSERT_EQ(saved.rc, 0) << saved.Describe();
  int64_t source_rev = 0;
  const std::vector<std::string> want = AllKeys(source, &source_rev);
  ASSERT_EQ(want.size(), 300u - 111u);

  // etcd restored by etcdctl, then etcd-wrapper restored by our command with the same flags
  // (the same name, peer URL and token), one after the other on the same peer port.
  Member etcd(Member::Kind::kEtcd, "restored");
  Member ours(Member::Kind::kEtcdWrapper, "restored");
  const std::string peer = etcd.peer_url();
  const std::vector<std::string> flags = {"--name",
                                          "restored",
                                          "--initial-cluster",
                                          "restored=" + peer,
                                          "--initial-cluster-token",
                                          "token-29",
                                          "--initial-advertise-peer-urls",
                                          peer};
  std::vector<std::string> etcdctl_args = {"snapshot", "restore", snap, "--data-dir",
                                           etcd.data_dir()};
  etcdctl_args.insert(etcdctl_args.end(), flags.begin(), flags.end());
  CmdResult by_etcdctl = Etcdctl(source, etcdctl_args);
  ASSERT_EQ(by_etcdctl.rc, 0) << by_etcdctl.Describe();
  // Our flags after the file, as in etcdctl's usage; the data dir before it.
  std::vector<std::string> our_args = {"snapshot", "restore", "--data-dir", ours.data_dir(), snap};
  our_args.insert(our_args.end(), flags.begin(), flags.end());
  CmdResult by_us = RunWrapper(our_args);
  ASSERT_EQ(by_us.rc, 0) << by_us.Describe();

  const Settings same = {{"initial-cluster-token", "token-29"},
                         {"initial-cluster", "restored=" + peer},
                         {"initial-advertise-peer-urls", peer},
                         {"listen-peer-urls", peer}};
  ASSERT_TRUE(etcd.Start(same)) << etcd.log();
  const Identity etcd_id = IdentityOf(etcd);
  int64_t etcd_rev = 0;
  EXPECT_EQ(AllKeys(etcd, &etcd_rev), want);
  EXPECT_EQ(etcd_rev, source_rev);
  ASSERT_TRUE(etcd.Stop().has_value());

  ASSERT_TRUE(ours.Start(same)) << ours.log();
  const Identity our_id = IdentityOf(ours);
  EXPECT_EQ(our_id.member_id, etcd_id.member_id);
  EXPECT_EQ(our_id.cluster_id, etcd_id.cluster_id);
  EXPECT_EQ(our_id.peer_urls, etcd_id.peer_urls);
  int64_t our_rev = 0;
  EXPECT_EQ(AllKeys(ours, &our_rev), want);
  EXPECT_EQ(our_rev, source_rev);
  ASSERT_TRUE(ours.client().Put("after", "x").ok());
}

// The mistakes etcdctl answers with an exit code and an "Error:" line get the same from us.
TEST(SnapshotRestoreCliTest, MistakesGetEtcdctlsExitCodesAndWords) {
  TempDir dir;
  const std::string existing = dir.File("existing");
  std::filesystem::create_directories(existing);
  const std::string snap = dir.File("not-a-snapshot.db");
  WriteFile(snap, std::string(4096, 'x'));
  struct Case {
    std::vector<std::string> args;
    int rc;
    std::string etcdctl_words;  // "" when our words differ by design (checked separately)
  };
  const std::vector<Case> cases = {
      {{"snapshot", "restore"}, 128, "Error: snapshot restore requires exactly one argument"},
      {{"snapshot", "restore", "a.db", "b.db"},
       128,
       "Error: snapshot restore requires exactly one argument"},
      {{"snapshot", "restore", snap, "--data-dir", existing},
       1,
       "Error: data-dir \"" + existing + "\" exists"},
      {{"snapshot", "restore", snap, "--no-such-flag"}, 1, ""},
      {{"snapshot", "restore", snap, "--data-dir", dir.File("new")}, 1, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args.back());
    CmdResult ours = RunWrapper(c.args);
    CmdResult etcd = Etcdctl("127.0.0.1:1", c.args);
    EXPECT_EQ(ours.rc, c.rc) << ours.Describe();
    EXPECT_EQ(etcd.rc, c.rc) << etcd.Describe();
    if (!c.etcdctl_words.empty()) {
      EXPECT_TRUE(Contains(etcd.err, c.etcdctl_words)) << etcd.Describe();
      EXPECT_TRUE(Contains(ours.err, c.etcdctl_words)) << ours.Describe();
    } else {
      EXPECT_TRUE(Contains(ours.err, "Error: ")) << ours.Describe();
    }
  }
  // A file that is no snapshot: a clear error, and no data directory left behind (etcdctl
  // leaves a partial one, which the case above met).
  CmdResult bad = RunWrapper({"snapshot", "restore", snap, "--data-dir", dir.File("mine")});
  EXPECT_EQ(bad.rc, 1);
  EXPECT_TRUE(Contains(bad.err, "\"" + snap + "\" is neither an etcd snapshot")) << bad.Describe();
  EXPECT_FALSE(std::filesystem::exists(dir.File("mine")));
  EXPECT_FALSE(std::filesystem::exists(dir.File("mine.restoring")));
  // --wal-dir has no meaning for our store: refused by name.
  CmdResult wal = RunWrapper({"snapshot", "restore", snap, "--wal-dir", dir.File("wal")});
  EXPECT_EQ(wal.rc, 1);
  EXPECT_TRUE(Contains(wal.err, "--wal-dir is not supported")) << wal.Describe();
}

}  // namespace
}  // namespace etcdw::testing
