// Calls that are not answered: deadlines and late answers, unknown, removed, unreachable and
// stopped peers, the connection pool's growth and idle timeout, and Stop() with calls in flight.
// Time is an ObservedClock the tests advance: a timeout is shown not to come early by its timer
// sleeping on 1 ms before it, and to come by the clock reaching it.
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

TEST(PeerTransportCallTest, TimeoutAndLateAnswerIsDropped) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  ObservedClock clock;
  auto o = Options(1);
  o.clock = &clock;
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  // The connection first, so that the deadline covers the answer only.
  auto warm = StartCall(*a->transport, 2, 1, "warm");
  ASSERT_TRUE(inbox.WaitFor(1));
  inbox.Take().at(0).respond(Status::Ok(), "");
  ASSERT_TRUE(warm->Wait());

  // The deadline counts on the clock from Call(): 1 ms before it, the call's timer looks at the
  // clock and sleeps on; at the deadline the call fails.
  const auto t0 = clock.Now();
  auto slow = StartCall(*a->transport, 2, 1, "slow", 150ms);
  ASSERT_TRUE(inbox.WaitFor(1));
  Respond late = inbox.Take().at(0).respond;
  clock.Advance(149ms);
  ASSERT_TRUE(clock.WaitForSleep(t0 + 150ms, t0 + 149ms));
  EXPECT_EQ(slow->Runs(), 0) << "timed out before its deadline";
  clock.Advance(1ms);
  ASSERT_TRUE(slow->Wait());
  EXPECT_EQ(slow->status,
            Status(Code::kDeadlineExceeded, "call to peer 0000000000000002 timed out after 150ms"));

  // A call in flight when the late answer arrives gets its own answer, not the late one (which
  // travels first on the same connection).
  auto next = StartCall(*a->transport, 2, 1, "next");
  ASSERT_TRUE(inbox.WaitFor(1));
  Respond next_respond = inbox.Take().at(0).respond;
  late(Status::Ok(), "too late");
  next_respond(Status::Ok(), "on time");
  ASSERT_TRUE(next->Wait());
  EXPECT_EQ(next->payload, "on time");
  EXPECT_EQ(slow->Runs(), 1);
  EXPECT_EQ(slow->payload, "");
  EXPECT_EQ(a->transport->CallStats(2).established, 1u) << "the late answer broke the connection";

  // A peer that never answers the handshake: the call's deadline (100 ms) comes before the
  // dial's (2 s), and the clock goes no further.
  SilentListener silent;
  ASSERT_TRUE(silent.ok());
  a->transport->AddPeer(3, {silent.Url()});
  auto hung = StartCall(*a->transport, 3, 1, "", 100ms);
  clock.Advance(100ms);
  ASSERT_TRUE(hung->Wait());
  EXPECT_EQ(hung->status.code(), Code::kDeadlineExceeded) << hung->status.ToString();
}

TEST(PeerTransportCallTest, HugeTimeoutMeansNoDeadlineAndZeroExpiresAtOnce) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  ObservedClock clock;
  auto o = Options(1);
  o.clock = &clock;
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  const auto t0 = clock.Now();
  auto forever = StartCall(*a->transport, 2, 1, "", std::chrono::milliseconds::max());
  ASSERT_TRUE(inbox.WaitFor(1));
  // A hundred days later the call's timer (due much later still) looks at the clock and sleeps on.
  clock.Advance(24h * 100);
  ASSERT_TRUE(clock.WaitForSleep(t0 + 24h * 101, common::Clock::TimePoint::max(), t0 + 24h * 100));
  EXPECT_EQ(forever->Runs(), 0) << forever->status.ToString();
  inbox.Take().at(0).respond(Status::Ok(), "eventually");
  ASSERT_TRUE(forever->Wait());
  EXPECT_TRUE(forever->status.ok()) << forever->status.ToString();
  EXPECT_EQ(forever->payload, "eventually");

  for (auto timeout : {0ms, -5ms}) {
    auto now = CallAndWait(*a->transport, 2, 1, "", timeout);
    EXPECT_EQ(now->status.code(), Code::kDeadlineExceeded) << now->status.ToString();
  }
  // (Their requests may still reach the peer; the inbox keeps them unanswered.)

  auto info = StartMember(Options(3), [](PeerTransportHandler& h) {
    h.on_cluster_info = [] { return std::string("i"); };
  });
  ASSERT_TRUE(info);
  auto r = PeerTransport::FetchClusterInfo(ParseUrls({info->Url()}), {},
                                           std::chrono::milliseconds::max());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "i");
}

