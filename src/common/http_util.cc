#include "http_util.h"

#include <string_view>

namespace etcdw::common {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Query decoding: '+' is a space, "%XY" a byte; a malformed escape is kept verbatim.
std::string QueryUnescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 &&
               HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

void SplitTarget(const std::string& target, std::string* path,
                 std::map<std::string, std::string>* query) {
  size_t q = target.find('?');
  *path = target.substr(0, q);
  if (q == std::string::npos) return;
  std::string_view rest(target);
  rest.remove_prefix(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string name = QueryUnescape(pair.substr(0, eq));
    std::string value =
        eq == std::string_view::npos ? std::string() : QueryUnescape(pair.substr(eq + 1));
    query->emplace(std::move(name), std::move(value));
  }
}

}  // namespace etcdw::common
