#include "etcdw/common/url.h"

#include <gtest/gtest.h>

namespace etcdw::common {
namespace {

TEST(UrlTest, ParsesHostAndPort) {
  auto u = ParseUrl("http://127.0.0.1:2379");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 2379);
  EXPECT_FALSE(u->tls());
  EXPECT_EQ(u->HostPort(), "127.0.0.1:2379");
  EXPECT_EQ(u->ToString(), "http://127.0.0.1:2379");
}

TEST(UrlTest, HttpsMeansTls) {
  auto u = ParseUrl("https://etcd-main-local:2379");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->tls());
}

TEST(UrlTest, TrimsBlanksAndLowercasesScheme) {
  auto u = ParseUrl(" \tHTTPS://Example.com:443\n");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "Example.com");
  EXPECT_EQ(u->ToString(), "https://Example.com:443");
}

TEST(UrlTest, Ipv6HostsKeepBracketsOnlyInText) {
  auto u = ParseUrl("http://[::1]:2380");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 2380);
  EXPECT_EQ(u->HostPort(), "[::1]:2380");
  EXPECT_EQ(u->ToString(), "http://[::1]:2380");
  auto back = ParseUrl(u->ToString());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *u);
}

TEST(UrlTest, EmptyHostMeansEveryInterface) {
  auto u = ParseUrl("http://:2379");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "");
  EXPECT_EQ(u->HostPort(), ":2379");
}

TEST(UrlTest, PortBounds) {
  auto zero = ParseUrl("http://a:0");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->port, 0);
  auto max = ParseUrl("http://a:65535");
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->port, 65535);
}

TEST(UrlTest, Errors) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"ftp://a:1", "URL scheme must be http or https: ftp://a:1"},
      {"localhost:2379", "URL scheme must be http or https: localhost:2379"},
      {"", "URL scheme must be http or https: "},
      {"unix://sock:1", "unix socket URLs are not supported: unix://sock:1"},
      {"unixs://sock:1", "unix socket URLs are not supported: unixs://sock:1"},
      {"http://a:1/x", "URL must not contain a path: http://a:1/x"},
      {"http://a:1/", "URL must not contain a path: http://a:1/"},
      {"http://a:1?q=1", "URL must not contain a query or fragment: http://a:1?q=1"},
      {"http://a:1#f", "URL must not contain a query or fragment: http://a:1#f"},
      {"http://u@a:1", "URL must not contain user information: http://u@a:1"},
      {"http://a", "URL address does not have the form \"host:port\": http://a"},
      {"http://::1:2379", "URL address does not have the form \"host:port\": http://::1:2379"},
      {"http://[::1]", "URL address does not have the form \"host:port\": http://[::1]"},
      {"http://[::1:2379", "URL address does not have the form \"host:port\": http://[::1:2379"},
      {"http://a:", "URL port is not a number between 0 and 65535: http://a:"},
      {"http://a:65536", "URL port is not a number between 0 and 65535: http://a:65536"},
      {"http://a:-1", "URL port is not a number between 0 and 65535: http://a:-1"},
      {"http://a:12x", "URL port is not a number between 0 and 65535: http://a:12x"},
      {"http://a:99999999999",
       "URL port is not a number between 0 and 65535: http://a:99999999999"},
  };
  for (const auto& c : cases) {
    auto u = ParseUrl(c.text);
    ASSERT_FALSE(u.ok()) << c.text;
    EXPECT_EQ(u.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(u.status().message(), c.message);
  }
}

TEST(UrlListTest, CommaSeparated) {
  auto l = ParseUrlList("http://a:1, https://b:2 ,http://[::1]:3");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[1].ToString(), "https://b:2");
  EXPECT_EQ(JoinUrls(*l), "http://a:1,https://b:2,http://[::1]:3");
  EXPECT_EQ(JoinUrls(*l, " "), "http://a:1 https://b:2 http://[::1]:3");
  EXPECT_EQ(JoinUrls({}), "");
}

TEST(UrlListTest, Errors) {
  auto empty = ParseUrlList("  ");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "no valid URLs given");
  auto hole = ParseUrlList("http://a:1,,http://b:2");
  ASSERT_FALSE(hole.ok());
  EXPECT_EQ(hole.status().message(), "empty URL in list \"http://a:1,,http://b:2\"");
  auto bad = ParseUrlList("http://a:1,ftp://b:2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "URL scheme must be http or https: ftp://b:2");
}

TEST(SplitTest, TrimsAndKeepsEmptyParts) {
  EXPECT_EQ(Split("a, b ,,c", ','), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(Split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(Split("x=1", '='), (std::vector<std::string>{"x", "1"}));
  EXPECT_EQ(Split(",", ','), (std::vector<std::string>{"", ""}));
}

TEST(TrimTest, BlanksOnly) {
  EXPECT_EQ(Trim(" \t\r\n a b \n"), "a b");
  EXPECT_EQ(Trim("   "), "");
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(Trim("x"), "x");
}

}  // namespace
}  // namespace etcdw::common
