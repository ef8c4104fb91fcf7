// Calls (Call / on_call) that are answered: answers verbatim, many at once and out of order,
// `respond` from another thread or dropped, forwarding, size limits, and Raft messages flowing
// beside an unanswered call.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/peer_transport/peer_transport.h"
#include "peer_transport/observed_clock.h"
#include "peer_transport/peer_transport_fixture.h"

namespace etcdw::peer_transport {
namespace {

using namespace std::chrono_literals;

TEST(PeerTransportCallTest, AnswerTravelsVerbatim) {
  struct Seen {
    std::mutex mu;
    std::vector<std::pair<uint32_t, std::string>> calls;
  };
  auto seen = std::make_shared<Seen>();
  const std::string binary("\0\x01\xff payload \0 end", 17);
  auto b = StartMember(Options(2), [&](PeerTransportHandler& h) {
    h.on_call = [seen, binary](uint32_t method, std::string payload, Respond respond) {
      {
        std::lock_guard<std::mutex> lock(seen->mu);
        seen->calls.emplace_back(method, payload);
      }
      switch (method) {
        case 1:  // an etcd error, as the lead would return it
          return respond(Status(Code::kFailedPrecondition, "etcdserver: requested lease not found"),
                         "partial\n");
        case 2:
          return respond(Status::Ok(), binary + payload);
        case 3:  // a code this build does not know
          return respond(Status(static_cast<Code>(77), "from the future"), "");
        default:
          return respond(Status::Ok(), "");
      }
    };
  });
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});

  auto r1 = CallAndWait(*a->transport, 2, 1, "lease 7");
  EXPECT_EQ(r1->status.code(), Code::kFailedPrecondition);
  EXPECT_EQ(r1->status.message(), "etcdserver: requested lease not found");
  EXPECT_EQ(r1->payload, "partial\n");
  EXPECT_NE(r1->thread, std::this_thread::get_id()) << "done must run on a transport thread";

  auto r2 = CallAndWait(*a->transport, 2, 2, binary);
  EXPECT_TRUE(r2->status.ok()) << r2->status.ToString();
  EXPECT_EQ(r2->payload, binary + binary);

  auto r3 = CallAndWait(*a->transport, 2, 3, "");
  EXPECT_EQ(r3->status.code(), Code::kUnknown);
  EXPECT_EQ(r3->status.message(), "from the future");

  auto r4 = CallAndWait(*a->transport, 2, 0xfffffffeu, "");
  EXPECT_TRUE(r4->status.ok()) << r4->status.ToString();
  EXPECT_EQ(r4->payload, "");

  {
    std::lock_guard<std::mutex> lock(seen->mu);
    ASSERT_EQ(seen->calls.size(), 4u);
    EXPECT_EQ(seen->calls[0], std::make_pair(uint32_t{1}, std::string("lease 7")));
    EXPECT_EQ(seen->calls[1], std::make_pair(uint32_t{2}, binary));
    EXPECT_EQ(seen->calls[2], std::make_pair(uint32_t{3}, std::string()));
    EXPECT_EQ(seen->calls[3], std::make_pair(uint32_t{0xfffffffeu}, std::string()));
  }
  // One connection served all four, one after another.
  EXPECT_EQ(a->transport->CallStats(2).established, 1u);
  EXPECT_EQ(a->transport->CallStats(2).open, 1u);
  for (const auto& r : {r1, r2, r3, r4}) EXPECT_EQ(r->Runs(), 1);
}

