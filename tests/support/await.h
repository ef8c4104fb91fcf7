// Waiting in tests: for a callback's answer (Await), and for a condition to hold (WaitUntil).
// Header-only: the unit tests, also built under the sanitizers, link no test support library.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <utility>

#include "etcdw/common/status.h"

namespace etcdw::testsupport {

// Runs call(callback) and waits until the callback has been given its Result<T>.
template <typename T, typename Fn>
Result<T> Await(Fn&& call) {
  auto p = std::make_shared<std::promise<Result<T>>>();
  auto f = p->get_future();
  call([p](Result<T> r) { p->set_value(std::move(r)); });
  return f.get();
}

// Polls `cond` every `period` until it holds or `timeout` passes; returns its last value. The
// one polling loop of the tests: to wait for an observable event, never to let time pass.
template <typename Cond>
bool WaitUntil(Cond cond, std::chrono::milliseconds timeout = std::chrono::seconds(20),
               std::chrono::milliseconds period = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(period);
  }
  return true;
}

}  // namespace etcdw::testsupport
