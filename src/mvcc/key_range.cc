#include "etcdw/mvcc/key_range.h"

namespace etcdw::mvcc {

KeyRange KeyRange::FromRequest(std::string_view key, std::string_view range_end) {
  if (range_end.empty()) return Single(key);
  if (range_end.size() == 1 && range_end[0] == '\0') {
    return {Kind::kFromKey, std::string(key), {}};
  }
  return {Kind::kRange, std::string(key), std::string(range_end)};
}

bool KeyRange::Contains(std::string_view k) const {
  switch (kind) {
    case Kind::kSingle:
      return k == key;
    case Kind::kFromKey:
      return k >= std::string_view(key);
    case Kind::kRange:
      return k >= std::string_view(key) && k < std::string_view(end);
  }
  return false;
}

std::string PrefixRangeEnd(std::string_view prefix) {
  std::string end(prefix);
  for (int i = static_cast<int>(end.size()) - 1; i >= 0; --i) {
    if (static_cast<unsigned char>(end[i]) < 0xff) {
      end[i] = static_cast<char>(static_cast<unsigned char>(end[i]) + 1);
      end.resize(i + 1);
      return end;
    }
  }
  return std::string(1, '\0');
}

}  // namespace etcdw::mvcc
