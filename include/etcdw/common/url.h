// URLs as etcd's configuration uses them: `scheme://host:port`, scheme http or https, no path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/common/status.h"

namespace etcdw::common {

struct Url {
  std::string scheme;  // "http" or "https"
  std::string host;    // without brackets for IPv6
  uint16_t port = 0;

  bool tls() const { return scheme == "https"; }
  // "host:port", IPv6 hosts in brackets: what a socket binds to or dials.
  std::string HostPort() const;
  // "scheme://host:port"
  std::string ToString() const;
  bool operator==(const Url&) const = default;
};

// Parses one URL with etcd's rules (types.NewURLs): surrounding blanks are trimmed, the scheme
// must be http or https, the authority must be host:port, and there must be no path.
Result<Url> ParseUrl(std::string_view raw);

// Parses a comma-separated list; an empty list is an error ("no valid URLs given").
Result<std::vector<Url>> ParseUrlList(std::string_view text);

std::string JoinUrls(const std::vector<Url>& urls, std::string_view sep = ",");

// Splits on `sep`, trimming blanks around each part; empty parts are kept.
std::vector<std::string> Split(std::string_view text, char sep);
// RFC 3986 percent-encoding: unreserved characters (A-Z a-z 0-9 - _ . ~) stay, every other
// byte becomes %XY (upper-case hex); '/' stays when keep_slash. What AWS SigV4 and Azure Shared
// Key expect of object names and query values.
std::string PercentEncode(std::string_view s, bool keep_slash);
// Undoes percent-encoding; '+' is kept (RFC 3986 queries, as S3 and Azure read them). A
// malformed escape is kept verbatim.
std::string PercentDecode(std::string_view s);

// `s` without the whitespace (space, tab, CR, LF, VT, FF) at either end.
std::string_view Trim(std::string_view s);

}  // namespace etcdw::common
