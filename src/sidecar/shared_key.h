// Azure Storage Shared Key authorization (private to src/sidecar), as Microsoft documents it for
// the Blob service ("Authorize with Shared Key", version 2009-09-19 and later): the string to
// sign, its canonicalized headers and resource, and the Authorization header
// "SharedKey <account>:<base64 HMAC-SHA256 of the string to sign under the decoded key>".
// Pure functions of their inputs (the time travels in the x-ms-date header), so a signature is
// reproducible byte for byte.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace etcdw::sidecar::sharedkey {

// The REST API version the ABS store speaks (x-ms-version); Azurite 3.35 accepts it.
inline constexpr char kApiVersion[] = "2021-08-06";

// What a signature covers.
struct Request {
  std::string method;  // "GET", "PUT", ...
  // The path as sent, percent-encoded, starting with '/': for the emulator's path-style URLs it
  // starts with "/<account>", which then appears twice in the canonicalized resource, as
  // Microsoft specifies.
  std::string path;
  std::string query;  // as sent, without '?'
  // Every header sent, in any case. The standard ones that the string to sign names are taken by
  // name (Content-Encoding, Content-Language, Content-MD5, Content-Type, Date, If-*, Range); all
  // x-ms-* ones are canonicalized. Content-Length comes from content_length instead.
  std::vector<std::pair<std::string, std::string>> headers;
  // The body's length; signed as the empty string when 0 (API versions 2015-02-21 and later).
  int64_t content_length = 0;
};

struct Signature {
  std::string string_to_sign;  // for diagnosing AuthenticationFailed
  std::string signature;       // base64
  std::string authorization;   // "SharedKey <account>:<signature>"
};

// Signs `request` for `account` with `key`, the storage key already base64-decoded.
Signature Sign(const Request& request, std::string_view account, std::string_view key);

// The x-ms-* headers: names in lower case, sorted, each "name:value\n", the value trimmed and
// folded line breaks replaced by one space. Repeated names are joined with ','.
std::string CanonicalizedHeaders(const std::vector<std::pair<std::string, std::string>>& headers);

// "/<account><path>", then for each query parameter, sorted by lower-cased name:
// "\n<name>:<values>", the values percent-decoded, sorted and joined with ','.
std::string CanonicalizedResource(std::string_view account, std::string_view path,
                                  std::string_view query);

// An RFC 1123 date in GMT, as x-ms-date wants it: "Sun, 11 Oct 2009 21:49:13 GMT".
std::string HttpDate(std::chrono::system_clock::time_point t);

}  // namespace etcdw::sidecar::sharedkey
