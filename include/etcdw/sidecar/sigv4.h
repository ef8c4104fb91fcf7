// AWS Signature Version 4 (header form), as the S3 snapshot store signs its requests: the
// canonical request, the string to sign, the derived signing key and the Authorization header.
// Pure functions of their inputs (the time is passed in), so the published AWS examples are
// reproducible byte for byte. Hashes use OpenSSL.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "etcdw/common/status.h"

namespace etcdw::sidecar::sigv4 {

// x-amz-content-sha256 for a body that is not hashed (allowed by S3 over TLS).
inline constexpr char kUnsignedPayload[] = "UNSIGNED-PAYLOAD";
// SHA-256 of the empty string.
inline constexpr char kEmptySha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
};

// What a signature covers.
struct Request {
  std::string method;  // "GET", "PUT", ...
  // The path as sent, already percent-encoded; signed verbatim (S3 semantics: no
  // normalisation, no second encoding). Empty means "/".
  std::string path;
  // The query as sent, without '?'. Signed in canonical form: parameters sorted by name then
  // value, each re-encoded with UriEncode, a name without value given an empty one.
  std::string query;
  // Every header to sign, the Host header and x-amz-date included, in any order and case.
  // Repeated names are joined with ',' in the order given.
  std::vector<std::pair<std::string, std::string>> headers;
  // Hex SHA-256 of the body, or kUnsignedPayload.
  std::string payload_hash;
};

// The intermediate strings are returned too: a server's SignatureDoesNotMatch is diagnosed by
// comparing them with the ones it reports.
struct Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;  // "host;x-amz-date"
  std::string signature;       // lower-case hex
  // "AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/<service>/aws4_request,
  //  SignedHeaders=<signed_headers>, Signature=<signature>" (one line).
  std::string authorization;
};

// Signs `request` at `amz_date` ("YYYYMMDDTHHMMSSZ", the value of its x-amz-date header).
Signature Sign(const Request& request, const Credentials& credentials, std::string_view region,
               std::string_view service, std::string_view amz_date);

// "YYYYMMDDTHHMMSSZ" in UTC.
std::string AmzDate(std::chrono::system_clock::time_point t);

// RFC 3986 percent-encoding as AWS specifies it, common::PercentEncode: unreserved characters
// (A-Z a-z 0-9 - _ . ~) stay, every other byte becomes %XY (upper-case hex); '/' stays when
// keep_slash.
std::string UriEncode(std::string_view s, bool keep_slash);

// The canonical form of a query string (see Request::query).
std::string CanonicalQuery(std::string_view query);

// The derived key HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service),
// "aws4_request"), raw bytes; `date` is "YYYYMMDD".
std::string SigningKey(std::string_view secret, std::string_view date, std::string_view region,
                       std::string_view service);

std::string Sha256Hex(std::string_view data);
// SHA-256 of `length` bytes of a file from `offset`, read in slices. Errors name the file.
Result<std::string> Sha256HexOfFile(const std::string& path, int64_t offset, int64_t length);
std::string Hex(std::string_view bytes);  // lower case

}  // namespace etcdw::sidecar::sigv4
