// Delta snapshots in gardener's format: a JSON array of
//   {"etcdEvent": <mvccpb.Event as Go's encoding/json writes it>, "time": "<RFC 3339 nanos>"}
// followed by the raw 32-byte SHA-256 of the JSON bytes. The event JSON uses the protobuf
// field names: "type" (omitted for PUT, 1 for DELETE), "kv" and "prev_kv" objects with "key"
// and "value" in base64, "create_revision", "mod_revision", "version", "lease" as numbers; zero
// and empty fields are omitted. Example:
//   [{"etcdEvent":{"kv":{"key":"Zm9v","create_revision":5,"mod_revision":7,"version":2,
//     "value":"YmFy"}},"time":"2026-01-01T10:00:00.123456789Z"}]<32 bytes>
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/mvccpb/kv.pb.h"
#include "etcdw/common/status.h"

namespace etcdw::sidecar {

// Accumulates watch events for the next delta snapshot.
class DeltaWriter {
 public:
  void Add(const mvccpb::Event& event, std::chrono::system_clock::time_point received);
  size_t size_bytes() const { return json_.size(); }  // the memory-limit trigger's measure
  size_t event_count() const { return events_; }
  int64_t first_revision() const { return first_rev_; }  // mod revision of the first event
  int64_t last_revision() const { return last_rev_; }    // of the last event
  // The object payload: "[" events "]" + SHA-256 trailer. Resets the writer.
  std::string Finish();

 private:
  std::string json_;  // "[" + events separated by ","
  size_t events_ = 0;
  int64_t first_rev_ = 0;
  int64_t last_rev_ = 0;
};

// One event of a delta and the time it was received.
struct DeltaEvent {
  mvccpb::Event event;
  std::string time;  // as written
};

// Verifies the trailer and parses a delta payload. Errors (DataLoss): payload of 32 bytes or
// less ("missing hash"), hash mismatch, malformed JSON or event; each says what is wrong. An
// omitted "type" is PUT; base64 key/value are decoded.
Result<std::vector<DeltaEvent>> ParseDelta(std::string_view payload);

// The single JSON element for one event (exposed for tests and for gardener compatibility).
std::string EventJson(const mvccpb::Event& event, std::chrono::system_clock::time_point received);

}  // namespace etcdw::sidecar
