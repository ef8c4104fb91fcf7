// The bytes of a fuzzer's input read as a small program's operands, front to back. Reading past
// the end gives zeros and empty pieces: every input is a complete program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace etcdw::fuzz {

class InputReader {
 public:
  explicit InputReader(std::string_view in) : in_(in) {}
  bool empty() const { return in_.empty(); }
  // The next byte, 0 at the end.
  uint8_t Byte() {
    if (in_.empty()) return 0;
    const auto b = static_cast<uint8_t>(in_.front());
    in_.remove_prefix(1);
    return b;
  }
  // The next `n` bytes, fewer at the end.
  std::string_view Take(size_t n) {
    const std::string_view s = in_.substr(0, n);
    in_.remove_prefix(s.size());
    return s;
  }

 private:
  std::string_view in_;
};

}  // namespace etcdw::fuzz
