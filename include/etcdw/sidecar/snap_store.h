// Where snapshots are kept: an object store seen as a flat list of named objects under a prefix.
// Providers: "Local" (a directory, gardener's layout $HOME/<container>/<prefix>/v2/<name>),
// "S3" (AWS S3 and compatible servers) and "ABS" (Azure Blob Storage and Azurite). Objects are
// uploaded from and downloaded to local files, so that a snapshot never has to fit in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/sidecar/snapshot.h"

namespace etcdw::sidecar {

class SnapStore {
 public:
  virtual ~SnapStore() = default;

  // Every snapshot under the store prefix (v1 and v2 keys, chunks included), sorted with
  // SortSnapshots. Keys that do not parse are skipped with a warning.
  virtual Result<std::vector<SnapshotInfo>> List() = 0;
  // Downloads the snapshot's object into the local file `dest` (created or truncated).
  virtual Status Fetch(const SnapshotInfo& s, const std::string& dest) = 0;
  // Uploads the local file `src` as snapshot `s` under this store's "<prefix>/v2/" with the name
  // s.snap_name. A reader never sees a partial object: it appears complete or not at all.
  virtual Status Save(const SnapshotInfo& s, const std::string& src) = 0;
  // Deletes the snapshot's object (s as returned by List). Deleting a missing object is OK.
  virtual Status Delete(const SnapshotInfo& s) = 0;
  // For logs and errors, e.g. "Local store /root/default.bkp/v2".
  virtual std::string Describe() const = 0;
};

// The snapshot-store flags of etcdbrctl (gardener's names in comments).
struct SnapStoreOptions {
  std::string provider;                       // --storage-provider: "Local" | "S3" | "ABS"
  std::string container;                      // --store-container, else env STORAGE_CONTAINER
  std::string prefix;                         // --store-prefix; objects live under "<prefix>/v2/"
  std::string endpoint_override;              // --store-endpoint-override
  std::string temp_dir = "/tmp";              // --snapstore-temp-directory
  int max_parallel_chunk_uploads = 5;         // --max-parallel-chunk-uploads
  int64_t min_chunk_size = int64_t{5} << 20;  // --min-chunk-size (>= 5 MiB)
  // The prefix of the environment variables read for this store: "" for the store, "SOURCE_"
  // for the source of `etcdbrctl copy` (SOURCE_STORAGE_CONTAINER,
  // SOURCE_AWS_APPLICATION_CREDENTIALS, ...), as gardener's getEnvPrefixString.
  std::string env_prefix;
};

// Builds the store for options.provider. Errors: "unsupported storage provider", missing
// container (every provider but Local), bad credentials or endpoint. Reads the container's default
// and the credentials from the environment as gardener's does, each variable's name prefixed with
// options.env_prefix (S3: AWS_APPLICATION_CREDENTIALS_JSON or AWS_APPLICATION_CREDENTIALS; ABS:
// AZURE_APPLICATION_CREDENTIALS_JSON or AZURE_APPLICATION_CREDENTIALS).
Result<std::unique_ptr<SnapStore>> OpenSnapStore(const SnapStoreOptions& options);

// The effective object prefix: "<prefix>/v2" ("v2" when prefix is empty), without a trailing '/'.
std::string V2Prefix(const std::string& prefix);

}  // namespace etcdw::sidecar
