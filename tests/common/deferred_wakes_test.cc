#include "etcdw/common/deferred_wakes.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace etcdw::common {
namespace {

// Records its wake-ups in a shared log.
class Target final : public Wakeable {
 public:
  Target(std::string name, std::string* log) : name_(std::move(name)), log_(log) {}
  void Wake() override {
    *log_ += name_;
    if (then_) then_();
  }
  std::function<void()> then_;  // runs inside Wake

 private:
  std::string name_;
  std::string* log_;
};

TEST(DeferredWakesTest, WithoutAScopeWakesAtOnce) {
  std::string log;
  auto a = std::make_shared<Target>("a", &log);
  DeferredWakes::Wake(a);
  DeferredWakes::Wake(a);
  EXPECT_EQ(log, "aa");
}

TEST(DeferredWakesTest, AScopeWakesEachTargetOnceWhenItCloses) {
  std::string log;
  auto a = std::make_shared<Target>("a", &log);
  auto b = std::make_shared<Target>("b", &log);
  {
    DeferredWakes scope;
    DeferredWakes::Wake(b);
    DeferredWakes::Wake(a);
    DeferredWakes::Wake(b);
    {
      DeferredWakes inner;  // nested: the outermost scope runs them
      DeferredWakes::Wake(a);
    }
    EXPECT_EQ(log, "");
  }
  EXPECT_EQ(log, "ba");  // first-named order
  {
    DeferredWakes again;  // a closed scope owes nothing more
  }
  EXPECT_EQ(log, "ba");
}

TEST(DeferredWakesTest, HoldsItsTargetsUntilItCloses) {
  std::string log;
  std::weak_ptr<Target> weak;
  {
    DeferredWakes scope;
    auto a = std::make_shared<Target>("a", &log);
    weak = a;
    DeferredWakes::Wake(std::move(a));
    EXPECT_FALSE(weak.expired());
  }
  EXPECT_EQ(log, "a");
  EXPECT_TRUE(weak.expired());
}

TEST(DeferredWakesTest, AWakeUpThatWakesAnotherRunsItToo) {
  std::string log;
  auto a = std::make_shared<Target>("a", &log);
  auto b = std::make_shared<Target>("b", &log);
  auto c = std::make_shared<Target>("c", &log);
  a->then_ = [&] { DeferredWakes::Wake(b); };  // outside any scope by then: at once
  b->then_ = [&] {
    DeferredWakes scope;  // a scope opened while the outer one's wake-ups run
    DeferredWakes::Wake(c);
    DeferredWakes::Wake(c);
  };
  {
    DeferredWakes scope;
    DeferredWakes::Wake(a);
  }
  EXPECT_EQ(log, "abc");
}

TEST(DeferredWakesTest, ScopesBelongToTheirThread) {
  std::string log_here, log_there;
  auto here = std::make_shared<Target>("h", &log_here);
  DeferredWakes scope;
  std::thread t([&] {
    auto there = std::make_shared<Target>("t", &log_there);
    DeferredWakes::Wake(there);  // no scope on this thread
  });
  t.join();
  EXPECT_EQ(log_there, "t");
  DeferredWakes::Wake(here);
  EXPECT_EQ(log_here, "");
}

}  // namespace
}  // namespace etcdw::common
