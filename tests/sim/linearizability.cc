#include "sim/linearizability.h"

#include <algorithm>
#include <map>
#include <unordered_set>

namespace etcdw::sim {
namespace {

// A call or return event in the time-ordered, doubly linked event list of one key.
struct Event {
  size_t op = 0;
  bool is_call = false;
  int prev = -1;
  int next = -1;
  int match = -1;  // a call's return event
};

// A search state already explored: which operations are linearized, and the register's value.
struct Seen {
  std::vector<uint64_t> bits;
  int64_t value = 0;
  bool operator==(const Seen&) const = default;
};

struct SeenHash {
  size_t operator()(const Seen& s) const {
    uint64_t h = static_cast<uint64_t>(s.value) * 0x9E3779B97F4A7C15ULL;
    for (uint64_t w : s.bits) h = (h ^ w) * 0x100000001B3ULL + (h >> 29);
    return static_cast<size_t>(h);
  }
};

std::string Describe(const std::vector<Operation>& ops, const std::vector<size_t>& best) {
  std::string s = "operations (id kind value [call,ret]):\n";
  std::vector<const Operation*> sorted;
  for (const auto& op : ops) sorted.push_back(&op);
  std::sort(sorted.begin(), sorted.end(),
            [](const Operation* a, const Operation* b) { return a->call < b->call; });
  size_t shown = 0;
  for (const Operation* op : sorted) {
    if (++shown > 60) {
      s += "  ... (" + std::to_string(sorted.size() - 60) + " more)\n";
      break;
    }
    std::string what = op->kind == OpKind::kPut ? " put " : " get ";
    if (op->kind == OpKind::kCas) {
      what = " cas " + std::to_string(op->expected) + "->";
    }
    s +=
        "  " + std::to_string(op->id) + what + std::to_string(op->value) +
        (op->kind == OpKind::kCas && op->ret != kNeverReturned ? (op->succeeded ? " ok" : " failed")
                                                               : "") +
        " [" + std::to_string(op->call) + "," +
        (op->ret == kNeverReturned ? std::string("?") : std::to_string(op->ret)) + "]\n";
  }
  s += "longest linearizable prefix (" + std::to_string(best.size()) + " of " +
       std::to_string(ops.size()) + " ops):";
  size_t from = best.size() > 20 ? best.size() - 20 : 0;
  if (from > 0) s += " ...";
  for (size_t i = from; i < best.size(); ++i) s += " " + std::to_string(ops[best[i]].id);
  s += "\n";
  return s;
}

// The ways operation `op` may take effect on a register holding `value`: a CAS whose outcome is
// unknown either wrote (option 0) or did nothing (option 1); every other operation has one.
int Options(const Operation& op) {
  return op.kind == OpKind::kCas && op.ret == kNeverReturned ? 2 : 1;
}

// Whether `op`, taking effect as `option` on a register holding `value`, agrees with what it
// returned; if so *next is the register's value after it.
bool Apply(const Operation& op, int option, int64_t value, int64_t* next) {
  switch (op.kind) {
    case OpKind::kPut:
      *next = op.value;
      return true;
    case OpKind::kGet:
      *next = value;
      return op.value == value;
    case OpKind::kCas: {
      const bool writes = op.ret == kNeverReturned ? option == 0 : op.succeeded;
      if (!writes) {
        *next = value;
        return op.ret == kNeverReturned || value != op.expected;
      }
      *next = op.value;
      return value == op.expected;
    }
  }
  return false;
}

// The search for one key's register.
Verdict CheckRegister(const std::vector<Operation>& ops, uint64_t max_steps, uint64_t& steps,
                      std::string& detail) {
  const size_t n = ops.size();
  // Events sorted by time; at equal times calls come first (the operations overlap).
  std::vector<Event> ev(2 * n + 1);  // ev[0] is the list head
  std::vector<std::pair<std::pair<uint64_t, int>, int>> order;
  for (size_t i = 0; i < n; ++i) {
    ev[1 + 2 * i] = Event{i, true, -1, -1, static_cast<int>(2 + 2 * i)};
    ev[2 + 2 * i] = Event{i, false, -1, -1, -1};
    order.push_back({{ops[i].call, 0}, static_cast<int>(1 + 2 * i)});
    order.push_back({{ops[i].ret, 1}, static_cast<int>(2 + 2 * i)});
  }
  std::sort(order.begin(), order.end());
  int prev = 0;
  for (const auto& [key, idx] : order) {
    ev[prev].next = idx;
    ev[idx].prev = prev;
    prev = idx;
  }
  auto unlink = [&](int e) {
    ev[ev[e].prev].next = ev[e].next;
    if (ev[e].next >= 0) ev[ev[e].next].prev = ev[e].prev;
  };
  auto relink = [&](int e) {
    ev[ev[e].prev].next = e;
    if (ev[e].next >= 0) ev[ev[e].next].prev = e;
  };

  std::vector<uint64_t> bits((n + 63) / 64);
  std::unordered_set<Seen, SeenHash> cache;
  struct Frame {
    int call;
    int64_t value_before;
    int option;  // how the operation took effect (Options)
  };
  std::vector<Frame> stack;
  std::vector<size_t> best;
  int64_t value = 0;
  int cur = ev[0].next;
  int first_option = 0;  // at `cur`, the options below this were tried already
  while (ev[0].next >= 0) {
    if (++steps > max_steps) return Verdict::kUnknown;
    const Event& e = ev[cur];
    if (e.is_call) {
      const Operation& op = ops[e.op];
      bool linearized = false;
      for (int option = first_option; option < Options(op) && !linearized; ++option) {
        int64_t next_value = 0;
        if (!Apply(op, option, value, &next_value)) continue;
        bits[e.op / 64] |= uint64_t{1} << (e.op % 64);
        if (cache.insert(Seen{bits, next_value}).second) {
          stack.push_back({cur, value, option});
          value = next_value;
          unlink(cur);
          unlink(e.match);
          linearized = true;
        } else {
          bits[e.op / 64] &= ~(uint64_t{1} << (e.op % 64));
        }
      }
      first_option = 0;
      cur = linearized ? ev[0].next : e.next;
    } else {
      // A return: its operation had to be linearized before this point. Backtrack.
      if (stack.size() > best.size()) {
        best.clear();
        for (const Frame& f : stack) best.push_back(ev[f.call].op);
      }
      if (stack.empty()) {
        detail = Describe(ops, best);
        return Verdict::kNotLinearizable;
      }
      Frame f = stack.back();
      stack.pop_back();
      value = f.value_before;
      size_t op = ev[f.call].op;
      bits[op / 64] &= ~(uint64_t{1} << (op % 64));
      relink(ev[f.call].match);
      relink(f.call);
      // The same operation's next way of taking effect, if it has one, then the ones after it.
      cur = f.call;
      first_option = f.option + 1;
    }
  }
  return Verdict::kLinearizable;
}

}  // namespace

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kLinearizable:
      return "linearizable";
    case Verdict::kNotLinearizable:
      return "NOT linearizable";
    case Verdict::kUnknown:
      return "unknown (search budget exhausted)";
  }
  return "?";
}

