// Internal to the Raft library: how a broken invariant is reported.
#pragma once

#include <stdexcept>
#include <string>

namespace etcdw::raft {

// A broken invariant of the algorithm or of the application's use of it: continuing could
// lose or corrupt committed data, so the member stops (the node loop catches std::logic_error).
// The contract is written in raw_node.h ("Broken invariants").
[[noreturn]] inline void Fatal(const std::string& what) { throw std::logic_error("raft: " + what); }

}  // namespace etcdw::raft
