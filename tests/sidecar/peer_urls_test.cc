// Peer TLS enablement's registration step against a real in-process member, the wrapper's
// /stop call against a stand-in HTTP server, and the URL helpers.
#include "etcdw/sidecar/peer_urls.h"

#include <gtest/gtest.h>

#include <atomic>

#include "etcdw/common/http.h"
#include "served_member.h"

namespace etcdw::sidecar {
namespace {

using namespace std::chrono_literals;

TEST(PeerUrlHelpersTest, AllHttps) {
  EXPECT_TRUE(AllHttps({"https://a:2380", "https://b:2380"}));
  EXPECT_FALSE(AllHttps({"https://a:2380", "http://b:2380"}));
  EXPECT_FALSE(AllHttps({}));
}

TEST(PeerUrlHelpersTest, UnregisteredUrlsKeepTheConfiguredOrder) {
  EXPECT_EQ(UnregisteredUrls({"https://b:1", "https://a:1"}, {"http://a:1"}),
            (std::vector<std::string>{"https://b:1", "https://a:1"}));
  EXPECT_TRUE(UnregisteredUrls({"https://a:1"}, {"https://a:1", "http://a:2"}).empty());
}

TEST(PeerUrlHelpersTest, TheWrapperIsOnTheHostOfTheFirstEndpoint) {
  EXPECT_EQ(WrapperStopUrl("http://etcd-main-local:2379", 9095, false).value(),
            "http://etcd-main-local:9095/stop");
  EXPECT_EQ(WrapperStopUrl("https://etcd-main-local:2379", 9095, true).value(),
            "https://etcd-main-local:9095/stop");
  EXPECT_EQ(WrapperStopUrl("127.0.0.1:2379", 19095, false).value(), "http://127.0.0.1:19095/stop");
}

class PeerUrlUpdateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(member_.Start());
    options_.etcd = member_.Options();
    options_.health_timeout = 20s;
  }
  std::vector<std::string> Registered() {
    auto c = EtcdClient::ConnectToCluster(options_.etcd);
    EXPECT_TRUE(c.ok());
    const auto& urls = c->members.members(0).peerurls();
    return {urls.begin(), urls.end()};
  }

  ServedMember member_;
  PeerUrlUpdateOptions options_;
};

TEST_F(PeerUrlUpdateTest, AMemberWithTheConfiguredUrlsIsLeftAlone) {
  options_.configured = Registered();
  ASSERT_FALSE(options_.configured.empty());
  auto r = UpdatePeerUrls(options_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, PeerUrlOutcome::kUnchanged);
}

TEST_F(PeerUrlUpdateTest, HttpToHttpsUpdatesTheRegistration) {
  options_.configured = {"https://127.0.0.1:2380"};
  auto r = UpdatePeerUrls(options_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, PeerUrlOutcome::kUpdated);
  EXPECT_EQ(Registered(), options_.configured);
  // Done once: the next start finds nothing to do.
  auto again = UpdatePeerUrls(options_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, PeerUrlOutcome::kUnchanged);
}

TEST_F(PeerUrlUpdateTest, AMemberThatDoesNotAnswerIsAnErrorAfterRetries) {
  options_.configured = {"https://127.0.0.1:2380"};
  member_.Stop();
  std::atomic<bool> cancel{false};
  options_.cancel = &cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(300ms);
    cancel.store(true);
  });
  auto r = UpdatePeerUrls(options_);
  canceller.join();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reading this member's registered peer URLs"),
            std::string::npos)
      << r.status().ToString();
}

// The wrapper's /stop: a POST to the host of --endpoints[0] on --etcd-wrapper-port. An answer
// other than 200, or no answer, is an error (the sidecar exits on it).
TEST_F(PeerUrlUpdateTest, TheWrapperRefusingOrAbsentIsAnError) {
  std::atomic<int> stops{0};
  common::HttpServerOptions so;
  so.host = "127.0.0.1";
  auto wrapper = common::HttpServer::Start(so, [&](const common::HttpRequest& req) {
    common::HttpResponse resp;
    if (req.method == "POST" && req.path == "/stop") stops.fetch_add(1);
    resp.status = 500;
    resp.body = "cannot stop";
    return resp;
  });
  ASSERT_TRUE(wrapper.ok());
  options_.wrapper_port = (*wrapper)->port();
  Status st = RestartEtcdThroughWrapper(options_);
  EXPECT_EQ(stops.load(), 1);
  EXPECT_NE(st.message().find("answered HTTP 500: cannot stop"), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("restarting etcd through etcd-wrapper"), std::string::npos);
  (*wrapper)->Stop();
  st = RestartEtcdThroughWrapper(options_);
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
}

}  // namespace
}  // namespace etcdw::sidecar