CheckResult CheckLinearizable(const std::vector<Operation>& history, uint64_t max_steps_per_key) {
  std::map<std::string, std::vector<Operation>> by_key;
  for (const auto& op : history) by_key[op.key].push_back(op);
  // An indeterminate write that nobody can have observed may as well not have happened: leave it
  // out, or the search would try it at every point of the history. Its value is observed when a
  // get returned it or a CAS compared it (values are told apart: each write has its own). Its
  // taking effect could also explain a CAS that failed: any failed CAS, for a put, which may
  // overwrite any value; a failed CAS that compared the same value, for a CAS, which overwrites
  // only that one. Those are kept.
  for (auto& [key, ops] : by_key) {
    std::unordered_set<int64_t> observed, failed_compares;
    for (const auto& op : ops) {
      if (op.kind == OpKind::kGet) observed.insert(op.value);
      if (op.kind == OpKind::kCas) {
        observed.insert(op.expected);
        if (op.ret != kNeverReturned && !op.succeeded) failed_compares.insert(op.expected);
      }
    }
    std::erase_if(ops, [&](const Operation& op) {
      if (op.kind == OpKind::kGet || op.ret != kNeverReturned || observed.count(op.value)) {
        return false;
      }
      return op.kind == OpKind::kPut ? failed_compares.empty()
                                     : failed_compares.count(op.expected) == 0;
    });
  }
  CheckResult result;
  for (const auto& [key, ops] : by_key) {
    uint64_t steps = 0;
    std::string detail;
    Verdict v = CheckRegister(ops, max_steps_per_key, steps, detail);
    result.steps += steps;
    if (v == Verdict::kNotLinearizable) {
      result.verdict = v;
      result.key = key;
      result.detail = detail;
      return result;  // a violation outranks an unknown elsewhere
    }
    if (v == Verdict::kUnknown && result.verdict == Verdict::kLinearizable) {
      result.verdict = v;
      result.key = key;
    }
  }
  return result;
}

}  // namespace etcdw::sim
