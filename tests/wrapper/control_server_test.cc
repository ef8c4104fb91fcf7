#include "etcdw/wrapper/control_server.h"

#include <gtest/gtest.h>

namespace etcdw::wrapper {
namespace {

common::HttpRequest Req(const std::string& method, const std::string& path, bool loopback = true,
                        bool verified = false) {
  common::HttpRequest r;
  r.method = method;
  r.path = path;
  r.remote_address = loopback ? "127.0.0.1" : "10.0.0.7";
  r.remote_is_loopback = loopback;
  r.client_cert_verified = verified;
  return r;
}

TEST(ControlServerTest, ReadyzAnswersForAnyMethodWithAnEmptyBody) {
  int stops = 0;
  auto stop = [&] { ++stops; };
  for (const char* m : {"GET", "HEAD", "POST"}) {
    auto ready = HandleControlRequest(Req(m, "/readyz"), true, stop);
    EXPECT_EQ(ready.status, 200);
    EXPECT_EQ(ready.body, "");
    auto not_ready = HandleControlRequest(Req(m, "/readyz", false), false, stop);
    EXPECT_EQ(not_ready.status, 503);
    EXPECT_EQ(not_ready.body, "");
  }
  EXPECT_EQ(stops, 0);
}

TEST(ControlServerTest, StopNeedsPostAndATrustedCaller) {
  int stops = 0;
  auto stop = [&] { ++stops; };
  auto get = HandleControlRequest(Req("GET", "/stop"), true, stop);
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.headers["Allow"], "POST");
  EXPECT_EQ(stops, 0);
  auto remote = HandleControlRequest(Req("POST", "/stop", /*loopback=*/false), true, stop);
  EXPECT_EQ(remote.status, 403);
  EXPECT_EQ(stops, 0);
  auto local = HandleControlRequest(Req("POST", "/stop"), true, stop);
  EXPECT_EQ(local.status, 200);
  EXPECT_EQ(stops, 1);
  auto with_cert = HandleControlRequest(Req("POST", "/stop", false, /*verified=*/true), true, stop);
  EXPECT_EQ(with_cert.status, 200);
  EXPECT_EQ(stops, 2);
}

TEST(ControlServerTest, OtherPathsAre404) {
  auto r = HandleControlRequest(Req("GET", "/readyz/x"), true, [] {});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "404 page not found\n");
  EXPECT_EQ(HandleControlRequest(Req("GET", "/"), true, [] {}).status, 404);
}

}  // namespace
}  // namespace etcdw::wrapper
