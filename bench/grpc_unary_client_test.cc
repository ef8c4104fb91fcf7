// The benchmark's unary gRPC client against both servers: answers, gRPC errors, many calls at
// once, and calls still due when it is destroyed.
#include "grpc_unary_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "servers.h"

namespace etcdw::bench {
namespace {

using testing::Member;

// Waits for `n` replies counted by the callbacks.
struct Countdown {
  std::mutex mu;
  std::condition_variable cv;
  int left;
  explicit Countdown(int n) : left(n) {}
  void Done() {
    std::lock_guard lock(mu);
    if (--left == 0) cv.notify_all();
  }
  bool Wait() {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return left == 0; });
  }
};

// One call, waited for: whether its reply came, and what it said.
struct Answer {
  bool replied = false;
  bool ok = false;
  std::string error;
};
template <typename Request, typename Response>
Answer CallAndWait(GrpcUnaryClient& client, size_t conn, const char* path, const Request& req,
                   Response* resp) {
  Answer a;
  Countdown one(1);
  client.Call(conn, path, req, resp, [&](bool ok, const std::string& error) {
    a.ok = ok;
    a.error = error;
    one.Done();
  });
  a.replied = one.Wait();
  return a;
}

class GrpcUnaryClientTest : public ::testing::TestWithParam<Member::Kind> {};

TEST_P(GrpcUnaryClientTest, AnswersErrorsAndManyCallsAtOnce) {
  Member m(GetParam());
  ASSERT_TRUE(m.Start());
  std::string error;
  auto client = GrpcUnaryClient::Connect({m.endpoint(), m.endpoint()}, &error);
  ASSERT_TRUE(client) << error;

  etcdserverpb::PutRequest put;
  put.set_key("k");
  put.set_value("v1");
  etcdserverpb::PutResponse put_resp;
  Answer a = CallAndWait(*client, 0, "/etcdserverpb.KV/Put", put, &put_resp);
  ASSERT_TRUE(a.replied);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_GT(put_resp.header().revision(), 1);

  // A gRPC error carries its status and message.
  etcdserverpb::RangeRequest future;
  future.set_key("k");
  future.set_revision(put_resp.header().revision() + 100);
  etcdserverpb::RangeResponse range_resp;
  a = CallAndWait(*client, 1, "/etcdserverpb.KV/Range", future, &range_resp);
  ASSERT_TRUE(a.replied);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.error, "grpc-status 11: etcdserver: mvcc: required revision is a future revision");

  // Many calls in flight on both connections, each answered with its own key's value; each
  // reply starts the next call of its loop from the client's thread.
  constexpr int kLoops = 64, kPerLoop = 20;
  struct Loop {
    etcdserverpb::RangeRequest req;
    etcdserverpb::RangeResponse resp;
    int left = kPerLoop;
    std::string wrong;
  };
  std::vector<Loop> loops(kLoops);
  Countdown all(kLoops);
  std::function<void(int)> next = [&](int i) {
    Loop& l = loops[static_cast<size_t>(i)];
    l.req.set_key("k");
    client->Call(static_cast<size_t>(i), "/etcdserverpb.KV/Range", l.req, &l.resp,
                 [&, i](bool o, const std::string& e) {
                   Loop& me = loops[static_cast<size_t>(i)];
                   if (!o) me.wrong = e;
                   if (o && (me.resp.kvs_size() != 1 || me.resp.kvs(0).value() != "v1")) {
                     me.wrong = "wrong answer: " + me.resp.ShortDebugString();
                   }
                   if (--me.left == 0 || !me.wrong.empty()) return all.Done();
                   next(i);
                 });
  };
  for (int i = 0; i < kLoops; ++i) next(i);
  ASSERT_TRUE(all.Wait());
  for (const auto& l : loops) {
    EXPECT_EQ(l.wrong, "");
    EXPECT_EQ(l.left, 0);
  }

  // An unknown method: gRPC's Unimplemented.
  a = CallAndWait(*client, 0, "/etcdserverpb.KV/NoSuchMethod", etcdserverpb::RangeRequest(),
                  &range_resp);
  ASSERT_TRUE(a.replied);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.error.rfind("grpc-status 12: ", 0), 0u) << a.error;
}

TEST_P(GrpcUnaryClientTest, ACallToAStoppedServerFailsAndDestructionDropsRepliesDue) {
  Member m(GetParam());
  ASSERT_TRUE(m.Start());
  std::string error;
  auto client = GrpcUnaryClient::Connect({m.endpoint()}, &error);
  ASSERT_TRUE(client) << error;
  m.Stop();
  etcdserverpb::RangeRequest req;
  req.set_key("k");
  etcdserverpb::RangeResponse resp;
  const Answer a = CallAndWait(*client, 0, "/etcdserverpb.KV/Range", req, &resp);
  ASSERT_TRUE(a.replied);
  EXPECT_FALSE(a.ok);
  EXPECT_FALSE(a.error.empty());

  // Calls on a dead connection keep failing; destroyed with one due, its reply never runs.
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) {
    client->Call(0, "/etcdserverpb.KV/Range", req, &resp,
                 [&ran](bool, const std::string&) { ++ran; });
  }
  client.reset();
  const int after = ran.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ran.load(), after);
  EXPECT_LE(after, 10);
}

INSTANTIATE_TEST_SUITE_P(BothServers, GrpcUnaryClientTest,
                         ::testing::Values(Member::Kind::kEtcdWrapper, Member::Kind::kEtcd),
                         [](const auto& info) {
                           return info.param == Member::Kind::kEtcd ? "Etcd" : "EtcdWrapper";
                         });

}  // namespace
}  // namespace etcdw::bench
