// The initialisation loop and the config fetch against the fake sidecar, with short intervals.
#include "etcdw/wrapper/bootstrap.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "etcdw/common/clock.h"
#include "fake_sidecar.h"
#include "support/await.h"
#include "support/scratch_dir.h"

namespace etcdw::wrapper {
namespace {

using namespace std::chrono_literals;
using testing::FakeSidecar;

class BootstrapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<testsupport::ScratchDir>("boot");
    dir_ = scratch_->path();
    ASSERT_FALSE(scratch_->path().empty());
    options_.exit_code_file = dir_ + "/exit_code";
    options_.poll_interval = 10ms;
    options_.max_backoff = 40ms;
    options_.config_retry_interval = 10ms;
  }
  void TearDown() override { scratch_.reset(); }

  std::unique_ptr<SidecarClient> Client(int port) {
    StartEtcdOptions o;
    o.sidecar_host_port = "127.0.0.1:" + std::to_string(port);
    auto c = SidecarClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  std::unique_ptr<testsupport::ScratchDir> scratch_;  // removed by TearDown
  std::string dir_;
  BootstrapOptions options_;
  common::StopRequest stop_;
};

TEST(InitStateTest, OnlyExactTokensCount) {
  EXPECT_EQ(ParseInitState("New"), InitState::kNew);
  EXPECT_EQ(ParseInitState("Successful"), InitState::kSuccessful);
  EXPECT_EQ(ParseInitState("Failed"), InitState::kFailed);
  for (const char* other : {"Progress", "", "New\n", "Success", "successful"}) {
    EXPECT_EQ(ParseInitState(other), InitState::kInProgress) << other;
  }
}

TEST_F(BootstrapTest, RetriggersAfterFailureAndLeavesOnSuccess) {
  FakeSidecar sidecar;
  sidecar.AddOutcome({2, "Failed"});
  sidecar.AddOutcome({1, "Successful"});
  ASSERT_TRUE(sidecar.Start(0));
  std::ofstream(options_.exit_code_file) << "terminated";
  auto client = Client(sidecar.port());
  ASSERT_TRUE(RunInitialization(*client, options_, stop_).ok());
  EXPECT_EQ(sidecar.CollapsedCalls(),
            (std::vector<std::string>{"status:New", "start:sanity", "status:Progress",
                                      "status:Failed", "status:New", "start:sanity",
                                      "status:Progress", "status:Successful"}));
  // No poll after Successful.
  EXPECT_EQ(sidecar.calls().back(), "status:Successful");
}

TEST_F(BootstrapTest, AlreadySuccessfulSkipsTheTrigger) {
  FakeSidecar sidecar;
  sidecar.AddOutcome({0, "Successful"});
  ASSERT_TRUE(sidecar.Start(0));
  auto client = Client(sidecar.port());
  ASSERT_TRUE(RunInitialization(*client, options_, stop_).ok());
  EXPECT_EQ(sidecar.StartModes(), (std::vector<std::string>{"full"}));
}

TEST_F(BootstrapTest, TimeoutAndStopEndTheLoop) {
  FakeSidecar sidecar;
  sidecar.AddOutcome({1000000, "Successful"});  // in progress for ever
  ASSERT_TRUE(sidecar.Start(0));
  auto client = Client(sidecar.port());
  options_.timeout = 200ms;
  Status st = RunInitialization(*client, options_, stop_);
  EXPECT_EQ(st.code(), Code::kDeadlineExceeded) << st.ToString();
  EXPECT_NE(st.message().find("last status InProgress"), std::string::npos) << st.message();

  options_.timeout = 0ms;
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    stop_.Request(0, "test");
  });
  st = RunInitialization(*client, options_, stop_);
  t.join();
  EXPECT_EQ(st.code(), Code::kCanceled) << st.ToString();
}