TEST(PeerTransportCallTest, ManyConcurrentCallsAnsweredOutOfOrder) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});

  constexpr int kThreads = 4, kPerThread = 50, kCalls = kThreads * kPerThread;
  std::vector<std::shared_ptr<CallOutcome>> outcomes(kCalls);
  for (auto& o : outcomes) o = std::make_shared<CallOutcome>();
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = t; i < kCalls; i += kThreads) {
        a->transport->Call(2, static_cast<uint32_t>(i % 5), "req-" + std::to_string(i), 20s,
                           Record(outcomes[i]));
      }
    });
  }
  for (auto& th : callers) th.join();
  ASSERT_TRUE(inbox.WaitFor(kCalls)) << inbox.Size();
  // 200 calls in flight: the pool grew to max_call_connections (4), no further.
  EXPECT_EQ(a->transport->CallStats(2).open, 4u);
  EXPECT_EQ(a->transport->CallStats(2).established, 4u);

  std::vector<Inbox::Request> reqs = inbox.Take();
  ASSERT_EQ(reqs.size(), size_t{kCalls});
  std::shuffle(reqs.begin(), reqs.end(), std::mt19937(12345));
  std::vector<std::thread> responders;
  for (int t = 0; t < 3; ++t) {
    responders.emplace_back([&, t] {
      for (size_t k = t; k < reqs.size(); k += 3) {
        auto& r = reqs[k];
        const int i = std::stoi(r.payload.substr(4));
        if (i % 3 == 0) {
          r.respond(Status(Code::kFailedPrecondition, "etcdserver: failed " + std::to_string(i)),
                    "");
        } else {
          r.respond(Status::Ok(), "ans-" + std::to_string(r.method) + "-" + r.payload);
        }
      }
    });
  }
  for (auto& th : responders) th.join();
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(outcomes[i]->Wait()) << "call " << i;
    const auto& o = *outcomes[i];
    if (i % 3 == 0) {
      EXPECT_EQ(o.status.code(), Code::kFailedPrecondition) << i;
      EXPECT_EQ(o.status.message(), "etcdserver: failed " + std::to_string(i));
      EXPECT_EQ(o.payload, "");
    } else {
      EXPECT_TRUE(o.status.ok()) << i << ": " << o.status.ToString();
      EXPECT_EQ(o.payload, "ans-" + std::to_string(i % 5) + "-req-" + std::to_string(i));
    }
  }
  a->Stop();  // nothing may run `done` a second time, not even Stop()
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(outcomes[i]->Runs(), 1) << "call " << i;
}

TEST(PeerTransportCallTest, RespondLaterFromAnotherThreadOnlyFirstCounts) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});

  auto first = StartCall(*a->transport, 2, 4, "slow");
  ASSERT_TRUE(inbox.WaitFor(1));
  Respond respond = inbox.Take().at(0).respond;
  Respond copy = respond;
  std::thread later([respond, copy] {  // e.g. after a Raft round
    respond(Status::Ok(), "first answer");
    copy(Status(Code::kInternal, "second answer"), "ignored");
    respond(Status::Ok(), "third answer");
  });
  later.join();
  ASSERT_TRUE(first->Wait());
  EXPECT_TRUE(first->status.ok()) << first->status.ToString();
  EXPECT_EQ(first->payload, "first answer");

  // The extra answers left no trace: the next call on the connection gets its own answer.
  auto second = StartCall(*a->transport, 2, 5, "next");
  ASSERT_TRUE(inbox.WaitFor(1));
  auto req = inbox.Take().at(0);
  EXPECT_EQ(req.payload, "next");
  req.respond(Status(Code::kAborted, "second"), "2");
  ASSERT_TRUE(second->Wait());
  EXPECT_EQ(second->status.code(), Code::kAborted);
  EXPECT_EQ(second->payload, "2");
  EXPECT_EQ(a->transport->CallStats(2).established, 1u);
  a->Stop();
  EXPECT_EQ(first->Runs(), 1);
  EXPECT_EQ(second->Runs(), 1);
}

