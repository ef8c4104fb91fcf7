// A second real program that speaks only etcd's gRPC gateway: Patroni's etcd3 DCS driver
// (Debian's patroni 3.0.2), driven by tests/e2e/scripts/patroni_dcs.py. Two Patroni instances
// initialise a cluster, race for the leader key, hand it over by deletion and by lease expiry,
// and read the cluster back through their watch-fed caches. The same script runs against etcd
// 3.4 and etcd-wrapper (a single member, a 3-member cluster); it checks the outcomes itself and
// its transcripts must be equal.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "process.h"
#include "servers.h"

namespace etcdw::testing {
namespace {

// Runs the Patroni script for Patroni cluster `scope` against the client URLs `urls`. Returns
// its transcript, ending "ok\n" when every check passed; on failure, "exit N: " and everything
// it printed. Its stderr (Patroni's warnings) goes to `log`.
std::string RunPatroniDcs(const std::string& scope, const std::vector<std::string>& urls,
                          std::string* log) {
  std::vector<std::string> argv = {"/usr/bin/python3",
                                   std::string(ETCDW_E2E_SCRIPTS) + "/patroni_dcs.py", scope};
  argv.insert(argv.end(), urls.begin(), urls.end());
  std::string out;
  const int rc = RunCommandSplit(argv, &out, log, std::chrono::seconds(90));
  return rc == 0 ? out : "exit " + std::to_string(rc) + ": " + out + *log;
}

// The client URLs of every member of `cluster`.
std::vector<std::string> Urls(TestCluster& cluster) {
  std::vector<std::string> urls;
  for (int i = 0; i < cluster.size(); ++i) urls.push_back(cluster.member(i).url());
  return urls;
}

bool EndsWithOk(const std::string& transcript) {
  return transcript.size() >= 3 && transcript.compare(transcript.size() - 3, 3, "ok\n") == 0;
}

TEST(PatroniClientTest, SingleMemberBehavesAsEtcd) {
  std::string ours;
  std::string ours_log;
  {
    Member m(Member::Kind::kEtcdWrapper);
    ASSERT_TRUE(m.Start()) << m.log();
    ours = RunPatroniDcs("single", {m.url()}, &ours_log);
    ASSERT_TRUE(EndsWithOk(ours)) << ours << m.log();
  }
  Member etcd(Member::Kind::kEtcd);
  ASSERT_TRUE(etcd.Start()) << etcd.log();
  std::string etcd_log;
  const std::string theirs = RunPatroniDcs("single", {etcd.url()}, &etcd_log);
  ASSERT_TRUE(EndsWithOk(theirs)) << theirs << etcd.log();
  EXPECT_EQ(ours, theirs) << "Patroni's warnings, etcd-wrapper:\n"
                          << ours_log << "etcd:\n"
                          << etcd_log;
}

TEST(PatroniClientTest, ThreeMemberClusterBehavesAsEtcd) {
  std::string ours;
  std::string ours_log;
  {
    TestCluster cluster(3);
    ASSERT_TRUE(cluster.StartAll()) << cluster.LogTails();
    ASSERT_GE(cluster.WaitForLeader(), 0) << cluster.LogTails();
    ours = RunPatroniDcs("three", Urls(cluster), &ours_log);
    ASSERT_TRUE(EndsWithOk(ours)) << ours << cluster.LogTails();
  }
  TestCluster etcd(3, Member::Kind::kEtcd);
  ASSERT_TRUE(etcd.StartAll()) << etcd.LogTails();
  ASSERT_GE(etcd.WaitForLeader(), 0) << etcd.LogTails();
  std::string etcd_log;
  const std::string theirs = RunPatroniDcs("three", Urls(etcd), &etcd_log);
  ASSERT_TRUE(EndsWithOk(theirs)) << theirs << etcd.LogTails();
  EXPECT_EQ(ours, theirs) << "Patroni's warnings, etcd-wrapper:\n"
                          << ours_log << "etcd:\n"
                          << etcd_log;
}

}  // namespace
}  // namespace etcdw::testing
