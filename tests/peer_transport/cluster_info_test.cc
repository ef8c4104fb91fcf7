// The cluster-information query (FetchClusterInfo / on_cluster_info), which needs no running
// transport on the asking side.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/peer_transport/peer_transport.h"
#include "peer_transport/peer_transport_fixture.h"

namespace etcdw::peer_transport {
namespace {

using namespace std::chrono_literals;

TEST(PeerTransportCallTest, FetchClusterInfo) {
  auto asked = std::make_shared<std::atomic<int>>(0);
  const std::string info("cluster\0info", 12);
  auto b = StartMember(Options(2), [asked, info](PeerTransportHandler& h) {
    h.on_cluster_info = [asked, info] {
      ++*asked;
      return info;
    };
  });
  auto mute = StartMember(Options(3));  // no on_cluster_info
  ASSERT_TRUE(b && mute);
  const std::string dead = DeadUrl();
  SilentListener silent;
  ASSERT_TRUE(silent.ok());

  auto r = PeerTransport::FetchClusterInfo(ParseUrls({b->Url()}), {}, 2s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, info);
  EXPECT_EQ(asked->load(), 1);

  // Tried in order: dead, silent (timing out) and unwilling members are skipped.
  auto t0 = SteadyClock::now();
  r = PeerTransport::FetchClusterInfo(ParseUrls({dead, silent.Url(), mute->Url(), b->Url(), dead}),
                                      {}, 300ms);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, info);
  EXPECT_EQ(asked->load(), 2);
  EXPECT_GE(SteadyClock::now() - t0, 250ms);
  EXPECT_LT(SteadyClock::now() - t0, 1500ms);

  // Nobody answers: every URL is named with its reason.
  t0 = SteadyClock::now();
  r = PeerTransport::FetchClusterInfo(ParseUrls({dead, silent.Url(), mute->Url()}), {}, 300ms);
  EXPECT_LT(SteadyClock::now() - t0, 1500ms);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  for (const auto& u : {dead, silent.Url(), mute->Url()}) {
    EXPECT_NE(r.status().message().find(u), std::string::npos)
        << u << " in " << r.status().ToString();
  }
  EXPECT_NE(r.status().message().find("cluster information"), std::string::npos)
      << r.status().ToString();

  // Without on_cluster_info alone.
  r = PeerTransport::FetchClusterInfo(ParseUrls({mute->Url()}), {}, 2s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find(mute->Url()), std::string::npos) << r.status().ToString();

  // A stopped member (the transport need not run for the asker either).
  const std::string b_url = b->Url();
  b->Stop();
  r = PeerTransport::FetchClusterInfo(ParseUrls({b_url}), {}, 300ms);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(asked->load(), 2);

  EXPECT_FALSE(PeerTransport::FetchClusterInfo({}, {}, 1s).ok());
}

}  // namespace
}  // namespace etcdw::peer_transport
