// Feeds the sidecar's delta snapshot reader (gardener's JSON events and SHA-256 trailer) arbitrary
// JSON. The harness appends the right trailer, so that the fuzzer gets past the hash check to the
// JSON, unless the input's first byte is 0 (then the input is the whole payload, trailer
// included). What parses is written again with EventJson and must read back the same.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "etcdw/common/hash.h"
#include "etcdw/sidecar/delta.h"

namespace {

using etcdw::sidecar::DeltaEvent;
using etcdw::sidecar::EventJson;
using etcdw::sidecar::ParseDelta;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "delta_fuzzer: %s\n", what);
  std::abort();
}

std::string WithTrailer(std::string json) {
  etcdw::common::Sha256 sha;
  sha.Update(json);
  const auto digest = sha.Final();
  json.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return json;
}

bool SameKv(const mvccpb::KeyValue& a, const mvccpb::KeyValue& b) {
  return a.key() == b.key() && a.value() == b.value() &&
         a.create_revision() == b.create_revision() && a.mod_revision() == b.mod_revision() &&
         a.version() == b.version() && a.lease() == b.lease();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string payload =
      !in.empty() && in.front() == '\0' ? std::string(in.substr(1)) : WithTrailer(std::string(in));
  const auto events = ParseDelta(payload);
  if (!events.ok()) {
    if (events.status().message().empty()) Fail("an error without a message");
    return 0;
  }

  // Written again, the events read back as they were.
  std::string json = "[";
  for (const DeltaEvent& e : *events) {
    if (json.size() > 1) json += ',';
    json += EventJson(e.event, std::chrono::system_clock::time_point{});
  }
  json += ']';
  const auto again = ParseDelta(WithTrailer(json));
  if (!again.ok()) Fail("the events written again do not parse");
  if (again->size() != events->size()) Fail("the events written again are not as many");
  for (size_t i = 0; i < events->size(); ++i) {
    const mvccpb::Event& a = (*events)[i].event;
    const mvccpb::Event& b = (*again)[i].event;
    if (a.type() != b.type() || !SameKv(a.kv(), b.kv()) || !SameKv(a.prev_kv(), b.prev_kv())) {
      Fail("an event written again reads back differently");
    }
  }
  return 0;
}
