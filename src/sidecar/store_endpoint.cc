#include "store_endpoint.h"

namespace etcdw::sidecar {

namespace {

bool IsIpLiteral(const std::string& host) {
  if (host.find(':') != std::string::npos) return true;  // IPv6
  int dots = 0;
  for (char ch : host) {
    if (ch == '.') {
      ++dots;
    } else if (ch < '0' || ch > '9') {
      return false;
    }
  }
  return dots == 3;
}

}  // namespace

std::string StoreEndpoint::HostPort() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

std::string StoreEndpoint::HostHeader() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port == (tls ? 443 : 80)) return h;
  return h + ":" + std::to_string(port);
}

std::string StoreEndpoint::ToString() const {
  return std::string(tls ? "https://" : "http://") + HostHeader() + base_path;
}

Result<StoreEndpoint> ParseStoreEndpoint(std::string_view url, std::string_view what) {
  const std::string text(url);
  auto fail = [&](const std::string& why) {
    return InvalidArgument(std::string(what) + " \"" + text + "\": " + why);
  };
  StoreEndpoint e;
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    e.tls = false;
    e.port = 80;
    rest.remove_prefix(7);
  } else {
    return fail("want http://host[:port] or https://host[:port]");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) return fail("no query or fragment");
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  e.base_path = std::string(path);
  if (authority.find('@') != std::string_view::npos) return fail("no user information");
  std::string_view port_text;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return fail("unterminated IPv6 address");
    e.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return fail("junk after the IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return fail("empty port");
    }
  } else {
    size_t colon = authority.rfind(':');
    e.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return fail("empty port");
    }
  }
  if (e.host.empty()) return fail("no host");
  if (!port_text.empty()) {
    int port = 0;
    for (char ch : port_text) {
      if (ch < '0' || ch > '9' || port > 65535) return fail("invalid port");
      port = port * 10 + (ch - '0');
    }
    if (port < 1 || port > 65535) return fail("invalid port");
    e.port = port;
  }
  e.host_is_ip = IsIpLiteral(e.host);
  return e;
}

}  // namespace etcdw::sidecar
