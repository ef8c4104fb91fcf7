#include "object_http.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "etcdw/common/logging.h"

namespace etcdw::sidecar::objhttp {

bool Succeeded(const Result<common::HttpResponse>& r) {
  return r.ok() && r->status >= 200 && r->status < 300;
}

bool Retryable(const Result<common::HttpResponse>& r) {
  if (!r.ok()) {
    return r.status().code() == Code::kUnavailable || r.status().code() == Code::kDeadlineExceeded;
  }
  return r->status == 408 || r->status == 429 || r->status >= 500;
}

void Stopper::Stop() {
  std::lock_guard lock(mu_);
  flag_ = true;
  cv_.notify_all();
}

bool Stopper::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return flag_.load(); });
}

Result<common::HttpResponse> SendWithRetries(
    const std::function<Result<common::HttpResponse>()>& send, const RetryPolicy& policy,
    std::string_view store, const std::string& what,
    const std::function<std::string(const Result<common::HttpResponse>&)>& describe,
    Stopper* stopper) {
  for (int attempt = 0;; ++attempt) {
    Result<common::HttpResponse> r = send();
    if (Succeeded(r) || !Retryable(r) || attempt >= policy.max_retries) return r;
    if (stopper != nullptr && stopper->stopped()) return r;
    const auto wait = policy.first_backoff * (int64_t{1} << attempt);
    log::Warn(
        std::string(store) + " request failed, retrying",
        {log::F("what", what), log::F("attempt", static_cast<int64_t>(attempt) + 1),
         log::F("error", describe(r)), log::F("retryInMs", static_cast<int64_t>(wait.count()))});
    if (stopper != nullptr) {
      if (!stopper->SleepFor(wait)) return r;
    } else {
      std::this_thread::sleep_for(wait);
    }
  }
}

Status UploadPartsInParallel(int64_t parts, int workers,
                             const std::function<Status(int64_t, Stopper&)>& upload) {
  // Shared by the threads: `next` hands out the parts; `first_error` is written under `mu` and
  // read after the joins.
  std::atomic<int64_t> next{0};
  Stopper stopper;
  std::mutex mu;
  Status first_error;
  auto work = [&] {
    while (!stopper.stopped()) {
      const int64_t i = next.fetch_add(1);
      if (i >= parts) return;
      Status st = upload(i, stopper);
      if (st.ok()) continue;
      std::lock_guard lock(mu);
      if (first_error.ok()) first_error = std::move(st);
      stopper.Stop();
      return;
    }
  };
  const int64_t threads_wanted = std::max<int64_t>(1, std::min<int64_t>(workers, parts));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(threads_wanted));
  for (int64_t w = 0; w < threads_wanted; ++w) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  return first_error;
}

}  // namespace etcdw::sidecar::objhttp