TEST(PeerTransportCallTest, DroppedRespondAnswersUnavailable) {
  Inbox inbox;
  auto b = StartMember(Options(2), [&](PeerTransportHandler& h) {
    inbox.Holder()(h);
    h.on_call = [held = h.on_call](uint32_t method, std::string payload, Respond respond) {
      if (method == 1) return;  // dropped at once
      held(method, std::move(payload), std::move(respond));
    };
  });
  ObservedClock clock;  // stands still: no call reaches its deadline
  auto o = Options(1);
  o.clock = &clock;
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});

  // Answered although the clock never moved: the call did not wait for its deadline.
  auto r1 = CallAndWait(*a->transport, 2, 1, "x");
  EXPECT_EQ(r1->status.code(), Code::kUnavailable) << r1->status.ToString();
  EXPECT_NE(r1->status.message().find("dropped"), std::string::npos) << r1->status.ToString();

  // Kept for a while (copied), then every copy destroyed on another thread.
  auto r2 = StartCall(*a->transport, 2, 2, "y");
  ASSERT_TRUE(inbox.WaitFor(1));
  {
    std::vector<Inbox::Request> reqs = inbox.Take();
    Respond copy = reqs.at(0).respond;
    std::thread([reqs = std::move(reqs)]() mutable { reqs.clear(); }).join();
    // A call sent now, on the same connection, and answered: answers travel in the order they
    // are given, so a wrong early answer to r2 would have arrived before this one.
    auto probe = StartCall(*a->transport, 2, 3, "probe");
    ASSERT_TRUE(inbox.WaitFor(1));
    inbox.Take().at(0).respond(Status::Ok(), "probe");
    ASSERT_TRUE(probe->Wait());
    EXPECT_EQ(probe->payload, "probe");
    EXPECT_EQ(r2->Runs(), 0) << "a copy of respond is still alive";
    std::thread([copy = std::move(copy)]() mutable { copy = nullptr; }).join();
  }
  ASSERT_TRUE(r2->Wait());
  EXPECT_EQ(r2->status.code(), Code::kUnavailable) << r2->status.ToString();
  // The connection is still good.
  auto r3 = StartCall(*a->transport, 2, 3, "z");
  ASSERT_TRUE(inbox.WaitFor(1));
  inbox.Take().at(0).respond(Status::Ok(), "fine");
  ASSERT_TRUE(r3->Wait());
  EXPECT_EQ(r3->payload, "fine");
  EXPECT_EQ(a->transport->CallStats(2).established, 1u);
}

// b serves a's calls by calling c, as a follower forwards to the lead, and answers in `done`.
TEST(PeerTransportCallTest, ForwardedCallsAndStopOfTheForwarder) {
  Inbox at_c;
  auto c = StartMember(Options(3), at_c.Holder());
  std::atomic<PeerTransport*> b_transport{nullptr};
  auto b = StartMember(Options(2), [&](PeerTransportHandler& h) {
    h.on_call = [&b_transport](uint32_t method, std::string payload, Respond respond) {
      b_transport.load()->Call(
          3, method, std::move(payload), 20s,
          [respond](Status st, std::string answer) { respond(std::move(st), std::move(answer)); });
    };
  });
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b && c);
  b_transport = b->transport.get();
  a->transport->AddPeer(2, {b->Url()});
  b->transport->AddPeer(3, {c->Url()});

  auto forwarded = StartCall(*a->transport, 2, 6, "via b");
  ASSERT_TRUE(at_c.WaitFor(1));
  auto req = at_c.Take().at(0);
  EXPECT_EQ(req.method, 6u);
  EXPECT_EQ(req.payload, "via b");
  req.respond(Status(Code::kFailedPrecondition, "etcdserver: not leader"), "hint");
  ASSERT_TRUE(forwarded->Wait());
  EXPECT_EQ(forwarded->status, Status(Code::kFailedPrecondition, "etcdserver: not leader"));
  EXPECT_EQ(forwarded->payload, "hint");

  // b stops while its forwarded call waits for c: b's Stop() completes it (its `done` answers
  // a's call into a stopped transport), and a sees its connection to b go.
  std::vector<std::shared_ptr<CallOutcome>> pending;
  for (int i = 0; i < 5; ++i) pending.push_back(StartCall(*a->transport, 2, 7, ""));
  ASSERT_TRUE(at_c.WaitFor(5));
  const auto t0 = SteadyClock::now();
  b->Stop();
  EXPECT_LT(SteadyClock::now() - t0, 2s);
  for (auto& p : pending) {
    ASSERT_TRUE(p->Wait(10s));
    EXPECT_EQ(p->status.code(), Code::kUnavailable) << p->status.ToString();
  }
  for (auto& r : at_c.Take()) r.respond(Status::Ok(), "too late");
}

TEST(PeerTransportCallTest, WithoutOnCallIsUnimplemented) {
  auto b = StartMember(Options(2));
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  auto r = CallAndWait(*a->transport, 2, 1, "anything");
  EXPECT_EQ(r->status.code(), Code::kUnimplemented) << r->status.ToString();
  EXPECT_EQ(r->payload, "");
}

