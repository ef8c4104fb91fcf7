// The disk's own ceiling for one durable writer: how many times per second one thread can write
// a small record to a file and fdatasync it (what a single client's put waits for at best), both
// appending to a growing file and overwriting a file preallocated with zeros (how our Raft log
// writes; a sync then has no file size or block map to write). And the ceiling for one client
// of a server that does nothing but that sync: requests over loopback TCP answered by a thread
// that overwrites and syncs one record per request (wake-ups and the round trip included).
#pragma once

#include <chrono>
#include <string>

namespace etcdw::bench {

struct DiskSyncRates {
  double append = 0;      // 256 B appended + fdatasync, per second
  double overwrite = 0;   // 256 B written over synced zeros + fdatasync, per second
  double round_trip = 0;  // one client's requests answered after such an overwrite, per second
};

// Measures the three rates in new files under `dir`, for `duration` each; false with *error.
bool MeasureDiskSyncRates(const std::string& dir, std::chrono::milliseconds duration,
                          DiskSyncRates* out, std::string* error);

}  // namespace etcdw::bench
