// Snapshot descriptors: what a backup object is, named exactly as gardener's etcd-backup-restore
// names it, so that existing buckets stay readable and ours stay readable by gardener's tools.
//
// Object key (v2): <store-prefix>/v2/<Kind>-<start>-<last>-<unix seconds><compression>[.final]
//   Kind Full|Incr; start and last revision zero-padded to at least 8 digits; compression suffix
//   "" | ".gz" | ".zlib" | ".Z"; a full snapshot always starts at revision 0.
// Legacy v1 keys (read, restore and GC only): <store-prefix>/v1/Backup-<unix ts>/<name>.
// Chunk objects (multi-part uploads of some providers): <key>/<10-digit part number>.
//
// The JSON form (/snapshot/full, /snapshot/delta, /snapshot/latest) is gardener's brtypes.Snapshot,
// misspelt key "immutabilityExpriyTime" included.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/common/status.h"

namespace etcdw::sidecar {

enum class SnapshotKind { kFull, kIncr };
const char* KindName(SnapshotKind k);  // "Full" | "Incr"

struct SnapshotInfo {
  SnapshotKind kind = SnapshotKind::kFull;
  int64_t start_revision = 0;
  int64_t last_revision = 0;
  // Creation time. Names carry whole seconds; a freshly taken snapshot keeps nanoseconds.
  std::chrono::system_clock::time_point created_on;
  std::string compression_suffix;  // "", ".gz", ".zlib", ".Z"
  bool is_chunk = false;
  bool is_final = false;
  // Store path up to and including "v2/" (or "v1/"), as listed; empty for a just-taken snapshot.
  std::string prefix;
  std::string snap_dir;                   // "" for v2, "Backup-<ts>" for v1
  std::string snap_name;                  // the object name, see MakeSnapshotName
  std::optional<std::string> version_id;  // versioned S3 buckets
  // Zero time when the object is not immutable.
  std::chrono::system_clock::time_point immutability_expiry_time;

  bool operator==(const SnapshotInfo&) const = default;
};

// "<Kind>-<start %08d>-<last %08d>-<unix seconds><suffix>[.final]".
std::string MakeSnapshotName(SnapshotKind kind, int64_t start_revision, int64_t last_revision,
                             std::chrono::system_clock::time_point created_on,
                             std::string_view compression_suffix, bool is_final);

// A descriptor for a snapshot about to be uploaded: fields set, snap_name made, prefix empty.
SnapshotInfo NewSnapshot(SnapshotKind kind, int64_t start_revision, int64_t last_revision,
                         std::chrono::system_clock::time_point created_on,
                         std::string_view compression_suffix, bool is_final);

// Parses an object key as gardener's ParseSnapshot: the part up to and including the last "v1/"
// (else the last "v2/") is the prefix; the rest is 1-3 '/'-separated tokens (v1: snap dir, name,
// optional part; v2: name, optional part). Errors say what is wrong with the key.
Result<SnapshotInfo> ParseSnapshotKey(std::string_view key);

// The object key of a snapshot: prefix + [snap_dir "/"] + snap_name.
std::string SnapshotKey(const SnapshotInfo& s);

// gardener's JSON (keys createdOn, immutabilityExpriyTime, versionID, kind, snapDir, snapName,
// prefix, compressionSuffix, startRevision, lastRevision, isChunk, isFinal). createdOn is RFC 3339
// UTC with nanoseconds when non-zero. The strings are valid UTF-8 (dump() never throws): as Go's
// encoding/json does, each byte of a name that does not begin a valid UTF-8 sequence becomes
// U+FFFD.
nlohmann::json ToJson(const SnapshotInfo& s);

// Ascending last revision; ties: non-chunks before chunks; two non-chunks by creation time.
void SortSnapshots(std::vector<SnapshotInfo>& list);

// The newest full snapshot and the deltas after it (gardener's
// GetLatestFullSnapshotAndDeltaSnapList): walk a sorted list from the end, skipping chunks,
// collecting deltas until the first full.
struct LatestSet {
  std::optional<SnapshotInfo> full;  // none when the store has no full snapshot
  std::vector<SnapshotInfo> deltas;  // ascending
  // The newest backed-up revision: the last delta's, else the full's, else 0.
  int64_t LastRevision() const;
};
LatestSet FindLatestSet(const std::vector<SnapshotInfo>& sorted);

// /snapshot/latest's body: {"fullSnapshot": <json or null>, "deltaSnapshots": [..] or null}.
nlohmann::json LatestSetJson(const LatestSet& set);

}  // namespace etcdw::sidecar
