// A small pool of threads for blocking work that must not run on the client API's event loops or
// the apply thread (defragmentation, hashing, snapshot sizing, waiting for compaction). Submit
// may be called from any thread; tasks run on the pool's threads, in no particular order.
#pragma once

#include <absl/base/thread_annotations.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace etcdw::member {

class TaskRunner {
 public:
  // `name` names the threads (see common/thread_name.h).
  TaskRunner(int threads, std::string_view name);
  ~TaskRunner();  // runs the queued tasks, then joins
  void Submit(std::function<void()> task);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // set by the constructor
};

}  // namespace etcdw::member
