// What the HTTP object stores (S3, ABS) share (private to src/sidecar): which answers succeeded
// or may succeed when tried again, retries with exponential backoff, and uploading the parts of
// one object on several threads that all stop at the first part that fails for good.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "etcdw/common/http.h"
#include "etcdw/common/status.h"

namespace etcdw::sidecar::objhttp {

// A 2xx answer.
bool Succeeded(const Result<common::HttpResponse>& r);
// Whether trying again may help: a transport failure (kUnavailable), a timeout, or an answer
// 408, 429 or 5xx. A certificate that does not verify (kUnauthenticated) is not retried.
bool Retryable(const Result<common::HttpResponse>& r);

// A flag that stops the workers of one upload, and wakes those waiting to retry. Every method
// may be called from any thread.
class Stopper {
 public:
  void Stop();
  bool stopped() const { return flag_.load(); }
  // For HttpClientRequest::cancel: set once stopped.
  const std::atomic<bool>* flag() const { return &flag_; }
  // Sleeps for `d` unless stopped first; false when stopped.
  bool SleepFor(std::chrono::milliseconds d);

 private:
  // `flag_` is atomic so that workers and HTTP calls poll it without the lock; it is set under
  // `mu_` so that a SleepFor between its check and its wait cannot miss the wake-up.
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> flag_{false};
};

struct RetryPolicy {
  // Tried again up to max_retries times, after first_backoff, then twice as long each time.
  int max_retries = 5;
  std::chrono::milliseconds first_backoff{1000};
};

// Calls `send` until it succeeds, fails in a way that is not Retryable, or has been retried
// policy.max_retries times; returns the last result. Each retry is logged as a warning with
// `store` ("S3", "ABS"), `what` and describe(result). With a stopper, gives up (returning the
// last result) once it is stopped, also while waiting.
Result<common::HttpResponse> SendWithRetries(
    const std::function<Result<common::HttpResponse>()>& send, const RetryPolicy& policy,
    std::string_view store, const std::string& what,
    const std::function<std::string(const Result<common::HttpResponse>&)>& describe,
    Stopper* stopper);

// Calls upload(i, stopper) for every i in [0, parts), on min(workers, parts) threads that take
// the next i in turn. The first call to return an error stops the others (the stopper is
// stopped: a call in progress should pass stopper.flag() to its requests, and no new call
// starts); that error is returned once every thread has ended. OK when every call succeeded.
Status UploadPartsInParallel(int64_t parts, int workers,
                             const std::function<Status(int64_t, Stopper&)>& upload);

}  // namespace etcdw::sidecar::objhttp
