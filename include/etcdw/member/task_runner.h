// A small pool of threads for blocking work that must not run on gRPC's callback threads or
// the apply thread (defragmentation, hashing, snapshot sizing, waiting for compaction).
#pragma once

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
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace etcdw::member
