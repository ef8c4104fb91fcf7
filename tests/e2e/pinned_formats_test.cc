// Pinned formats: data written by an earlier build must still read as it was written. The data
// directories in tests/e2e/testdata were made by make_etcdw_datadir.sh (beside them) with the
// first pinned build: etcdw_datadir_v1.tar.gz left by `kill -9` (store table files and the Raft
// log's entries after them, leases, the auth state), etcdw_datadir_v1_stopped.tar.gz the same
// after a clean stop (the store flushed, the key index saved). A change of any of these formats
// that cannot read them fails here; it must keep reading them or migrate them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "e2e_util.h"
#include "servers.h"
#include "support/files.h"

namespace etcdw::testing {
namespace {

namespace fs = std::filesystem;

std::string TestData(const std::string& name) {
  return std::string(ETCDW_E2E_TESTDATA) + "/" + name;
}

// Header fields a restart changes (the term: the member elects itself again).
nlohmann::json WithoutTerm(nlohmann::json j) {
  if (j.contains("header")) j["header"].erase("raft_term");
  return j;
}

// The parameter: the tarball's name.
class PinnedFormatsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string cmd =
        "tar --sparse -xzf '" + TestData(GetParam()) + "' -C '" + member_.dir() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    fs::rename(member_.dir() + "/etcdw", member_.data_dir());
    ASSERT_TRUE(member_.Start()) << member_.log();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "--- etcd-wrapper log ---\n" << member_.log();
  }
  CmdResult AsRoot(std::vector<std::string> args) {
    args.insert(args.begin(), "--user=root:rootpw");
    return Etcdctl(member_, args);
  }

  Member member_{Member::Kind::kEtcdWrapper, "golden"};
};

TEST_P(PinnedFormatsTest, TheFirstDataDirectoryFormatReadsAsItWasWritten) {
  // The key index: rebuilt after the kill, loaded as saved after the stop.
  const bool stopped = GetParam().find("stopped") != std::string::npos;
  EXPECT_NE(member_.log().find(stopped ? "loaded the copy saved at the last stop"
                                       : "rebuilt from the keys"),
            std::string::npos);

  // Every key, its history and the compaction, as answered before the kill.
  auto now = AsRoot({"get", "", "--prefix", "-w", "json"});
  ASSERT_EQ(now.rc, 0) << now.Describe();
  EXPECT_EQ(WithoutTerm(ParseJson(now.out)),
            WithoutTerm(ParseJson(testsupport::ReadFile(TestData("etcdw_expected_get.json")))));
  auto then = AsRoot({"get", "", "--prefix", "--rev=30", "-w", "json"});
  ASSERT_EQ(then.rc, 0) << then.Describe();
  EXPECT_EQ(WithoutTerm(ParseJson(then.out)),
            WithoutTerm(ParseJson(testsupport::ReadFile(TestData("etcdw_expected_get_rev.json")))));
  auto compacted = AsRoot({"get", "a", "--rev=20"});
  EXPECT_NE(compacted.rc, 0);
  EXPECT_EQ(ErrorLine(compacted.err),
            "Error: etcdserver: mvcc: required revision has been compacted");

  // The same member of the same cluster.
  auto status = AsRoot({"endpoint", "status", "-w", "json"});
  ASSERT_EQ(status.rc, 0) << status.Describe();
  auto was = ParseJson(testsupport::ReadFile(TestData("etcdw_expected_status.json")))[0];
  auto is = ParseJson(status.out)[0];
  for (const char* field : {"cluster_id", "member_id", "revision"}) {
    EXPECT_EQ(is["Status"]["header"][field], was["Status"]["header"][field]) << field;
  }
  EXPECT_EQ(is["Status"]["leader"], was["Status"]["leader"]);
  EXPECT_GE(is["Status"]["raftAppliedIndex"], was["Status"]["raftAppliedIndex"]);

  // Users, roles, permissions and leases; passwords and permissions still hold.
  std::string auth;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"user", "list"},
                                             {"role", "list"},
                                             {"role", "get", "r1"},
                                             {"user", "get", "alice"},
                                             {"lease", "list"}}) {
    auto r = AsRoot(args);
    EXPECT_EQ(r.rc, 0) << r.Describe();
    auth += r.out;
  }
  EXPECT_EQ(auth, testsupport::ReadFile(TestData("etcdw_expected_auth.txt")));
  auto readable = Etcdctl(member_, {"--user=alice:alicepw", "get", "k2"});  // deleted: empty
  EXPECT_EQ(readable.rc, 0) << readable.Describe();
  auto writable = Etcdctl(member_, {"--user=alice:alicepw", "put", "/a/x", "1"});
  EXPECT_EQ(writable.rc, 0) << writable.Describe();
  auto denied = Etcdctl(member_, {"--user=alice:alicepw", "get", "k3"});
  EXPECT_EQ(ErrorLine(denied.err), "Error: etcdserver: permission denied");
  auto unauthenticated = Etcdctl(member_, {"get", "k2"});
  EXPECT_EQ(ErrorLine(unauthenticated.err), "Error: etcdserver: user name is empty");

  // And the member goes on writing where it stopped (alice's put was the first).
  auto put = AsRoot({"put", "after", "restart", "-w", "json"});
  ASSERT_EQ(put.rc, 0) << put.Describe();
  EXPECT_EQ(ParseJson(put.out)["header"]["revision"],
            was["Status"]["header"]["revision"].get<int64_t>() + 2);
}

