// Why and when a process stops: the stop request shared by the signal thread, the wrapper's
// /stop endpoint, fatal errors of the store and main; and the signal thread itself. Both binaries
// use them (etcd-wrapper and etcdbrctl's long-running commands).
#pragma once

#include <absl/base/thread_annotations.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "etcdw/common/clock.h"

namespace etcdw::common {

// The first request wins; later ones are ignored. `cancelled()` is a flag that blocking
// operations (HTTP calls to the sidecar) poll to give up early.
class StopRequest {
 public:
  void Request(int exit_code, std::string reason);
  void Wait() const;
  // Whether a stop is requested within `d`.
  bool WaitFor(std::chrono::milliseconds d) const;
  // Whether a stop is requested before `clock` reaches `deadline`.
  bool WaitUntil(const Clock& clock, Clock::TimePoint deadline) const;
  bool requested() const { return cancelled_.load(); }
  const std::atomic<bool>* cancelled() const { return &cancelled_; }
  int exit_code() const;
  std::string reason() const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> cancelled_{false};  // set under mu_, read without it
  int exit_code_ ABSL_GUARDED_BY(mu_) = 0;
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

// The signals the process handles on its own thread; block them in every thread (call
// BlockStopSignals() first thing in main, before any thread starts).
sigset_t StopSignals();
void BlockStopSignals();

// Receives SIGTERM and SIGINT on a dedicated thread. The first one calls `on_first_signal` (when
// set) with the signal's Go name ("terminated" / "interrupt"), on the catcher's thread, and then
// requests a graceful stop with exit code 0; a second one exits the process with 1 at once.
// (The wrapper records the name in its exit-code file, wrapper/exit_code.h.)
class SignalCatcher {
 public:
  using SignalHook = std::function<void(const std::string& signal_name)>;
  explicit SignalCatcher(StopRequest* stop, SignalHook on_first_signal = nullptr);
  ~SignalCatcher();  // joins the thread
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;

 private:
  void Loop();
  StopRequest* stop_;
  SignalHook on_first_signal_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace etcdw::common
