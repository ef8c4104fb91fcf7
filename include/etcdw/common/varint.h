// Base-128 varints as protobuf encodes them (least significant group first, high bit set on
// every byte but the last): the Raft log reads entry fields with them, the snapshot format
// prefixes keys and values with them, and watch responses are assembled in wire form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace etcdw::common {

// Appends `v` (1 to 10 bytes).
inline void AppendVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// The number of bytes AppendVarint writes for `v`.
inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Reads a varint from the front of `in` and removes it. False (with `in` partly consumed) when
// `in` ends inside the varint or the varint is longer than 10 bytes.
inline bool ConsumeVarint(std::string_view& in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto b = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    *v |= uint64_t{b & 0x7fu} << shift;
    if (b < 0x80) return true;
  }
  return false;
}

}  // namespace etcdw::common
