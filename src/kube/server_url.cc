#include "server_url.h"

namespace etcdw::kube {

Result<ServerUrl> ParseServerUrl(const std::string& text) {
  const auto bad = [&text](const std::string& why) {
    return InvalidArgument("server \"" + text + "\": " + why);
  };
  ServerUrl url;
  std::string rest;
  if (text.rfind("https://", 0) == 0) {
    rest = text.substr(8);
  } else if (text.rfind("http://", 0) == 0) {
    url.tls = false;
    rest = text.substr(7);
  } else {
    return bad("the scheme must be https:// or http://");
  }
  if (rest.find_first_of("?#") != std::string::npos) return bad("a query or fragment");
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) url.prefix = rest.substr(slash);
  while (!url.prefix.empty() && url.prefix.back() == '/') url.prefix.pop_back();
  if (authority.empty()) return bad("no host");
  if (authority.find('@') != std::string::npos) return bad("user information in the address");

  // The port follows the last ':' unless that ':' is inside an IPv6 literal's brackets.
  const size_t close = authority.rfind(']');
  const size_t colon = authority.rfind(':');
  const bool has_port = colon != std::string::npos && (close == std::string::npos || colon > close);
  std::string host = has_port ? authority.substr(0, colon) : authority;
  std::string port = has_port ? authority.substr(colon + 1) : (url.tls ? "443" : "80");
  if (host.empty() || host == "[]") return bad("no host");
  if (host.front() != '[' && host.find(':') != std::string::npos) {
    return bad("an IPv6 address must be in brackets");
  }
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) digits &= c >= '0' && c <= '9';
  if (!digits || std::stoi(port) < 1 || std::stoi(port) > 65535) {
    return bad("invalid port \"" + port + "\"");
  }
  url.host_port = host + ":" + port;
  return url;
}

}  // namespace etcdw::kube