// b serves a's calls by calling c, as a follower forwards to the lead, and answers in `done`.

TEST(PeerTransportCallTest, UnknownOrRemovedPeerIsUnavailable) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  auto unknown = CallAndWait(*a->transport, 9, 1, "");
  EXPECT_EQ(unknown->status.code(), Code::kUnavailable);
  EXPECT_NE(unknown->status.message().find("unknown peer"), std::string::npos)
      << unknown->status.ToString();
  EXPECT_NE(unknown->thread, std::this_thread::get_id()) << "done must run on a transport thread";

  a->transport->AddPeer(2, {b->Url()});
  auto pending = StartCall(*a->transport, 2, 1, "");
  ASSERT_TRUE(inbox.WaitFor(1));
  a->transport->RemovePeer(2);
  ASSERT_TRUE(pending->Wait(10s));
  EXPECT_EQ(pending->status.code(), Code::kUnavailable) << pending->status.ToString();
  auto after = CallAndWait(*a->transport, 2, 1, "");
  EXPECT_EQ(after->status.code(), Code::kUnavailable);
  EXPECT_EQ(inbox.Size(), 1u);
}

TEST(PeerTransportCallTest, PeerDownIsUnavailableWithinTheDialTimeout) {
  ObservedClock clock;
  auto o = Options(1);
  o.dial_timeout = 300ms;
  o.clock = &clock;
  auto a = StartMember(o);
  ASSERT_TRUE(a);
  const std::string dead = DeadUrl();
  SilentListener silent;
  ASSERT_TRUE(silent.ok());
  a->transport->AddPeer(2, {dead});
  a->transport->AddPeer(3, {silent.Url()});
  a->transport->AddPeer(4, {dead, silent.Url()});

  // A refused connection fails the call at once: the clock never moves.
  auto refused = CallAndWait(*a->transport, 2, 1, "", 10s);
  EXPECT_EQ(refused->status.code(), Code::kUnavailable) << refused->status.ToString();
  EXPECT_NE(refused->status.message().find(dead), std::string::npos) << refused->status.ToString();

  // A silent peer fails the call after the dial timeout (300 ms of the clock), long before the
  // call's deadline (10 s). Four dials wait for the silent listener's answer, all since t0 (the
  // clock has not moved): the message streams to peers 3 and 4 and the two calls' connections.
  // 1 ms before the timeout their timers look at the clock and sleep on.
  const auto t0 = clock.Now();
  auto r3 = StartCall(*a->transport, 3, 1, "", 10s);
  auto r4 = StartCall(*a->transport, 4, 1, "", 10s);  // refused at its first URL, then silence
  ASSERT_TRUE(WaitUntil([&] { return silent.accepted() == 4; })) << silent.accepted();
  clock.Advance(299ms);
  ASSERT_TRUE(clock.WaitForSleep(t0 + 300ms, t0 + 299ms));
  EXPECT_EQ(r3->Runs(), 0) << "failed before the dial timeout";
  EXPECT_EQ(r4->Runs(), 0) << "failed before the dial timeout";
  clock.Advance(1ms);
  ASSERT_TRUE(r3->Wait());
  ASSERT_TRUE(r4->Wait());
  EXPECT_EQ(r3->status.code(), Code::kUnavailable) << r3->status.ToString();
  EXPECT_NE(r3->status.message().find("timed out after 300ms"), std::string::npos)
      << r3->status.ToString();
  // Both URLs tried, and named.
  EXPECT_EQ(r4->status.code(), Code::kUnavailable) << r4->status.ToString();
  EXPECT_NE(r4->status.message().find(dead), std::string::npos) << r4->status.ToString();
  EXPECT_NE(r4->status.message().find(silent.Url()), std::string::npos) << r4->status.ToString();
  for (uint64_t p : {2, 3, 4}) EXPECT_EQ(a->transport->CallStats(p).open, 0u);
}

