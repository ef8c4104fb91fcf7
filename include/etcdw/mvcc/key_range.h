// A key interval as the etcd API expresses it with (key, range_end).
#pragma once

#include <string>
#include <string_view>

namespace etcdw::mvcc {

struct KeyRange {
  enum class Kind {
    kSingle,   // range_end empty: just `key`
    kRange,    // [key, end)
    kFromKey,  // range_end "\0": every key >= key
  };
  Kind kind = Kind::kSingle;
  std::string key;
  std::string end;  // for kRange

  // Applies etcd's range_end conventions.
  static KeyRange FromRequest(std::string_view key, std::string_view range_end);
  static KeyRange Single(std::string_view key) { return {Kind::kSingle, std::string(key), {}}; }

  bool Contains(std::string_view k) const;
  // True when no key can be in the range ([a, b) with b <= a).
  bool IsEmpty() const { return kind == Kind::kRange && end <= key; }
};

// The range_end that selects every key with prefix `prefix` (etcd's GetPrefixRangeEnd):
// the prefix with its last byte below 0xff incremented and the bytes after it dropped;
// "\0" (every key >= prefix) when all bytes are 0xff.
std::string PrefixRangeEnd(std::string_view prefix);

}  // namespace etcdw::mvcc