TEST(PeerTransportCallTest, RequestLargerThanLimitIsResourceExhausted) {
  auto seen = std::make_shared<std::atomic<int>>(0);
  auto b = StartMember(Options(2), [seen](PeerTransportHandler& h) {
    h.on_call = [seen](uint32_t, std::string payload, Respond respond) {
      ++*seen;
      respond(Status::Ok(), std::to_string(payload.size()));
    };
  });
  auto o = Options(1);
  o.max_message_bytes = 64 << 10;
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  // The request frame is u64 call ID | u32 method | request bytes.
  auto over = CallAndWait(*a->transport, 2, 1, std::string((64 << 10) - 11, 'x'));
  EXPECT_EQ(over->status.code(), Code::kResourceExhausted) << over->status.ToString();
  EXPECT_NE(over->thread, std::this_thread::get_id());
  EXPECT_EQ(a->transport->CallStats(2).established, 0u) << "nothing to dial for";
  auto fits = CallAndWait(*a->transport, 2, 1, std::string((64 << 10) - 12, 'x'));
  EXPECT_TRUE(fits->status.ok()) << fits->status.ToString();
  EXPECT_EQ(fits->payload, std::to_string((64 << 10) - 12));
  EXPECT_EQ(seen->load(), 1) << "the request over the limit reached the peer";
}

TEST(PeerTransportCallTest, AnswerLargerThanLimitIsResourceExhausted) {
  constexpr size_t kMax = 64 << 10;
  auto ob = Options(2);
  ob.max_message_bytes = kMax;
  // The response frame is u64 call ID | u32 code | u32 message length | message | answer.
  auto b = StartMember(ob, [](PeerTransportHandler& h) {
    h.on_call = [](uint32_t method, std::string, Respond respond) {
      switch (method) {
        case 1:
          return respond(Status::Ok(), std::string(kMax - 16, 'a'));
        case 2:
          return respond(Status::Ok(), std::string(kMax - 15, 'a'));
        case 3:  // the message counts too
          return respond(Status(Code::kInternal, std::string(kMax, 'm')), "");
        default:
          return respond(Status(Code::kInternal, "abc"), std::string(kMax - 19, 'a'));
      }
    };
  });
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  auto fits = CallAndWait(*a->transport, 2, 1, "");
  EXPECT_TRUE(fits->status.ok()) << fits->status.ToString();
  EXPECT_EQ(fits->payload, std::string(kMax - 16, 'a'));
  auto over = CallAndWait(*a->transport, 2, 2, "");
  EXPECT_EQ(over->status.code(), Code::kResourceExhausted) << over->status.ToString();
  EXPECT_EQ(over->payload, "");
  auto long_message = CallAndWait(*a->transport, 2, 3, "");
  EXPECT_EQ(long_message->status.code(), Code::kResourceExhausted);
  auto error_fits = CallAndWait(*a->transport, 2, 4, "");
  EXPECT_EQ(error_fits->status, Status(Code::kInternal, "abc"));
  EXPECT_EQ(error_fits->payload.size(), kMax - 19);
  EXPECT_EQ(a->transport->CallStats(2).established, 1u);
}

TEST(PeerTransportCallTest, RaftMessagesFlowWhileACallIsUnanswered) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  ObservedClock clock;  // stands still: the held call never reaches its deadline
  auto o = Options(1);
  o.clock = &clock;
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));

  // An answer held back by the responder (as a leader's answer waits for a Raft round).
  auto held = StartCall(*a->transport, 2, 2, "");
  ASSERT_TRUE(inbox.WaitFor(1));
  std::vector<raftpb::Message> batch;
  for (uint64_t i = 1; i <= 100; ++i) batch.push_back(Msg(1, 2, i, 100));
  a->transport->Send(batch);
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 100; }, 10s));
  // Another call (on the same connection: it has room) is served meanwhile; the held call, whose
  // answer would have come before it on that connection, is still waiting.
  auto second = StartCall(*a->transport, 2, 3, "");
  ASSERT_TRUE(inbox.WaitFor(2));
  auto requests = inbox.Take();
  requests.at(1).respond(Status::Ok(), "second");
  ASSERT_TRUE(second->Wait());
  EXPECT_EQ(second->payload, "second");
  EXPECT_EQ(held->Runs(), 0);

  requests.at(0).respond(Status::Ok(), "held");
  ASSERT_TRUE(held->Wait());
  EXPECT_EQ(held->payload, "held");
  std::vector<uint64_t> want;
  for (uint64_t i = 1; i <= 100; ++i) want.push_back(i);
  EXPECT_EQ(b->rec->Indexes(), want);
}

}  // namespace
}  // namespace etcdw::peer_transport