TEST(PeerTransportCallTest, PeerStoppedMidCallIsUnavailable) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  std::vector<std::shared_ptr<CallOutcome>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(StartCall(*a->transport, 2, 1, ""));
  ASSERT_TRUE(inbox.WaitFor(3));
  std::vector<Inbox::Request> held = inbox.Take();
  const auto t0 = SteadyClock::now();
  b->Stop();  // the transport is destroyed too
  for (auto& c : calls) {
    ASSERT_TRUE(c->Wait(10s));
    EXPECT_EQ(c->status.code(), Code::kUnavailable) << c->status.ToString();
    EXPECT_LT(c->at - t0, 2s);
  }
  // Answering after the transport is gone is harmless and reaches nobody.
  held[0].respond(Status::Ok(), "too late");
  std::thread([r = held[1].respond] { r(Status::Ok(), "too late"); }).join();
  held.clear();  // the last one is dropped
  for (auto& c : calls) EXPECT_EQ(c->Runs(), 1);
  EXPECT_EQ(a->transport->CallStats(2).open, 0u);
}

TEST(PeerTransportCallTest, PoolGrowsToTheCapAndClosesIdleConnections) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  ObservedClock clock;
  const auto t0 = clock.Now();  // the clock stands still until the test moves it
  auto o = Options(1);
  o.max_call_connections = 2;
  o.call_idle_timeout = 200ms;
  o.clock = &clock;
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  EXPECT_EQ(a->transport->CallStats(2).established, 0u) << "connections are opened on demand";

  std::vector<std::shared_ptr<CallOutcome>> calls;
  for (int i = 0; i < 8; ++i) calls.push_back(StartCall(*a->transport, 2, 1, ""));
  ASSERT_TRUE(inbox.WaitFor(8));
  EXPECT_EQ(a->transport->CallStats(2).established, 1u) << "8 calls share one connection";
  calls.push_back(StartCall(*a->transport, 2, 1, ""));
  ASSERT_TRUE(inbox.WaitFor(9));
  EXPECT_EQ(a->transport->CallStats(2).established, 2u) << "the 9th call opens another";
  EXPECT_EQ(a->transport->CallStats(2).open, 2u);
  for (int i = 0; i < 21; ++i) calls.push_back(StartCall(*a->transport, 2, 1, ""));
  ASSERT_TRUE(inbox.WaitFor(30));
  EXPECT_EQ(a->transport->CallStats(2).established, 2u) << "max_call_connections";
  EXPECT_EQ(a->transport->CallStats(2).open, 2u);

  // Connections with calls in flight stay open past the idle timeout: no idle timer is armed
  // (it would be due 200 ms after the clock's only reading so far, t0), and once the clock has
  // passed 300 ms a call due at 250 ms has timed out (so the pool's timers have run since).
  auto probe = StartCall(*a->transport, 2, 1, "probe", 250ms);
  ASSERT_TRUE(inbox.WaitFor(31));
  clock.Advance(300ms);
  ASSERT_TRUE(probe->Wait());
  EXPECT_EQ(probe->status.code(), Code::kDeadlineExceeded) << probe->status.ToString();
  EXPECT_FALSE(clock.SleptFor(t0 + 200ms)) << "an idle timer with calls in flight";
  EXPECT_FALSE(clock.SleptFor(t0 + 300ms + 200ms)) << "an idle timer with calls in flight";
  EXPECT_EQ(a->transport->CallStats(2).open, 2u);

  // Answered, the probe's (late) answer first, so that it cannot arrive after the others.
  std::vector<Inbox::Request> requests = inbox.Take();
  std::stable_partition(requests.begin(), requests.end(),
                        [](const Inbox::Request& r) { return r.payload == "probe"; });
  for (auto& r : requests) r.respond(Status::Ok(), "ok");
  for (auto& c : calls) {
    ASSERT_TRUE(c->Wait());
    EXPECT_EQ(c->payload, "ok");
  }
  // A Raft message through the pool's strand (its peer's): once it arrives, the handlers that
  // completed the calls have finished, arming the idle timers included.
  a->transport->Send({Msg(1, 2, 1)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 1; }));
  // Idle connections close after call_idle_timeout of the clock, not before: 1 ms before it
  // their timers look at the clock and sleep on.
  const auto idle_since = clock.Now();
  clock.Advance(199ms);
  ASSERT_TRUE(clock.WaitForSleep(idle_since + 200ms, idle_since + 199ms));
  EXPECT_EQ(a->transport->CallStats(2).open, 2u) << "closed before the idle timeout";
  clock.Advance(1ms);
  ASSERT_TRUE(WaitUntil([&] { return a->transport->CallStats(2).open == 0; }));
  EXPECT_EQ(a->transport->CallStats(2).established, 2u);

  // The next call opens a fresh connection.
  auto again = StartCall(*a->transport, 2, 1, "");
  ASSERT_TRUE(inbox.WaitFor(1));
  inbox.Take().at(0).respond(Status::Ok(), "again");
  ASSERT_TRUE(again->Wait());
  EXPECT_EQ(again->payload, "again");
  EXPECT_EQ(a->transport->CallStats(2).established, 3u);
  EXPECT_EQ(a->transport->CallStats(2).open, 1u);
}

