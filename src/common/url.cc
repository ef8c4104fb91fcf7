#include "etcdw/common/url.h"

#include <charconv>

namespace etcdw::common {

std::string_view Trim(std::string_view s) {
  constexpr std::string_view kBlanks = " \t\r\n\v\f";
  const size_t b = s.find_first_not_of(kBlanks);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kBlanks) - b + 1);
}

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    std::string_view part =
        text.substr(start, pos == std::string_view::npos ? text.npos : pos - start);
    out.emplace_back(Trim(part));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string Url::HostPort() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

std::string Url::ToString() const { return scheme + "://" + HostPort(); }

Result<Url> ParseUrl(std::string_view raw) {
  std::string_view text = Trim(raw);
  const std::string quoted(text);
  size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    return InvalidArgument("URL scheme must be http or https: " + quoted);
  }
  Url u;
  u.scheme = std::string(text.substr(0, sep));
  for (char& c : u.scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (u.scheme == "unix" || u.scheme == "unixs") {
    return InvalidArgument("unix socket URLs are not supported: " + quoted);
  }
  if (u.scheme != "http" && u.scheme != "https") {
    return InvalidArgument("URL scheme must be http or https: " + quoted);
  }
  std::string_view rest = text.substr(sep + 3);
  // As etcd, any path (even "/") is refused; a query or fragment, which etcd silently
  // ignores, is refused too as it can only be a mistake.
  size_t suffix = rest.find_first_of("/?#");
  if (suffix != std::string_view::npos) {
    if (rest[suffix] == '/') return InvalidArgument("URL must not contain a path: " + quoted);
    return InvalidArgument("URL must not contain a query or fragment: " + quoted);
  }
  if (rest.find('@') != std::string_view::npos) {
    return InvalidArgument("URL must not contain user information: " + quoted);
  }
  std::string_view host, port;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      return InvalidArgument("URL address does not have the form \"host:port\": " + quoted);
    }
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || rest.find(':') != colon) {
      return InvalidArgument("URL address does not have the form \"host:port\": " + quoted);
    }
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  unsigned p = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || p > 65535) {
    return InvalidArgument("URL port is not a number between 0 and 65535: " + quoted);
  }
  u.host = std::string(host);
  u.port = static_cast<uint16_t>(p);
  return u;
}

Result<std::vector<Url>> ParseUrlList(std::string_view text) {
  std::vector<Url> out;
  if (Trim(text).empty()) return InvalidArgument("no valid URLs given");
  for (const std::string& part : Split(text, ',')) {
    if (part.empty()) return InvalidArgument("empty URL in list \"" + std::string(text) + "\"");
    ETCDW_ASSIGN_OR_RETURN(Url u, ParseUrl(part));
    out.push_back(std::move(u));
  }
  return out;
}

std::string JoinUrls(const std::vector<Url>& urls, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < urls.size(); ++i) {
    if (i) out += sep;
    out += urls[i].ToString();
  }
  return out;
}

std::string PercentEncode(std::string_view s, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 0xf];
    }
  }
  return out;
}

namespace {
int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 && HexDigit(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace etcdw::common
