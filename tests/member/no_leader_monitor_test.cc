#include "etcdw/member/no_leader_monitor.h"

#include <gtest/gtest.h>

#include <vector>

namespace etcdw::member {
namespace {

using std::chrono::milliseconds;

class NoLeaderMonitorTest : public ::testing::Test {
 protected:
  // Election timeout 1 s: streams go after 2 s without a leader.
  NoLeaderMonitor monitor_{milliseconds(2000)};
  common::ManualClock clock_;
  std::vector<int> cancelled_;

  NoLeaderMonitor::Id Stream(int n) {
    return monitor_.Register([this, n] { cancelled_.push_back(n); });
  }
  // The ticker's samples every 100 ms from now until `until` later, with `leader`.
  void Ticks(milliseconds until, uint64_t leader) {
    const auto end = clock_.Now() + until;
    while (clock_.Now() < end) {
      clock_.Advance(milliseconds(100));
      monitor_.Observe(clock_.Now(), leader);
    }
  }
};

TEST_F(NoLeaderMonitorTest, StreamsAreCancelledAfterThePeriodWithoutALeader) {
  Stream(1);
  Stream(2);
  Ticks(milliseconds(1000), 7);
  EXPECT_TRUE(cancelled_.empty());
  monitor_.Observe(clock_.Now(), 0);  // the leader is lost here
  Ticks(milliseconds(1900), 0);
  EXPECT_TRUE(cancelled_.empty()) << "1.9 s without a leader";
  clock_.Advance(milliseconds(100));
  EXPECT_EQ(monitor_.Observe(clock_.Now(), 0), 2u);
  EXPECT_EQ(cancelled_, (std::vector<int>{1, 2}));
  EXPECT_EQ(monitor_.Registered(), 0u);
  // Cancelled once: a later check without a leader has nothing left to cancel.
  clock_.Advance(milliseconds(100));
  EXPECT_EQ(monitor_.Observe(clock_.Now(), 0), 0u);
  EXPECT_EQ(cancelled_.size(), 2u);
}

TEST_F(NoLeaderMonitorTest, AnElectionShorterThanThePeriodCancelsNothing) {
  Stream(1);
  // Leaderless spells of 1.9 s, each ended by a new leader: the count starts again each time.
  for (int i = 0; i < 5; ++i) {
    Ticks(milliseconds(1900), 0);
    Ticks(milliseconds(100), 3);
  }
  EXPECT_TRUE(cancelled_.empty());
  EXPECT_EQ(monitor_.Registered(), 1u);
}

TEST_F(NoLeaderMonitorTest, TheSpellIsCountedFromTheFirstSampleWithoutALeader) {
  Stream(1);
  monitor_.Observe(clock_.Now(), 0);
  // A ticker that was late: one sample 2 s later is enough, the spell began at the first.
  clock_.Advance(milliseconds(2000));
  EXPECT_EQ(monitor_.Observe(clock_.Now(), 0), 1u);
}

TEST_F(NoLeaderMonitorTest, UnregisteredStreamsAreNotCancelledAndLaterOnesAre) {
  const auto gone = Stream(1);
  Stream(2);
  monitor_.Unregister(gone);
  monitor_.Unregister(gone);     // twice: ignored
  Ticks(milliseconds(2100), 0);  // samples from +100 ms: the spell is 2 s long at +2.1 s
  EXPECT_EQ(cancelled_, std::vector<int>{2});
  // A stream registered while the member is still without a leader goes at the next check.
  Stream(3);
  Ticks(milliseconds(100), 0);
  EXPECT_EQ(cancelled_, (std::vector<int>{2, 3}));
  // Once a leader is back, a new stream waits for a whole new spell.
  Ticks(milliseconds(100), 5);
  Stream(4);
  Ticks(milliseconds(1900), 0);
  EXPECT_EQ(cancelled_.size(), 2u);
  Ticks(milliseconds(200), 0);
  EXPECT_EQ(cancelled_, (std::vector<int>{2, 3, 4}));
}

}  // namespace
}  // namespace etcdw::member
