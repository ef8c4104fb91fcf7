#include "shared_key.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>

#include "etcdw/common/hash.h"
#include "etcdw/common/url.h"

namespace etcdw::sidecar::sharedkey {

namespace {

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// The value of the first header named `name` (compared case-insensitively), "" if none.
std::string StandardHeader(const std::vector<std::pair<std::string, std::string>>& headers,
                           std::string_view name) {
  for (const auto& [n, v] : headers) {
    if (AsciiLower(n) == name) return v;
  }
  return "";
}

// Trims blanks at both ends and replaces each folded line break (CR/LF with the blanks around
// it) by one space.
std::string UnfoldedValue(std::string_view v) {
  std::string out;
  bool pending_space = false;
  for (char c : v) {
    if (c == '\r' || c == '\n') {
      pending_space = !out.empty();
      continue;
    }
    if ((c == ' ' || c == '\t') && pending_space) continue;
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  size_t start = out.find_first_not_of(" \t");
  return start == std::string::npos ? "" : out.substr(start);
}

}  // namespace

std::string CanonicalizedHeaders(const std::vector<std::pair<std::string, std::string>>& headers) {
  std::map<std::string, std::string> canonical;  // sorted by name, as the rules want
  for (const auto& [name, value] : headers) {
    std::string lower = AsciiLower(name);
    if (!lower.starts_with("x-ms-")) continue;
    auto [it, inserted] = canonical.try_emplace(lower, UnfoldedValue(value));
    if (!inserted) it->second += "," + UnfoldedValue(value);
  }
  std::string out;
  for (const auto& [name, value] : canonical) out += name + ":" + value + "\n";
  return out;
}

std::string CanonicalizedResource(std::string_view account, std::string_view path,
                                  std::string_view query) {
  std::string out = "/" + std::string(account) + (path.empty() ? "/" : std::string(path));
  std::map<std::string, std::vector<std::string>> params;
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view param = query.substr(pos, amp - pos);
    pos = amp + 1;
    if (param.empty()) continue;
    size_t eq = param.find('=');
    std::string name = AsciiLower(common::PercentDecode(param.substr(0, eq)));
    std::string value =
        eq == std::string_view::npos ? "" : common::PercentDecode(param.substr(eq + 1));
    params[name].push_back(std::move(value));
  }
  for (auto& [name, values] : params) {
    std::sort(values.begin(), values.end());
    out += "\n" + name + ":";
    for (size_t i = 0; i < values.size(); ++i) out += (i == 0 ? "" : ",") + values[i];
  }
  return out;
}

Signature Sign(const Request& request, std::string_view account, std::string_view key) {
  const auto& h = request.headers;
  Signature sig;
  std::string& s = sig.string_to_sign;
  s = request.method + "\n";
  s += StandardHeader(h, "content-encoding") + "\n";
  s += StandardHeader(h, "content-language") + "\n";
  s += (request.content_length > 0 ? std::to_string(request.content_length) : "") + "\n";
  s += StandardHeader(h, "content-md5") + "\n";
  s += StandardHeader(h, "content-type") + "\n";
  s += StandardHeader(h, "date") + "\n";
  s += StandardHeader(h, "if-modified-since") + "\n";
  s += StandardHeader(h, "if-match") + "\n";
  s += StandardHeader(h, "if-none-match") + "\n";
  s += StandardHeader(h, "if-unmodified-since") + "\n";
  s += StandardHeader(h, "range") + "\n";
  s += CanonicalizedHeaders(h);
  s += CanonicalizedResource(account, request.path, request.query);
  sig.signature = common::Base64Encode(common::HmacSha256(key, s));
  sig.authorization = "SharedKey " + std::string(account) + ":" + sig.signature;
  return sig;
}

std::string HttpDate(std::chrono::system_clock::time_point t) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday],
                tm.tm_mday, kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return buf;
}

}  // namespace etcdw::sidecar::sharedkey