TEST(PeerTransportCallTest, StopCompletesOutstandingCallsThenCallsFailAtOnce) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  ObservedClock clock;  // stands still: no dial or call times out
  auto o = Options(1);
  o.clock = &clock;
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  SilentListener silent;
  ASSERT_TRUE(silent.ok());
  a->transport->AddPeer(2, {b->Url()});
  a->transport->AddPeer(3, {silent.Url()});

  std::vector<std::shared_ptr<CallOutcome>> calls;
  for (int i = 0; i < 10; ++i) calls.push_back(StartCall(*a->transport, 2, 1, ""));
  ASSERT_TRUE(inbox.WaitFor(10));  // in flight on established connections
  for (int i = 0; i < 3; ++i) calls.push_back(StartCall(*a->transport, 3, 1, ""));   // dialing
  for (int i = 0; i < 20; ++i) calls.push_back(StartCall(*a->transport, 2, 1, ""));  // just sent
  calls.push_back(StartCall(*a->transport, 9, 1, ""));                               // unknown
  const auto t0 = SteadyClock::now();
  a->transport->Stop();
  EXPECT_LT(SteadyClock::now() - t0, 2s);
  for (size_t i = 0; i < calls.size(); ++i) {
    auto& c = *calls[i];
    ASSERT_EQ(c.Runs(), 1) << "call " << i << " not completed when Stop() returned";
    EXPECT_EQ(c.status.code(), Code::kUnavailable) << i << ": " << c.status.ToString();
    if (i < 33) {  // not the call to an unknown peer, which may complete before Stop()
      EXPECT_EQ(c.thread, std::this_thread::get_id()) << "call " << i;
    }
  }
  // Answers after Stop() reach nobody.
  for (auto& r : inbox.Take()) r.respond(Status::Ok(), "late");

  // After Stop(): at once, on the calling thread.
  auto after = std::make_shared<CallOutcome>();
  a->transport->Call(2, 1, "", 10s, Record(after));
  EXPECT_EQ(after->Runs(), 1);
  EXPECT_EQ(after->status.code(), Code::kUnavailable);
  EXPECT_EQ(after->thread, std::this_thread::get_id());
  EXPECT_EQ(a->transport->CallStats(2).open, 0u);
  a->transport->Stop();  // idempotent
  // The late answers above are b's to deliver: once b has stopped (joining its threads) they have
  // gone wherever they would go, and no call ran again.
  b->Stop();
  for (auto& c : calls) EXPECT_EQ(c->Runs(), 1);
}

}  // namespace
}  // namespace etcdw::peer_transport
