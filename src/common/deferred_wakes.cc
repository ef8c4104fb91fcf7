#include "etcdw/common/deferred_wakes.h"

#include <algorithm>

namespace etcdw::common {

namespace {

// This thread's open scopes.
struct State {
  int depth = 0;
  std::vector<std::shared_ptr<Wakeable>> owed;  // distinct, in first-named order
};
thread_local State tls_state;

}  // namespace

DeferredWakes::DeferredWakes() { ++tls_state.depth; }

DeferredWakes::~DeferredWakes() {
  if (--tls_state.depth > 0) return;
  // The scope is closed before the wake-ups run: one that names another target wakes it at
  // once, and one that opens a scope of its own runs that scope's wake-ups itself.
  std::vector<std::shared_ptr<Wakeable>> owed = std::move(tls_state.owed);
  tls_state.owed.clear();
  for (auto& t : owed) t->Wake();
}

void DeferredWakes::Wake(std::shared_ptr<Wakeable> target) {
  if (tls_state.depth == 0) {
    target->Wake();
    return;
  }
  // Batches name a handful of targets (one per event loop): a linear search beats a set.
  if (std::find(tls_state.owed.begin(), tls_state.owed.end(), target) == tls_state.owed.end()) {
    tls_state.owed.push_back(std::move(target));
  }
}

}  // namespace etcdw::common
