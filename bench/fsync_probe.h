// The disk's own ceiling for one durable writer: how many times per second one thread can append
// a small record to a file and fdatasync it (what a single client's put waits for at best).
#pragma once

#include <chrono>
#include <string>

namespace etcdw::bench {

// Appends 256 B + fdatasync in a new file under `dir` for `duration`; returns operations per
// second, or -1 with *error.
double MeasureFsyncRate(const std::string& dir, std::chrono::milliseconds duration,
                        std::string* error);

}  // namespace etcdw::bench
