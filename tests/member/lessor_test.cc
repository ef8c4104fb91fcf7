#include "etcdw/member/lessor.h"

#include <gtest/gtest.h>

namespace etcdw::member {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class LessorTest : public ::testing::Test {
 protected:
  common::ManualClock clock_;
  Lessor lessor_{clock_};
};

TEST_F(LessorTest, ExpiresByInjectedClock) {
  lessor_.Promote({}, milliseconds(0));
  lessor_.OnGranted(7, 10);
  EXPECT_TRUE(lessor_.TakeExpired(10).empty());
  clock_.Advance(seconds(9));
  EXPECT_TRUE(lessor_.TakeExpired(10).empty());
  clock_.Advance(seconds(2));
  EXPECT_EQ(lessor_.TakeExpired(10), std::vector<int64_t>{7});
  EXPECT_TRUE(lessor_.TakeExpired(10).empty());  // handed out once
  lessor_.Requeue(7);
  EXPECT_EQ(lessor_.TakeExpired(10), std::vector<int64_t>{7});  // again after a failed revoke
  lessor_.OnRevoked(7);
  EXPECT_TRUE(lessor_.TakeExpired(10).empty());
  EXPECT_FALSE(lessor_.RemainingSeconds(7).has_value());
}

TEST_F(LessorTest, RenewResetsExpiryToFullTtl) {
  lessor_.Promote({}, milliseconds(0));
  lessor_.OnGranted(1, 10);
  clock_.Advance(seconds(8));
  EXPECT_EQ(lessor_.RemainingSeconds(1), 2);
  auto ttl = lessor_.Renew(1);
  ASSERT_TRUE(ttl.ok());
  EXPECT_EQ(ttl.value(), 10);
  EXPECT_EQ(lessor_.RemainingSeconds(1), 10);
  clock_.Advance(seconds(9));
  EXPECT_TRUE(lessor_.TakeExpired(10).empty());
}

TEST_F(LessorTest, RenewOfUnknownOrExpiredLeaseIsNotFound) {
  lessor_.Promote({}, milliseconds(0));
  EXPECT_EQ(lessor_.Renew(42).status().code(), Code::kNotFound);
  lessor_.OnGranted(5, 3);
  clock_.Advance(seconds(4));
  // Expired but not yet revoked: renewing must not bring it back.
  EXPECT_EQ(lessor_.Renew(5).status().code(), Code::kNotFound);
  EXPECT_EQ(lessor_.TakeExpired(10), std::vector<int64_t>{5});
}

TEST_F(LessorTest, PromoteRefreshesEveryLeaseWithExtension) {
  lessor_.Promote({{1, 5, 0}, {2, 100, 0}, {3, 100, 20}}, seconds(1));
  clock_.Advance(seconds(5));
  EXPECT_TRUE(lessor_.TakeExpired(10).empty());  // 5 s TTL + 1 s extension
  clock_.Advance(milliseconds(1001));
  EXPECT_EQ(lessor_.TakeExpired(10), std::vector<int64_t>{1});
  // A checkpointed remaining TTL resumes instead of the full TTL.
  clock_.Advance(seconds(15));
  EXPECT_EQ(lessor_.TakeExpired(10), std::vector<int64_t>{3});
}

TEST_F(LessorTest, NonPrimaryNeverExpiresAndRefusesRenew) {
  lessor_.OnGranted(9, 2);
  clock_.Advance(seconds(100));
  EXPECT_TRUE(lessor_.TakeExpired(10).empty());
  EXPECT_EQ(lessor_.Renew(9).status().code(), Code::kFailedPrecondition);
  lessor_.Promote({{9, 2, 0}}, milliseconds(0));
  lessor_.Demote();
  clock_.Advance(seconds(100));
  EXPECT_TRUE(lessor_.TakeExpired(10).empty());
}

TEST_F(LessorTest, ListsByExpiryAndBoundsHandOut) {
  lessor_.Promote({}, milliseconds(0));
  lessor_.OnGranted(30, 30);
  lessor_.OnGranted(10, 10);
  lessor_.OnGranted(20, 20);
  EXPECT_EQ(lessor_.IdsByExpiry(), (std::vector<int64_t>{10, 20, 30}));
  clock_.Advance(seconds(31));
  EXPECT_EQ(lessor_.TakeExpired(2), (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(lessor_.TakeExpired(2), (std::vector<int64_t>{30}));
}

}  // namespace
}  // namespace etcdw::member
