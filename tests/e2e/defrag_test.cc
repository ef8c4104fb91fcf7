// The sidecar's rolling defragmentation against 3-member clusters of etcd-wrapper and of etcd
// 3.4: followers first, the leader last, nothing touched while a member is down.
#include <gtest/gtest.h>

#include <algorithm>

#include "e2e_util.h"
#include "etcdw/common/clock.h"
#include "etcdw/sidecar/defragmenter.h"

namespace etcdw::testing {
namespace {

using namespace std::chrono_literals;

class DefragTest : public ::testing::TestWithParam<Member::Kind> {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<TestCluster>(3, GetParam());
    ASSERT_TRUE(cluster_->StartAll()) << cluster_->LogTails();
    leader_ = cluster_->WaitForLeader();
    ASSERT_GE(leader_, 0) << cluster_->LogTails();
  }
  sidecar::EtcdConnectionOptions Options() {
    sidecar::EtcdConnectionOptions o;
    o.endpoints = {cluster_->member(0).url()};
    o.connection_timeout = 5s;
    o.defrag_timeout = 30s;
    return o;
  }
  std::unique_ptr<TestCluster> cluster_;
  int leader_ = -1;
};

TEST_P(DefragTest, FollowersOneByOneThenTheLeader) {
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(cluster_->member(0).client().Put("k" + std::to_string(i), "v").ok());
  }
  auto done = sidecar::DefragmentCluster(Options());
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  ASSERT_EQ(done->size(), 3u);
  EXPECT_EQ(done->back(), cluster_->member(leader_).url());
  std::vector<std::string> all = *done, want;
  for (int i = 0; i < 3; ++i) want.push_back(cluster_->member(i).url());
  std::sort(all.begin(), all.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(all, want);
  // The data is intact.
  etcdserverpb::RangeResponse r;
  ASSERT_TRUE(cluster_->member(leader_).client().Get("k", &r, "l").ok());
  EXPECT_EQ(r.kvs_size(), 200);
}

TEST_P(DefragTest, NothingIsTouchedWhileAMemberIsDown) {
  const int follower = leader_ == 2 ? 1 : 2;
  cluster_->member(follower).Kill();
  auto done = sidecar::DefragmentCluster(Options());
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.status().message().find("not in full health"), std::string::npos)
      << done.status().ToString();
  EXPECT_NE(done.status().message().find(cluster_->member(follower).url()), std::string::npos)
      << done.status().ToString();
}

// The scheduler in-process on a ManualClock, with gardener's timings (the first round a minute
// after the cron time, retries every minute): rounds fail while a member is down and are
// retried a minute later each, until one succeeds with the member back; then it waits for the
// next cron time.
TEST_P(DefragTest, TheScheduleRunsRoundsAndRetriesUntilOneSucceeds) {
  const int follower = leader_ == 2 ? 1 : 2;
  cluster_->member(follower).Kill();
  auto schedule = sidecar::CronSchedule::Parse("*/30 * * * *");
  ASSERT_TRUE(schedule.ok());
  common::ManualClock clock;
  const auto first = *schedule->Next(clock.WallNow()) + 1min;
  sidecar::DefragScheduler s(Options(), *schedule, 1min, 1min, clock);
  s.Start();
  ASSERT_TRUE(WaitUntil([&] { return s.next_round().has_value(); }, 10s));
  EXPECT_EQ(*s.next_round(), first);

  // Each round fails (the cluster is not in full health) and waits a minute for its retry.
  for (int failed = 1; failed <= 2; ++failed) {
    SCOPED_TRACE(failed);
    clock.Advance(*s.next_round() - clock.WallNow());
    ASSERT_TRUE(
        WaitUntil([&] { return s.rounds_failed() >= failed && s.next_round().has_value(); }, 30s));
    EXPECT_EQ(s.rounds_failed(), failed);
    EXPECT_EQ(s.rounds_succeeded(), 0);
    EXPECT_EQ(*s.next_round(), first + failed * 1min);
  }

  // With the member back, a retry succeeds (more may fail while it catches up: each is retried
  // when the clock reaches it).
  ASSERT_TRUE(cluster_->member(follower).Start()) << cluster_->member(follower).log();
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto due = s.next_round();  // read before the count: a retry, unless succeeded
        if (s.rounds_succeeded() >= 1) return true;
        if (due && *due > clock.WallNow()) clock.Advance(*due - clock.WallNow());
        return false;
      },
      60s))
      << s.rounds_failed() << " rounds failed";
  EXPECT_EQ(s.rounds_succeeded(), 1);
  // Then the next round is the schedule's, not a retry.
  ASSERT_TRUE(WaitUntil([&] { return s.next_round().has_value(); }, 10s));
  EXPECT_EQ(*s.next_round(), *schedule->Next(clock.WallNow()) + 1min);
  s.Stop();
}

INSTANTIATE_TEST_SUITE_P(Kinds, DefragTest,
                         ::testing::Values(Member::Kind::kEtcdWrapper, Member::Kind::kEtcd),
                         [](const auto& info) {
                           return std::string(info.param == Member::Kind::kEtcd ? "Etcd"
                                                                                : "EtcdWrapper");
                         });

}  // namespace
}  // namespace etcdw::testing
