// The cluster-information query (FetchClusterInfo / on_cluster_info), which needs no running
// transport on the asking side; its per-URL timeout runs on the clock it is given.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/peer_transport/peer_transport.h"
#include "peer_transport/observed_clock.h"
#include "peer_transport/peer_transport_fixture.h"

namespace etcdw::peer_transport {
namespace {

using namespace std::chrono_literals;

// A member whose on_cluster_info answers `info` and counts the questions.
std::unique_ptr<Member> StartInfoMember(uint64_t id, const std::string& info,
                                        std::shared_ptr<std::atomic<int>> asked) {
  return StartMember(Options(id), [asked, info](PeerTransportHandler& h) {
    h.on_cluster_info = [asked, info] {
      ++*asked;
      return info;
    };
  });
}

// FetchClusterInfo on a thread of its own, on `clock`: it blocks until the clock lets its
// timeouts pass. Should a test end early, the destructor moves the clock until the fetch ends.
class BackgroundFetch {
 public:
  BackgroundFetch(ObservedClock& clock, std::vector<common::Url> urls,
                  std::chrono::milliseconds timeout)
      : clock_(clock), result_(std::async(std::launch::async, [urls, timeout, &clock] {
          return PeerTransport::FetchClusterInfo(urls, {}, timeout, clock);
        })) {}
  ~BackgroundFetch() {
    while (result_.valid() && result_.wait_for(10ms) != std::future_status::ready) {
      clock_.Advance(24h);
    }
  }
  bool Done() { return result_.wait_for(0ms) == std::future_status::ready; }
  // The answer; fails the test (with an error result) when there is none within 20 s.
  Result<std::string> Get() {
    if (result_.wait_for(20s) != std::future_status::ready) return Internal("no answer in time");
    return result_.get();
  }

 private:
  ObservedClock& clock_;
  std::future<Result<std::string>> result_;
};

const std::string kInfo("cluster\0info", 12);

TEST(PeerTransportClusterInfoTest, AsksEachUrlInOrderUntilOneAnswers) {
  auto asked = std::make_shared<std::atomic<int>>(0);
  auto b = StartInfoMember(2, kInfo, asked);
  auto mute = StartMember(Options(3));  // no on_cluster_info
  ASSERT_TRUE(b && mute);
  const std::string dead = DeadUrl();

  auto r = PeerTransport::FetchClusterInfo(ParseUrls({b->Url()}), {}, 2s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, kInfo);
  EXPECT_EQ(asked->load(), 1);

  // Dead and unwilling members are skipped.
  r = PeerTransport::FetchClusterInfo(ParseUrls({dead, mute->Url(), b->Url(), dead}), {}, 2s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, kInfo);
  EXPECT_EQ(asked->load(), 2);
}

TEST(PeerTransportClusterInfoTest, ASilentPeerCostsItsTimeoutOnTheClock) {
  auto asked = std::make_shared<std::atomic<int>>(0);
  auto b = StartInfoMember(2, kInfo, asked);
  auto mute = StartMember(Options(3));
  ASSERT_TRUE(b && mute);
  SilentListener silent;
  ASSERT_TRUE(silent.ok());
  ObservedClock clock;
  const auto t0 = clock.Now();
  BackgroundFetch fetch(clock, ParseUrls({silent.Url(), mute->Url(), b->Url()}), 300ms);
  // Connected to the silent peer since t0; 1 ms before the timeout the fetch's timers look at
  // the clock and sleep on, and it has not moved on.
  ASSERT_TRUE(WaitUntil([&] { return silent.accepted() == 1; }));
  clock.Advance(299ms);
  ASSERT_TRUE(clock.WaitForSleep(t0 + 300ms, t0 + 299ms));
  EXPECT_FALSE(fetch.Done());
  EXPECT_EQ(asked->load(), 0);
  // At the timeout it asks the next URLs, without the clock moving further.
  clock.Advance(1ms);
  auto r = fetch.Get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, kInfo);
  EXPECT_EQ(asked->load(), 1);
}

TEST(PeerTransportClusterInfoTest, WhenNobodyAnswersEveryUrlIsNamedWithItsReason) {
  auto mute = StartMember(Options(3));
  ASSERT_TRUE(mute);
  const std::string dead = DeadUrl();
  SilentListener silent;
  ASSERT_TRUE(silent.ok());
  ObservedClock clock;
  BackgroundFetch fetch(clock, ParseUrls({silent.Url(), dead, mute->Url()}), 300ms);
  ASSERT_TRUE(WaitUntil([&] { return silent.accepted() == 1; }));
  clock.Advance(300ms);
  auto r = fetch.Get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  for (const auto& u : {silent.Url(), dead, mute->Url()}) {
    EXPECT_NE(r.status().message().find(u), std::string::npos)
        << u << " in " << r.status().ToString();
  }
  EXPECT_NE(r.status().message().find("timed out after 300ms"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("cluster information"), std::string::npos)
      << r.status().ToString();
}

TEST(PeerTransportClusterInfoTest, UnwillingOrStoppedMembersAndBadArgumentsAreErrors) {
  auto asked = std::make_shared<std::atomic<int>>(0);
  auto b = StartInfoMember(2, kInfo, asked);
  auto mute = StartMember(Options(3));  // no on_cluster_info
  ASSERT_TRUE(b && mute);
  auto r = PeerTransport::FetchClusterInfo(ParseUrls({mute->Url()}), {}, 2s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find(mute->Url()), std::string::npos) << r.status().ToString();

  // A stopped member (the transport need not run for the asker either).
  const std::string b_url = b->Url();
  b->Stop();
  r = PeerTransport::FetchClusterInfo(ParseUrls({b_url}), {}, 2s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(asked->load(), 0);

  EXPECT_EQ(PeerTransport::FetchClusterInfo({}, {}, 1s).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PeerTransport::FetchClusterInfo(ParseUrls({b_url}), {}, 0ms).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace etcdw::peer_transport