// The backups of the first pinned build (make_etcdw_backups.sh): a full snapshot and two delta
// snapshots per store, uncompressed and gzip-compressed, restored by today's `etcdbrctl restore`
// and served by today's etcd-wrapper hold each key as it was, revisions included.
TEST(PinnedBackupFormatsTest, TheFirstBackupFormatRestores) {
  for (const std::string store : {"plain", "gzip"}) {
    SCOPED_TRACE(store);
    Member m(Member::Kind::kEtcdWrapper, "restored");
    const std::string cmd =
        "tar -xzf '" + TestData("etcdw_backups_v1.tar.gz") + "' -C '" + m.dir() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<std::string> argv = {EtcdbrctlBinary(),
                                     "restore",
                                     "--data-dir=" + m.data_dir(),
                                     "--storage-provider=Local",
                                     "--store-container=" + m.dir() + "/stores/" + store,
                                     "--store-prefix=golden",
                                     "--name=restored",
                                     "--initial-cluster=restored=" + m.peer_url(),
                                     "--initial-advertise-peer-urls=" + m.peer_url(),
                                     "--snapstore-temp-directory=" + m.dir() + "/tmp",
                                     "--restoration-temp-snapshots-dir=" + m.dir() + "/rtmp"};
    CmdResult restored;
    restored.rc = RunCommandSplit(argv, &restored.out, &restored.err, std::chrono::seconds(60));
    ASSERT_EQ(restored.rc, 0) << restored.Describe();
    ASSERT_TRUE(m.Start()) << m.log();
    auto got = Etcdctl(m, {"get", store + "/", "--prefix", "-w", "json"});
    ASSERT_EQ(got.rc, 0) << got.Describe();
    auto want = ParseJson(
        testsupport::ReadFile(TestData("etcdw_backups_expected_" + store + ".json")))["kvs"];
    ASSERT_EQ(want.size(), 4u);  // before/3, delta/a, delta/b, delta/leased
    // Delta snapshots are replayed as plain puts, without their leases, as etcd-backup-restore
    // replays them.
    for (auto& kv : want) kv.erase("lease");
    EXPECT_EQ(ParseJson(got.out)["kvs"], want);
  }
}

INSTANTIATE_TEST_SUITE_P(Killed, PinnedFormatsTest, ::testing::Values("etcdw_datadir_v1.tar.gz"));
INSTANTIATE_TEST_SUITE_P(Stopped, PinnedFormatsTest,
                         ::testing::Values("etcdw_datadir_v1_stopped.tar.gz"));

}  // namespace
}  // namespace etcdw::testing
