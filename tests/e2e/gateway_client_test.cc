// A real program that speaks only etcd's gRPC gateway, python3-etcd3gw (Debian's), against
// etcd-wrapper: puts, gets, transactions, a lease kept alive and revoked, a watch, and its Lock
// (tests/e2e/scripts/etcd3gw_client.py), on a single member and through each member of a
// 3-member cluster.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "process.h"
#include "servers.h"

namespace etcdw::testing {
namespace {

// Runs the etcd3gw script against 127.0.0.1:`port`, its keys under `prefix`; its output, "ok\n"
// when every check passed.
std::string RunEtcd3gw(int port, const std::string& prefix) {
  std::string out;
  const int rc =
      RunCommand({"/usr/bin/python3", std::string(ETCDW_E2E_SCRIPTS) + "/etcd3gw_client.py",
                  "127.0.0.1", std::to_string(port), prefix},
                 &out, std::chrono::seconds(90));
  return rc == 0 ? out : "exit " + std::to_string(rc) + ": " + out;
}

TEST(GatewayClientTest, Etcd3gwAgainstASingleMember) {
  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start()) << m.log();
  EXPECT_EQ(RunEtcd3gw(m.client_port(), "gw"), "ok\n") << m.log();
}

TEST(GatewayClientTest, Etcd3gwThroughEachMemberOfAThreeMemberCluster) {
  TestCluster cluster(3);
  ASSERT_TRUE(cluster.StartAll()) << cluster.LogTails();
  ASSERT_GE(cluster.WaitForLeader(), 0) << cluster.LogTails();
  for (int i = 0; i < cluster.size(); ++i) {
    EXPECT_EQ(RunEtcd3gw(cluster.member(i).client_port(), "gw" + std::to_string(i)), "ok\n")
        << "member " << i << "\n"
        << cluster.LogTails();
  }
}

}  // namespace
}  // namespace etcdw::testing
