// Turns a call that reports through a callback into a blocking one, for tests.
#pragma once

#include <future>
#include <memory>
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

}  // namespace etcdw::testsupport
