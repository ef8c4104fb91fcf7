// The S3 store's settings (private to src/sidecar): gardener's credential file or directory, and
// the endpoint URL.
#pragma once

#include <string>
#include <string_view>

#include "etcdw/common/status.h"
#include "store_endpoint.h"

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
// named by <env_prefix>AWS_APPLICATION_CREDENTIALS_JSON; else the directory named by
// <env_prefix>AWS_APPLICATION_CREDENTIALS, in which a "*.json" file wins (gardener's transition
// rule) over one file per key (values lose trailing line breaks; bools as Go's strconv.ParseBool).
// Errors, each naming the source: neither variable set; unreadable file or directory; invalid
// JSON or a value of the wrong type; region missing; accessKeyID or secretAccessKey missing;
// web-identity credentials (roleARN/token, not supported here); only one of the SSE-C keys;
// requestChecksumCalculation / responseChecksumValidation other than when_supported /
// when_required (accepted and otherwise ignored: no checksums are sent or verified).
Result<S3Credentials> LoadS3Credentials(std::string_view env_prefix = "");

}  // namespace etcdw::sidecar
