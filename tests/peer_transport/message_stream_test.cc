// The message stream on loopback: delivery and order between members, large and oversized
// messages, reconnection after the receiver restarts, unreachable peers and their reports (rate
// limited on the clock), the dial backoff (on the clock), a full queue, and a prompt Stop() while
// a dial hangs.
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
#include "peer_transport/observed_clock.h"
#include "peer_transport/peer_transport_fixture.h"

namespace etcdw::peer_transport {
namespace {

using namespace std::chrono_literals;

TEST(PeerTransportTest, DeliversInOrderBetweenThreeMembers) {
  auto a = StartMember(Options(1));
  auto b = StartMember(Options(2));
  auto c = StartMember(Options(3));
  ASSERT_TRUE(a && b && c);
  a->transport->AddPeer(2, {b->Url()});
  a->transport->AddPeer(3, {c->Url()});
  b->transport->AddPeer(1, {a->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2) && a->transport->Connected(3); }));
  ASSERT_TRUE(WaitUntil([&] { return b->transport->Connected(1); }));

  constexpr uint64_t kCount = 2000;
  for (uint64_t i = 1; i <= kCount; i += 10) {
    std::vector<raftpb::Message> batch;
    for (uint64_t j = i; j < i + 10; ++j) {
      batch.push_back(Msg(1, 2, j, j % 7 * 100));
      batch.push_back(Msg(1, 3, j));
    }
    a->transport->Send(std::move(batch));
    b->transport->Send({Msg(2, 1, i)});
  }
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == kCount; }))
      << b->rec->MessageCount();
  ASSERT_TRUE(WaitUntil([&] { return c->rec->MessageCount() == kCount; }));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->MessageCount() == kCount / 10; }));
  std::vector<uint64_t> want(kCount);
  for (uint64_t i = 0; i < kCount; ++i) want[i] = i + 1;
  EXPECT_EQ(b->rec->Indexes(), want);
  EXPECT_EQ(c->rec->Indexes(), want);
  {
    std::lock_guard<std::mutex> lock(b->rec->mu);
    for (const auto& m : b->rec->messages) {
      ASSERT_EQ(m.from(), 1u);
      ASSERT_EQ(m.to(), 2u);
      ASSERT_EQ(m.SerializeAsString(),
                Msg(1, 2, m.index(), m.index() % 7 * 100).SerializeAsString());
    }
  }
  EXPECT_EQ(a->rec->Unreachable(2), 0);
  EXPECT_EQ(a->rec->Unreachable(3), 0);
}

TEST(PeerTransportTest, LargeMessages) {
  auto o = Options(1);
  o.max_message_bytes = 16 << 20;
  auto a = StartMember(o);
  auto ob = Options(2);
  ob.max_message_bytes = 16 << 20;
  auto b = StartMember(ob);
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  std::vector<raftpb::Message> batch;
  for (uint64_t i = 1; i <= 6; ++i) batch.push_back(Msg(1, 2, i, i % 2 ? (12 << 20) : 10));
  a->transport->Send(batch);
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 6; }));
  std::lock_guard<std::mutex> lock(b->rec->mu);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(b->rec->messages[i].index(), i + 1);
    EXPECT_TRUE(b->rec->messages[i].SerializeAsString() == batch[i].SerializeAsString());
  }
}

TEST(PeerTransportTest, OversizedMessageIsDroppedBySenderAndReported) {
  auto o = Options(1);
  o.max_message_bytes = 64 << 10;
  auto a = StartMember(o);
  auto b = StartMember(Options(2));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  a->transport->Send({Msg(1, 2, 1), Msg(1, 2, 2, 100 << 10), Msg(1, 2, 3)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 2; }));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) > 0; }));
  EXPECT_EQ(b->rec->Indexes(), (std::vector<uint64_t>{1, 3}));
  EXPECT_TRUE(a->transport->Connected(2));
}

TEST(PeerTransportTest, ReconnectsAfterReceiverRestarts) {
  auto a = StartMember(Options(1));
  auto b = StartMember(Options(2));
  ASSERT_TRUE(a && b);
  const int port = b->transport->ports().at(0);
  const std::string url = b->Url();
  a->transport->AddPeer(2, {url});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  std::vector<raftpb::Message> batch;
  for (uint64_t i = 1; i <= 10; ++i) batch.push_back(Msg(1, 2, i));
  a->transport->Send(batch);
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 10; }));

  b->Stop();
  ASSERT_TRUE(WaitUntil([&] { return !a->transport->Connected(2); }));
  const int before = a->rec->Unreachable(2);
  batch.clear();
  for (uint64_t i = 11; i <= 20; ++i) batch.push_back(Msg(1, 2, i));
  a->transport->Send(batch);  // dropped: the peer is down
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) > before; }));

  // The receiver comes back on the same port.
  std::unique_ptr<Member> b2;
  ASSERT_TRUE(WaitUntil([&] {
    b2 = TryStartMember(Options(2, "http://127.0.0.1:" + std::to_string(port)));
    return b2 != nullptr;
  }));
  ASSERT_TRUE(b2);
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  batch.clear();
  for (uint64_t i = 21; i <= 30; ++i) batch.push_back(Msg(1, 2, i));
  a->transport->Send(batch);
  ASSERT_TRUE(WaitUntil([&] { return b2->rec->MessageCount() == 10; }));
  std::vector<uint64_t> want;
  for (uint64_t i = 21; i <= 30; ++i) want.push_back(i);
  EXPECT_EQ(b2->rec->Indexes(), want);
}

