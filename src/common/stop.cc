#include "etcdw/common/stop.h"

#include <pthread.h>

#include <cstdlib>

#include "etcdw/common/logging.h"

namespace etcdw::common {

namespace log = etcdw::log;

void StopRequest::Request(int exit_code, std::string reason) {
  std::lock_guard lock(mu_);
  if (cancelled_.load()) return;
  exit_code_ = exit_code;
  reason_ = std::move(reason);
  cancelled_.store(true);
  cv_.notify_all();
}

void StopRequest::Wait() const {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return cancelled_.load(); });
}

bool StopRequest::WaitFor(std::chrono::milliseconds d) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, d, [&] { return cancelled_.load(); });
}

bool StopRequest::WaitUntil(const Clock& clock, Clock::TimePoint deadline) const {
  std::unique_lock lock(mu_);
  return clock.WaitUntil(lock, cv_, deadline, [&] { return cancelled_.load(); });
}

int StopRequest::exit_code() const {
  std::lock_guard lock(mu_);
  return exit_code_;
}

std::string StopRequest::reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

sigset_t StopSignals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGUSR1);  // the catcher's own wake-up when the process is done
  return s;
}

void BlockStopSignals() {
  sigset_t s = StopSignals();
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

SignalCatcher::SignalCatcher(StopRequest* stop, SignalHook on_first_signal)
    : stop_(stop), on_first_signal_(std::move(on_first_signal)), thread_([this] { Loop(); }) {}

SignalCatcher::~SignalCatcher() {
  done_.store(true);
  pthread_kill(thread_.native_handle(), SIGUSR1);
  thread_.join();
}

void SignalCatcher::Loop() {
  const sigset_t signals = StopSignals();
  int count = 0;
  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGUSR1) {
      // Our own wake-up when the process is done; one from outside is ignored (returning
      // would leave SIGTERM and SIGINT blocked in every thread, unanswered).
      if (done_.load()) return;
      log::Debug("ignoring SIGUSR1");
      continue;
    }
    const char* name = sig == SIGTERM ? "terminated" : "interrupt";
    if (++count > 1) {
      log::Warn("second stop signal, exiting immediately", {log::F("signal", name)});
      std::_Exit(1);
    }
    log::Info("caught shutdown signal", {log::F("signal", name)});
    if (on_first_signal_) on_first_signal_(name);
    stop_->Request(0, name);
  }
}

}  // namespace etcdw::common
