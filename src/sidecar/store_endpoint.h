// The endpoint URL of an object store (private to src/sidecar): where the S3 and ABS stores
// send their requests.
#pragma once

#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace etcdw::sidecar {

// A parsed endpoint: "http[s]://host[:port][/base/path]".
struct StoreEndpoint {
  bool tls = true;
  std::string host;  // without brackets for IPv6
  int port = 443;
  std::string base_path;  // "" or "/base/path", no trailing '/'
  bool host_is_ip = false;

  // "host:port" to dial (IPv6 in brackets).
  std::string HostPort() const;
  // The Host header: the port only when it is not the scheme's default.
  std::string HostHeader() const;
  std::string ToString() const;
};

// Errors, each "<what> \"<url>\": <why>": a scheme other than http/https, an empty host, a bad
// port, user information, a query or fragment. Trailing '/'s of the path are dropped.
Result<StoreEndpoint> ParseStoreEndpoint(std::string_view url, std::string_view what);

}  // namespace etcdw::sidecar
