// Revisions. The store revision is one 64-bit counter (the "main" revision), starting at 1 and
// incremented once per write transaction that changes something. Changes inside one
// transaction share the main revision and are ordered by a "sub" revision from 0.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace etcdw::mvcc {

struct Revision {
  int64_t main = 0;
  int64_t sub = 0;
  auto operator<=>(const Revision&) const = default;
};

// Revision-log keys: 16 bytes, big-endian main then sub, so byte order is revision order.
std::string EncodeRevisionKey(Revision r);
Revision DecodeRevisionKey(std::string_view key);

// The first revision-log key of main revision `main` (sub 0).
inline std::string RevisionLowerBound(int64_t main) { return EncodeRevisionKey({main, 0}); }

// Entry kinds in the revision log (the value's first byte, followed by the user key).
enum class ChangeKind : char { kPut = 'p', kDelete = 'd' };

}  // namespace etcdw::mvcc
