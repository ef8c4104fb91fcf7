#include "etcdw/member/task_runner.h"

#include <string>

#include "etcdw/common/thread_name.h"

namespace etcdw::member {

TaskRunner::TaskRunner(int threads, std::string_view name) {
  for (int i = 0; i < threads; ++i) {
    threads_.push_back(common::NamedThread(std::string(name), [this] {
      while (true) {
        std::function<void()> task;
        {
          std::unique_lock lock(mu_);
          cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
          if (tasks_.empty()) return;
          task = std::move(tasks_.front());
          tasks_.pop_front();
        }
        task();
      }
    }));
  }
}

TaskRunner::~TaskRunner() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void TaskRunner::Submit(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

}  // namespace etcdw::member
