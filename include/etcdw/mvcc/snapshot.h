// A portable, consistent copy of the store's state (what Maintenance.Snapshot streams and what
// a restore or a lagging member installs). Like etcd's snapshot file, the last 32 bytes are the
// SHA-256 of everything before them.
//
// Format "ETCDWSNP" v1 (all integers big-endian or varint):
//   "ETCDWSNP" | u32 version=1 |
//   records: u8 column | varint key length | key | varint value length | value  ...
//   u8 0xFF (end) | zero bytes up to a multiple of 512 | 32-byte SHA-256 of all preceding bytes
// (etcdctl accepts a snapshot only if its size modulo 512 is 32, as bbolt files are page-sized.)
// Records cover the Keys, Revisions and Leases columns and the Meta column's replicated records
// (storage/meta_records.h): a snapshot is replicated state, not the identity, caches or
// unfinished work of the member that made it. Restoring refuses any other Meta record.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <string>

#include "etcdw/common/hash.h"
#include "etcdw/common/status.h"
#include "etcdw/storage/engine.h"

namespace etcdw::mvcc {

inline constexpr char kSnapshotMagic[] = "ETCDWSNP";

class SnapshotWriter {
 public:
  // Pins the engine's current state; the copy reflects exactly that point in time.
  explicit SnapshotWriter(const storage::Engine& engine);
  ~SnapshotWriter();

  // Exact number of bytes the stream will contain (one pass over the pinned state).
  Result<uint64_t> TotalSize();
  // Appends up to about `max_bytes` of the stream to `out`. Returns false once everything,
  // trailer included, has been produced.
  Result<bool> Next(std::string& out, size_t max_bytes);

 private:
  bool NextRecord(std::string& out);
  const storage::Engine& engine_;
  std::unique_ptr<storage::Snapshot> snap_;
  int column_ = -1;  // -1: header not written yet
  std::unique_ptr<storage::Iterator> it_;
  bool trailer_done_ = false;
  uint64_t written_ = 0;  // bytes produced so far
  common::Sha256 sha_;
};

// Verifies a snapshot stream and loads it into an empty engine. Fails without partial success
// reported as success: on any error the caller must discard the engine.
Status RestoreSnapshot(std::istream& in, storage::Engine& engine);

// Deletes every record a snapshot covers (before restoring a snapshot over existing state).
Status ClearState(storage::Engine& engine);

// Checks only the trailer (SHA-256) of a snapshot file.
Status VerifySnapshotFile(const std::string& path);

}  // namespace etcdw::mvcc
