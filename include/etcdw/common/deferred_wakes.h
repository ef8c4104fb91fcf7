// Wake-ups a thread owes other threads, held back until it has produced a whole batch of work
// for them.
//
// A producer that hands items one by one to a consumer on another core (a mailbox with an
// eventfd, a queue with a condition variable) wakes it on the first item; the consumer takes
// that item and goes back to sleep before the second arrives, and is woken again. On a VM where
// every wake-up of an idle vCPU costs tens of microseconds, a watch event for 100 streams cost
// several wake-ups of each event loop. A producer that opens a `DeferredWakes` scope around the
// batch makes those wake-ups happen once each, when the scope closes.
//
// Contract: `DeferredWakes::Wake(target)` calls `target->Wake()` at once when no scope is open on
// the calling thread; inside a scope it calls it once per distinct target when the outermost
// scope closes, in the order the targets were first named. The scope holds each target (a
// shared_ptr) until then. Consumers must tolerate the delay: only what the producer does between
// the item and the end of its scope is added to the item's latency.
#pragma once

#include <memory>
#include <vector>

namespace etcdw::common {

// Something a thread may sleep on until woken.
class Wakeable {
 public:
  virtual ~Wakeable() = default;
  virtual void Wake() = 0;
};

class DeferredWakes {
 public:
  // Opens a scope on this thread; scopes nest (the outermost runs the wake-ups).
  DeferredWakes();
  ~DeferredWakes();
  DeferredWakes(const DeferredWakes&) = delete;
  DeferredWakes& operator=(const DeferredWakes&) = delete;

  // Wakes `target` now, or when this thread's outermost open scope closes.
  static void Wake(std::shared_ptr<Wakeable> target);
};

}  // namespace etcdw::common
