// The ABS store's settings and wire helpers (private to src/sidecar): gardener's Azure credential
// file or directory, the URL of the blob service, block IDs, and reading a List Blobs answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/common/status.h"
#include "store_endpoint.h"

namespace etcdw::sidecar {

inline constexpr char kAzureCredentialsJsonEnv[] = "AZURE_APPLICATION_CREDENTIALS_JSON";
inline constexpr char kAzureCredentialsDirEnv[] = "AZURE_APPLICATION_CREDENTIALS";
// gardener's brtypes.AzureBlobStorageGlobalDomain.
inline constexpr char kAzureDefaultDomain[] = "blob.core.windows.net";

// gardener's absCredentials.
struct AbsCredentials {
  std::string storage_account;
  std::string storage_key;            // base64, as the portal shows it
  std::string key;                    // storage_key decoded: the HMAC key
  std::optional<std::string> domain;  // deprecated in gardener's; --store-endpoint-override wins
  // gardener's releases before v0.31 (Azurite support): the service is http://<domain>/<account>.
  bool emulator_enabled = false;
  std::string source;  // the file or directory read, for messages
};

// Reads the credentials named by <env_prefix>AZURE_APPLICATION_CREDENTIALS_JSON (a JSON file
// with string keys storageAccount, storageKey, domain and boolean emulatorEnabled; other keys
// such as bucketName are ignored), else by <env_prefix>AZURE_APPLICATION_CREDENTIALS (a
// directory in which a "*.json" file wins over one file per key: storageAccount, storageKey,
// domain, emulatorEnabled; values lose trailing line breaks, emulatorEnabled is a Go bool).
// Errors, each naming the source: neither variable set; an unreadable file or directory;
// invalid JSON or a value of the wrong type; storageAccount or storageKey missing or empty;
// a storageKey that is not base64; emulatorEnabled without domain.
Result<AbsCredentials> LoadAbsCredentials(std::string_view env_prefix = "");

// The blob service the container lives under, as gardener's NewABSSnapStore builds it:
// `endpoint_override` (--store-endpoint-override) when given; else http://<domain>/<account>
// for an emulator (emulatorEnabled); else https://<account>.<domain, default
// blob.core.windows.net>. The container URL is this endpoint's path + "/<container>". Errors:
// an endpoint that does not parse (see ParseStoreEndpoint).
Result<StoreEndpoint> AbsServiceEndpoint(const AbsCredentials& creds,
                                         std::string_view endpoint_override);

// gardener's block ID of 1-based part `part_number`: base64 of the number zero-padded to 10
// digits ("MDAwMDAwMDAwMQ==" for 1). Every ID of a blob has the same length, as Azure requires.
std::string AbsBlockId(int64_t part_number);

// One page of a List Blobs answer (EnumerationResults): the blob names in order, and the marker
// of the next page ("" on the last page).
struct AbsBlobListPage {
  std::vector<std::string> names;
  std::string next_marker;
};
AbsBlobListPage ParseAbsBlobList(std::string_view xml);

}  // namespace etcdw::sidecar