TEST(PeerTransportTest, UnreachablePeerDropsAndReports) {
  ObservedClock clock;  // stands still unless advanced
  const std::string dead = DeadUrl();
  auto o = Options(1);
  o.clock = &clock;
  auto a = StartMember(o);
  ASSERT_TRUE(a);
  a->transport->AddPeer(2, {dead});
  for (uint64_t i = 1; i <= 5; ++i) a->transport->Send({Msg(1, 2, i)});
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) > 0; }));
  EXPECT_FALSE(a->transport->Connected(2));

  // Reports are rate limited to one per 200 ms of the clock: a burst of drops while the clock
  // stands still is reported once. One more drop after 200 ms is reported; reports run in order,
  // so once it is counted, any report of the burst would have been counted before it.
  for (int round = 0; round < 200; ++round) a->transport->Send({Msg(1, 2, 100 + round)});
  clock.Advance(200ms);
  a->transport->Send({Msg(1, 2, 300)});
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) >= 2; }));
  EXPECT_EQ(a->rec->Unreachable(2), 2) << "on_unreachable is not rate limited";

  // A peer at new URLs is tried there at once, without waiting for the backoff.
  auto b = StartMember(Options(2));
  ASSERT_TRUE(b);
  a->transport->UpdatePeer(2, {dead, b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  a->transport->Send({Msg(1, 2, 1000)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 1; }));

  a->transport->RemovePeer(2);
  EXPECT_FALSE(a->transport->Connected(2));
  a->transport->Send({Msg(1, 2, 1001)});  // to an unknown peer: dropped quietly
}

TEST(PeerTransportTest, DialBackoffDoublesUpToMaxBackoffOnTheClock) {
  ClosingListener refuser;  // every dial reaches it, then fails
  ASSERT_TRUE(refuser.ok());
  ObservedClock clock;
  auto o = Options(1);
  o.clock = &clock;
  o.max_backoff = 300ms;
  auto a = StartMember(o);
  ASSERT_TRUE(a);
  a->transport->AddPeer(2, {refuser.Url()});
  ASSERT_TRUE(WaitUntil([&] { return refuser.accepted() == 1; }));

  // After each failure the next dial waits 100 ms, doubled per failure up to max_backoff, each
  // less up to a quarter (jitter): it is due in [75%, 100%] of that from the failure. Just
  // before that window the backoff timer looks at the clock and sleeps on, and no dial comes;
  // once the clock reaches the window's end, the next dial does.
  int dials = 1;
  for (const auto delay : {100ms, 200ms, 300ms, 300ms}) {
    const auto failed_at = clock.Now();  // the clock stood still since the last dial
    const auto first = failed_at + delay * 3 / 4;
    const auto last = failed_at + delay;
    ASSERT_TRUE(clock.WaitForSleep(first, last, failed_at)) << "no backoff timer after " << dials;
    clock.Advance(delay * 3 / 4 - 1ms);
    ASSERT_TRUE(clock.WaitForSleep(first, last, first - 1ms)) << delay.count();
    EXPECT_EQ(refuser.accepted(), dials) << "redialed before " << delay.count() << " ms * 75%";
    clock.Advance(delay / 4 + 1ms);
    ++dials;
    ASSERT_TRUE(WaitUntil([&] { return refuser.accepted() == dials; })) << delay.count();
  }
  EXPECT_FALSE(a->transport->Connected(2));
}

TEST(PeerTransportTest, FullQueueDropsAndStopIsPrompt) {
  SilentListener silent;  // the dial hangs waiting for the handshake acknowledgement
  ASSERT_TRUE(silent.ok());
  ObservedClock clock;  // stands still: the dial never times out
  auto o = Options(1);
  o.max_queued_messages = 4;
  o.clock = &clock;
  auto a = StartMember(o);
  ASSERT_TRUE(a);
  a->transport->AddPeer(2, {silent.Url()});
  std::vector<raftpb::Message> batch;
  for (uint64_t i = 1; i <= 10; ++i) batch.push_back(Msg(1, 2, i));
  a->transport->Send(batch);
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) > 0; }));
  EXPECT_FALSE(a->transport->Connected(2));

  const auto t0 = SteadyClock::now();
  a->Stop();
  EXPECT_LT(SteadyClock::now() - t0, 2s);
}

}  // namespace
}  // namespace etcdw::peer_transport
