// etcd 3.4's write-ahead log (<dir>/member/wal/*.wal) and snapshot files
// (<dir>/member/snap/*.snap), read for the takeover of an etcd data directory (takeover.cc).
// Read only: nothing here writes or renames etcd's files. Not a public interface.
//
// The WAL: files named <seq hex16>-<index hex16>.wal, read in sequence order (their sequence
// numbers must follow each other). Each holds records framed by a little-endian u64 whose low
// 56 bits are the record's length; when the top byte's high bit is set, its low 3 bits are the
// zero padding after the record (to 8 bytes). A record is an etcd walpb.Record
// (proto/etcdw/etcd_wal.proto) whose crc is the CRC-32C of every record's data so far, the chain
// carried from file to file by a crc-type record at the start of each. A zero length ends a file
// (etcd preallocates files with zeros). A record cut short or whose CRC fails, followed only by
// zeros or the end of the file, is a write a crash interrupted: accepted at the end of the last
// file only (etcd repairs it the same way), anywhere else it is DataLoss naming the file and
// offset. Files named otherwise (etcd's preallocated "0.tmp", "*.broken") are ignored.
//
// Snap files: <term hex16>-<index hex16>.snap, an etcd snappb.Snapshot whose crc is the CRC-32C
// of its data, a raftpb.Snapshot.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "etcdw/common/status.h"

namespace etcdw::data_dir::internal {

// A raftpb.Entry of etcd's log.
struct EtcdEntry {
  uint64_t index = 0;
  uint64_t term = 0;
  int64_t type = 0;  // 0 normal, 1 conf change, 2 conf change v2
  std::string data;
};

struct EtcdHardState {
  uint64_t term = 0;
  uint64_t vote = 0;
  uint64_t commit = 0;
};

// A log position (a snapshot's).
struct EtcdLogPosition {
  uint64_t index = 0;
  uint64_t term = 0;
};

// Everything the WAL holds, as etcd would replay it.
struct EtcdWal {
  uint64_t member_id = 0;    // the metadata record's NodeID
  uint64_t cluster_id = 0;   // and ClusterID
  EtcdHardState hard_state;  // the last one written
  // Every snapshot position recorded, in order (the first file starts with {0, 0}).
  std::vector<EtcdLogPosition> snapshots;
  // Entries with contiguous indexes, as the log ends: an entry whose index was already written
  // replaced that entry and every entry after it (a new leader's log).
  std::vector<EtcdEntry> entries;
  std::vector<std::string> files;  // the .wal files read, in order
  // Where a torn record at the end of the last file was dropped; -1 when the log ended cleanly.
  int64_t torn_tail_offset = -1;

  // The term of entry `index` if the log knows it: from its entries or a snapshot record.
  std::optional<uint64_t> TermOf(uint64_t index) const;
};

// Reads every .wal file of `wal_dir`. NotFound when the directory holds none; DataLoss (naming
// the file and the byte offset) for a damaged record, a CRC mismatch, metadata that differs
// between records, a gap in the sequence or in the entry indexes. Entries at or below
// `keep_data_after` are kept without their data (index, term and type only): the takeover needs
// the data of the entries after the backend's consistent index only, and etcd's WAL may hold
// hundreds of MiB of entries before it. Every record's CRC is checked either way.
Result<EtcdWal> ReadEtcdWal(const std::string& wal_dir, uint64_t keep_data_after = 0);

// A snapshot's metadata (raftpb.SnapshotMetadata).
struct EtcdSnapMeta {
  EtcdLogPosition position;
  std::vector<uint64_t> voters;
  std::vector<uint64_t> learners;
  std::string path;
};

// Reads one .snap file: DataLoss when it does not decode, its CRC fails or its metadata
// disagrees with its name.
Result<EtcdSnapMeta> ReadEtcdSnapFile(const std::string& path);

// The newest .snap file of `snap_dir` that reads (by the index then term in its name, as etcd
// picks it); older ones are not read. None when there is no .snap file. DataLoss when there are
// some and none reads.
Result<std::optional<EtcdSnapMeta>> ReadNewestEtcdSnap(const std::string& snap_dir);

}  // namespace etcdw::data_dir::internal
