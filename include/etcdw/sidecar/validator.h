// Validation of the member's data directory before etcd starts (gardener §4), on top of the
// offline checks of the data-directory tools (data_dir/data_dir.h).
//
//   sanity: the wrong-volume guard (file "safe_guard" beside the data directory holding
//           POD_NAMESPACE), the directory structure, that the store opens and its revision;
//           on a single-member cluster with backups, that revision must not be behind the
//           latest backup (allowing for committed log entries the member will apply at start).
//   full:   sanity plus every checksum of the store and the consistency of the MVCC data and
//           the Raft state.
#pragma once

#include <string>

#include "etcdw/sidecar/snap_store.h"

namespace etcdw::sidecar {

enum class ValidationMode { kSanity, kFull };
// "sanity" -> kSanity; anything else (gardener: also a missing mode) -> kFull. Inline: the HTTP
// API reads the mode without linking the validator.
inline ValidationMode ParseValidationMode(const std::string& mode) {
  return mode == "sanity" ? ValidationMode::kSanity : ValidationMode::kFull;
}

// gardener's DataDirStatus values.
enum class DataDirStatus {
  kValid,
  kWrongVolumeMounted,
  kNotExist,
  kInvalidStructure,
  kCorrupt,
  kUnknown,
  kInvalidInMultiNode,
  kRevisionConsistencyError,
  kFailToOpen,  // another process holds the store
};
const char* DataDirStatusName(DataDirStatus s);

struct Validation {
  DataDirStatus status = DataDirStatus::kUnknown;
  std::string detail;  // what was found, for logs
};

// `store` may be null (no backups configured). `cluster_size` is the size of the configured
// initial cluster.
Validation ValidateDataDir(const std::string& data_dir, ValidationMode mode, SnapStore* store,
                           size_t cluster_size);

}  // namespace etcdw::sidecar
