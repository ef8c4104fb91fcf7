// Why and when the process stops: the stop request shared by the signal thread, the /stop
// endpoint, fatal errors of the store and main; and the signal thread itself.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace etcdw::wrapper {

// The first request wins; later ones are ignored. `cancelled()` is a flag that blocking
// operations (HTTP calls to the sidecar) poll to give up early.
class StopRequest {
 public:
  void Request(int exit_code, std::string reason);
  void Wait() const;
  // Whether a stop is requested within `d`.
  bool WaitFor(std::chrono::milliseconds d) const;
  bool requested() const { return cancelled_.load(); }
  const std::atomic<bool>* cancelled() const { return &cancelled_; }
  int exit_code() const;
  std::string reason() const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> cancelled_{false};
  int exit_code_ = 0;
  std::string reason_;
};

// The signals the process handles on its own thread; block them in every thread (call
// BlockStopSignals() first thing in main, before any thread starts).
sigset_t StopSignals();
void BlockStopSignals();

// Receives SIGTERM and SIGINT on a dedicated thread. The first one writes its Go name
// ("terminated" / "interrupt") to the exit-code file when one is set (see exit_code.h) and
// requests a graceful stop with exit code 0; a second one exits the process with 1 at once.
class SignalCatcher {
 public:
  SignalCatcher(StopRequest* stop, std::string exit_code_file);
  ~SignalCatcher();  // joins the thread
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;

 private:
  void Loop();
  StopRequest* stop_;
  std::string exit_code_file_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace etcdw::wrapper