TEST_F(BootstrapTest, UnreachableSidecarBacksOff) {
  FakeSidecar probe;  // find a port nobody listens on
  ASSERT_TRUE(probe.Start(0));
  int port = probe.port();
  probe.Stop();
  auto client = Client(port);
  options_.timeout = 300ms;
  auto start = std::chrono::steady_clock::now();
  Status st = RunInitialization(*client, options_, stop_);
  EXPECT_EQ(st.code(), Code::kDeadlineExceeded);
  EXPECT_NE(st.message().find("connect"), std::string::npos) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST_F(BootstrapTest, AFailingSidecarIsPolledWithWaitsThatDoubleUpToTheCap) {
  common::ManualClock clock;
  options_.clock = &clock;
  options_.poll_interval = 1s;
  options_.max_backoff = 4s;
  FakeSidecar sidecar;
  sidecar.SetStatusFailure(503);
  ASSERT_TRUE(sidecar.Start(0));
  auto client = Client(sidecar.port());
  auto polls = [&] { return sidecar.calls().size(); };
  // The loop is back in its wait (it looked at the clock after `looks`).
  auto waiting_since = [&](uint64_t looks) {
    return testsupport::WaitUntil([&] { return clock.Looks() > looks; });
  };
  uint64_t looks = clock.Looks();
  auto run =
      std::async(std::launch::async, [&] { return RunInitialization(*client, options_, stop_); });
  ASSERT_TRUE(testsupport::WaitUntil([&] { return polls() == 1; }));  // the first poll at once
  ASSERT_TRUE(waiting_since(looks));
  // Then after waits of 1, 2, 4 and 4 s: polls at 1, 3, 7 and 11 s.
  auto at = 0ms;
  size_t expected = 1;
  for (std::chrono::milliseconds due : {1000ms, 3000ms, 7000ms, 11000ms}) {
    clock.Advance(due - 1ms - at);
    looks = clock.Looks();
    ASSERT_TRUE(waiting_since(looks + 1)) << due.count();  // it saw the time, twice
    EXPECT_EQ(polls(), expected) << "polled before " << due.count() << " ms";
    looks = clock.Looks();
    clock.Advance(1ms);
    at = due;
    ++expected;
    ASSERT_TRUE(testsupport::WaitUntil([&] { return polls() == expected; })) << due.count();
    ASSERT_TRUE(waiting_since(looks + 1));
  }
  // Reachable again: polled every poll interval, the backoff reset.
  sidecar.SetStatusFailure(0);
  clock.Advance(4s);
  ASSERT_TRUE(testsupport::WaitUntil([&] { return polls() >= expected + 2; }));  // New, start
  looks = clock.Looks();
  ASSERT_TRUE(waiting_since(looks));
  const size_t before = polls();
  clock.Advance(1s);
  ASSERT_TRUE(testsupport::WaitUntil([&] { return polls() > before; }));
  stop_.Request(0, "test");
  EXPECT_EQ(run.get().code(), Code::kCanceled);
  std::vector<std::string> calls = sidecar.calls();
  EXPECT_EQ(std::vector<std::string>(calls.begin(), calls.begin() + 5),
            std::vector<std::string>(5, "status:HTTP 503"));
  EXPECT_EQ(calls.at(5), "status:New");
  EXPECT_EQ(calls.at(6), "start:full");
}

TEST_F(BootstrapTest, ConfigIsRetriedAFixedNumberOfTimes) {
  FakeSidecar sidecar;
  sidecar.SetConfig(503, "not yet");
  ASSERT_TRUE(sidecar.Start(0));
  auto client = Client(sidecar.port());
  options_.config_attempts = 3;
  auto r = FetchConfig(*client, options_, stop_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("after 3 attempts"), std::string::npos);
  EXPECT_NE(r.status().message().find("HTTP status 503: not yet"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(sidecar.calls().size(), 3u);
  // 201 and 202 count as success too, and an empty body is a valid (all defaults) config.
  sidecar.SetConfig(202, "");
  auto ok = FetchConfig(*client, options_, stop_);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, "");
}

}  // namespace
}  // namespace etcdw::wrapper
