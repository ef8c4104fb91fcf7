// The API server's address as a configuration gives it: "https://host[:port][/prefix]".
#pragma once

#include <string>

#include "etcdw/common/status.h"

namespace etcdw::kube {

struct ServerUrl {
  bool tls = true;
  std::string host_port;  // "host:port" (IPv6 in brackets); the port defaults to 443 or 80
  std::string prefix;     // a path before every API path, without a trailing '/'; often empty
};

// Scheme http or https; a host is required; no query or fragment. Errors (kInvalidArgument)
// quote the text.
Result<ServerUrl> ParseServerUrl(const std::string& text);

}  // namespace etcdw::kube
