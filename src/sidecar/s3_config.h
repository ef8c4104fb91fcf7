// The S3 store's settings (private to src/sidecar): gardener's credential file or directory, and
// the endpoint URL.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace etcdw::sidecar {

inline constexpr char kAwsCredentialsJsonEnv[] = "AWS_APPLICATION_CREDENTIALS_JSON";
inline constexpr char kAwsCredentialsDirEnv[] = "AWS_APPLICATION_CREDENTIALS";

// gardener's awsCredentials, the subset etcdbrctl acts on.
struct S3Credentials {
  std::string region;
  std::string access_key_id;
  std::string secret_access_key;
  std::string endpoint;  // deprecated in gardener's; --store-endpoint-override wins
  bool force_path_style = false;
  bool insecure_skip_verify = false;
  std::string trusted_ca_cert;  // PEM text; TLS 1.3 becomes the minimum, as in gardener's
  // SSE-C: both or neither. The key is sent base64-encoded, with the base64 MD5 of the key.
  std::string sse_customer_key;
  std::string sse_customer_algorithm;
  std::string source;  // the file or directory read, for messages
};

// Reads the credentials named by the environment, as gardener's getConfigOpts: the JSON file
// named by AWS_APPLICATION_CREDENTIALS_JSON; else the directory named by
// AWS_APPLICATION_CREDENTIALS, in which a "*.json" file wins (gardener's transition rule) over
// one file per key (values lose trailing line breaks; bools as Go's strconv.ParseBool).
// Errors, each naming the source: neither variable set; unreadable file or directory; invalid
// JSON or a value of the wrong type; region missing; accessKeyID or secretAccessKey missing;
// web-identity credentials (roleARN/token, not supported here); only one of the SSE-C keys;
// requestChecksumCalculation / responseChecksumValidation other than when_supported /
// when_required (accepted and otherwise ignored: no checksums are sent or verified).
// `env_prefix` prefixes both variables' names ("SOURCE_" for the source of a copy).
Result<S3Credentials> LoadS3Credentials(const std::string& env_prefix = "");

// A parsed endpoint: "http[s]://host[:port][/base/path]".
struct S3Endpoint {
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

// Errors: a scheme other than http/https, an empty host, a bad port, a query or fragment.
Result<S3Endpoint> ParseS3Endpoint(std::string_view url);

}  // namespace etcdw::sidecar
