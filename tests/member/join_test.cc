// The checks a joining member makes on the cluster's answer (etcd's ValidateClusterAndAssignIDs).
#include "etcdw/member/join.h"

#include <gtest/gtest.h>

namespace etcdw::member {
namespace {

common::EtcdConfig Config(const std::string& name, const std::string& advertise,
                          const std::string& initial_cluster) {
  auto cfg = common::ParseConfig("name: " + name + "\ninitial-advertise-peer-urls: " + advertise +
                                     "\ninitial-cluster: " + initial_cluster +
                                     "\ninitial-cluster-state: existing\n",
                                 "test");
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
  return *cfg;
}

std::vector<cluster::Member> Remote() {
  return {cluster::Member{0x11, "a", {"http://127.0.0.1:2380"}, {}, false},
          cluster::Member{0x22, "b", {"http://127.0.0.2:2380"}, {}, false},
          cluster::Member{0x33, "", {"http://127.0.0.3:2380"}, {}, true}};
}

const char kCluster[] = "a=http://127.0.0.1:2380,b=http://127.0.0.2:2380,c=http://127.0.0.3:2380";

TEST(JoinTest, NewMemberTakesTheIdTheClusterGaveIt) {
  auto info = MatchClusterToConfig(Config("c", "http://127.0.0.3:2380", kCluster), 0xabc, Remote());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->cluster_id, 0xabcu);
  EXPECT_EQ(info->local_id, 0x33u);
  EXPECT_EQ(info->members.size(), 3u);
}

TEST(JoinTest, MemberCountMustMatchInitialCluster) {
  auto info = MatchClusterToConfig(
      Config("c", "http://127.0.0.3:2380", "b=http://127.0.0.2:2380,c=http://127.0.0.3:2380"),
      0xabc, Remote());
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), Code::kInvalidArgument);
  EXPECT_NE(info.status().message().find("member count is unequal"), std::string::npos)
      << info.status().ToString();
}

TEST(JoinTest, EveryClusterMemberMustBeInInitialClusterWithItsPeerUrls) {
  auto info = MatchClusterToConfig(
      Config("c", "http://127.0.0.3:2380",
             "a=http://127.0.0.9:2380,b=http://127.0.0.2:2380,c=http://127.0.0.3:2380"),
      0xabc, Remote());
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find(
                "no match found for existing member (0000000000000011, [http://127.0.0.1:2380])"),
            std::string::npos)
      << info.status().ToString();
}

TEST(JoinTest, MemberNotAddedYetIsToldToAddItFirst) {
  auto remote = Remote();
  remote[2].peer_urls = {"http://127.0.0.4:2380"};
  auto info = MatchClusterToConfig(
      Config("c", "http://127.0.0.3:2380",
             "a=http://127.0.0.1:2380,b=http://127.0.0.2:2380,c=http://127.0.0.4:2380"),
      0xabc, remote);
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("member add"), std::string::npos)
      << info.status().ToString();
}

TEST(JoinTest, UnreachableClusterIsReportedWithTheUrlsTried) {
  // Port 1 on loopback refuses connections at once.
  auto info = DiscoverCluster(
      Config("c", "http://127.0.0.3:2380", "a=http://127.0.0.1:1,c=http://127.0.0.3:2380"), 2,
      std::chrono::milliseconds(10));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), Code::kUnavailable);
  EXPECT_NE(info.status().message().find("cannot fetch cluster info from peer urls"),
            std::string::npos);
  EXPECT_NE(info.status().message().find("127.0.0.1:1"), std::string::npos)
      << info.status().ToString();
}

}  // namespace
}  // namespace etcdw::member
