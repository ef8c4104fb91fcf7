#include "etcdw/server/lessor.h"

#include <gtest/gtest.h>

namespace etcdw::server {
namespace {

TEST(LessorTest, ExpiresByInjectedClock) {
  common::ManualClock clock;
  Lessor l(clock);
  l.Promote({}, std::chrono::milliseconds(0));
  l.OnGranted(7, 10);
  EXPECT_TRUE(l.TakeExpired(10).empty());
  clock.Advance(std::chrono::seconds(9));
  EXPECT_TRUE(l.TakeExpired(10).empty());
  clock.Advance(std::chrono::seconds(2));
  EXPECT_EQ(l.TakeExpired(10), std::vector<int64_t>{7});
  EXPECT_TRUE(l.TakeExpired(10).empty());  // handed out once
}

}  // namespace
}  // namespace etcdw::server
