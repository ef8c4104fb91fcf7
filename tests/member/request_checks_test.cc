#include "etcdw/member/request_checks.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "etcdw/common/etcd_errors.h"

namespace etcdw::member {
namespace {

google::protobuf::RepeatedPtrField<std::string> PeerUrlsOf(
    std::initializer_list<const char*> urls) {
  google::protobuf::RepeatedPtrField<std::string> out;
  for (const char* u : urls) out.Add(u);
  return out;
}

TEST(CheckPeerUrlsTest, NoneOrOneThatDoesNotParseIsBadUrls) {
  EXPECT_EQ(CheckPeerUrls(PeerUrlsOf({})).status(), errors::MemberBadURLs());
  for (const char* bad : {"", "10.0.0.1:2380", "ftp://10.0.0.1:2380", "http://10.0.0.1",
                          "http://10.0.0.1:2380/peer", "http://[::1:2380", "://h:1"}) {
    EXPECT_EQ(CheckPeerUrls(PeerUrlsOf({"http://10.0.0.2:2380", bad})).status(),
              errors::MemberBadURLs())
        << bad;
  }
}

// etcd's types.NewURLs trims blanks and sorts the URLs; the member is recorded and answered so.
TEST(CheckPeerUrlsTest, TrimmedWrittenAgainAndSorted) {
  auto urls = CheckPeerUrls(
      PeerUrlsOf({" https://m2.example:2380\n", "http://m1:2380", "http://[::1]:2380"}));
  ASSERT_TRUE(urls.ok()) << urls.status().ToString();
  EXPECT_EQ(*urls, (std::vector<std::string>{"http://[::1]:2380", "http://m1:2380",
                                             "https://m2.example:2380"}));
  // Duplicates are kept, as NewURLs keeps them.
  EXPECT_EQ(CheckPeerUrls(PeerUrlsOf({"http://a:1", "http://a:1"})).value().size(), 2u);
}

}  // namespace
}  // namespace etcdw::member
