// A linearizability checker for histories of client operations on a map of registers (the key
// value store of the simulation), in the style of Wing & Gong's search with Lowe's memoization:
// depth-first search for an order of the operations that respects real time and the sequential
// semantics of a register, skipping states (set of linearized operations, register value) that
// were already explored. Each key is an independent register, so the history is split per key
// and each part checked alone (linearizability is compositional), which keeps searches small.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace etcdw::sim {

// The response time of an operation whose outcome is unknown (it timed out, or the member that
// took it crashed): it may have taken effect at any moment after its call, or never.
inline constexpr uint64_t kNeverReturned = UINT64_MAX;

// kCas: compare-and-set, writes `value` if the register holds `expected` (a Txn whose compare
// names the value, or the key's absence for 0); `succeeded` says which it did when it returned.
enum class OpKind { kPut, kGet, kCas };

// One client operation. Times are points of one logical clock shared by all clients; an operation
// whose call is at or before another's return is taken as concurrent with it. Registers start at
// 0 (an absent key). Each put and CAS must write its own value, non-zero and unique per key: the
// checker drops indeterminate writes nobody can have observed, which is sound only then.
struct Operation {
  uint64_t id = 0;
  OpKind kind = OpKind::kGet;
  std::string key;
  int64_t value = 0;  // the value written (put, CAS) or read (get)
  uint64_t call = 0;
  uint64_t ret = kNeverReturned;
  int64_t expected = 0;    // kCas: the value compared
  bool succeeded = false;  // kCas that returned: whether it wrote
};

enum class Verdict { kLinearizable, kNotLinearizable, kUnknown };

struct CheckResult {
  Verdict verdict = Verdict::kLinearizable;
  std::string key;     // the key whose history failed (or ran out of budget)
  std::string detail;  // the operations of that key and the longest order found
  uint64_t steps = 0;  // search steps used, over all keys
};

// Checks a history. Gets with an unknown outcome must be left out by the caller (they constrain
// nothing); puts with ret == kNeverReturned are kept. The search of each key stops after
// `max_steps_per_key` steps with kUnknown, so a pathological history cannot hang a test.
CheckResult CheckLinearizable(const std::vector<Operation>& history,
                              uint64_t max_steps_per_key = 2'000'000);

const char* VerdictName(Verdict v);

}  // namespace etcdw::sim
