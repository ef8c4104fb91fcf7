// The sidecar's HTTP API on a sidecar that is not the backup leader: snapshot triggers are
// delegated to the leader's sidecar (a scripted HTTP server here) as gardener's are.
#include "etcdw/sidecar/http_api.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>

#include "etcdw/sidecar/local_store.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

namespace fs = std::filesystem;

common::HttpRequest Get(const std::string& target) {
  common::HttpRequest r;
  r.method = "GET";
  r.target = target;
  r.path = target.substr(0, target.find('?'));
  return r;
}

class DelegationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<testsupport::ScratchDir>("http-api");
    dir_ = scratch_->path();
    ASSERT_FALSE(scratch_->path().empty());
    auto store = NewLocalStore(dir_ + "/store", "p");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    // The leader's sidecar: healthy or not, and echoing what it was asked.
    auto leader =
        common::HttpServer::Start({.host = "127.0.0.1"}, [this](const common::HttpRequest& r) {
          ++leader_calls_;
          if (r.path == "/healthz") {
            return leader_healthy_
                       ? common::HttpResponse{.status = 200, .body = R"({"health":true})"}
                       : common::HttpResponse{.status = 503, .body = R"({"health":false})"};
          }
          common::HttpResponse out{.status = 200,
                                   .body = "leader answered " + r.target + " delegated=" +
                                           (r.headers.count("x-etcdw-delegated") ? "yes" : "no")};
          out.headers["Content-Type"] = "application/json";
          return out;
        });
    ASSERT_TRUE(leader.ok()) << leader.status().ToString();
    leader_ = std::move(leader).value();
  }
  void TearDown() override {
    leader_.reset();
    scratch_.reset();
  }

  // A follower's API whose leader lookup answers `url` (or fails when empty).
  std::unique_ptr<HttpApi> Follower(const std::string& url) {
    HttpApi::Deps d;
    d.store = store_.get();
    d.leader_sidecar_url = [url]() -> Result<std::string> {
      if (url.empty()) return Unavailable("no leader");
      return url;
    };
    return std::make_unique<HttpApi>(std::move(d));
  }
  std::string LeaderUrl() const { return "http://127.0.0.1:" + std::to_string(leader_->port()); }

  std::unique_ptr<testsupport::ScratchDir> scratch_;  // removed by TearDown
  std::string dir_;
  std::unique_ptr<SnapStore> store_;
  std::unique_ptr<common::HttpServer> leader_;
  std::atomic<bool> leader_healthy_{true};
  std::atomic<int> leader_calls_{0};
};

TEST_F(DelegationTest, SnapshotTriggersGoToTheHealthyLeaderWithTheirQuery) {
  auto api = Follower(LeaderUrl());
  auto full = api->Handle(Get("/snapshot/full?final=true"));
  EXPECT_EQ(full.status, 200);
  EXPECT_EQ(full.body, "leader answered /snapshot/full?final=true delegated=yes");
  EXPECT_EQ(full.headers["Content-Type"], "application/json");
  auto delta = api->Handle(Get("/snapshot/delta"));
  EXPECT_EQ(delta.status, 200);
  EXPECT_EQ(delta.body, "leader answered /snapshot/delta delegated=yes");
}

TEST_F(DelegationTest, RefusedWithoutAHealthyReachableLeader) {
  leader_healthy_ = false;
  EXPECT_EQ(Follower(LeaderUrl())->Handle(Get("/snapshot/full")).status, 405);
  EXPECT_EQ(leader_calls_.load(), 1);  // the health check only
  leader_healthy_ = true;
  EXPECT_EQ(Follower("")->Handle(Get("/snapshot/full")).status, 405);  // no leader known
  EXPECT_EQ(Follower("http://127.0.0.1:1")->Handle(Get("/snapshot/delta")).status, 405);
  EXPECT_EQ(Follower("not a url")->Handle(Get("/snapshot/delta")).status, 405);
  // No delegation configured at all.
  HttpApi::Deps d;
  d.store = store_.get();
  EXPECT_EQ(HttpApi(std::move(d)).Handle(Get("/snapshot/full")).status, 405);
}

TEST_F(DelegationTest, ADelegatedRequestIsNeverDelegatedAgain) {
  auto req = Get("/snapshot/full");
  req.headers["x-etcdw-delegated"] = "1";
  EXPECT_EQ(Follower(LeaderUrl())->Handle(req).status, 405);
  EXPECT_EQ(leader_calls_.load(), 0);
}

TEST_F(DelegationTest, LatestIsAnsweredFromTheSharedStore) {
  auto r = Follower(LeaderUrl())->Handle(Get("/snapshot/latest"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"deltaSnapshots":null,"fullSnapshot":null})");
  EXPECT_EQ(leader_calls_.load(), 0);
}

TEST_F(DelegationTest, NoStoreMeansNoSnapshotRoutes) {
  HttpApi::Deps d;
  d.leader_sidecar_url = [this]() -> Result<std::string> { return LeaderUrl(); };
  HttpApi api(std::move(d));
  EXPECT_EQ(api.Handle(Get("/snapshot/full")).status, 405);
  EXPECT_EQ(api.Handle(Get("/snapshot/latest")).status, 405);
  EXPECT_EQ(leader_calls_.load(), 0);
}

}  // namespace
}  // namespace etcdw::sidecar
