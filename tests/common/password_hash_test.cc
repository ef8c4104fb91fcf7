// bcrypt password hashes (common/password_hash.h) as Go's package writes and checks them.
#include "etcdw/common/password_hash.h"

#include <gtest/gtest.h>

namespace etcdw::common {
namespace {

TEST(PasswordHashTest, HashesAreBcryptAsGoWritesThemAndCompareAsItDoes) {
  auto h = HashPassword("s3cret", 4);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->substr(0, 7), "$2a$04$") << *h;
  EXPECT_EQ(h->size(), 60u);
  EXPECT_TRUE(PasswordMatches(*h, "s3cret"));
  EXPECT_FALSE(PasswordMatches(*h, "s3creT"));
  EXPECT_NE(*HashPassword("s3cret", 4), *h);  // salted
  // An invalid cost is replaced by etcd's default, 10.
  EXPECT_EQ(HashPassword("x", 99)->substr(0, 7), "$2a$10$");
  // The published test vectors of OpenBSD's bcrypt, as Go's package checks them.
  EXPECT_TRUE(
      PasswordMatches("$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", "U*U"));
  EXPECT_TRUE(
      PasswordMatches("$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK", "U*U*"));
  EXPECT_FALSE(
      PasswordMatches("$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", "U*"));
  EXPECT_FALSE(PasswordMatches("", "x"));
  EXPECT_FALSE(PasswordMatches("plain", "plain"));
}

}  // namespace
}  // namespace etcdw::common
