// A streaming writer of bbolt database files (the format described in db.h), for handing our
// store to etcd as the database it keeps in member/snap/db and streams from Maintenance.Snapshot.
//
// The caller adds the top-level buckets in strictly increasing name order and each bucket's
// entries in strictly increasing key order; nested buckets are not written. Memory is bounded
// by the tree's height, not its size: leaf pages go to the file as they fill, and each branch
// level keeps one open page, written when full, so the tree is built bottom-up as the entries
// arrive. An entry too big for one page gets a page with overflow pages (bbolt's own layout),
// and the following entries join it up to 64 KiB, so big values share runs of pages.
//
// The file written, page size 4096:
//   page 0, 1   meta pages, written last (pwrite at the start of the file), transaction ids 1
//               and 2, both pointing at the same tree; FNV-1a checksums
//   page 2..    every bucket's pages in the order they filled (leaves, then branches), then the
//               root bucket's pages (its leaf elements are the top-level buckets, flag 0x01,
//               value = bucket header {root page, sequence 0}), then one empty freelist page
// The high-water mark is the number of pages: every page below it is in use and none is free,
// so bbolt may open the file read-write and allocate after it (what etcd does with a restored
// database). Every bucket, even an empty one, has a page of its own (no inline buckets).
//
// Bad use is an error value naming what is wrong (a name or key out of order, an empty key, a
// key or value over bbolt's limits, a call after Finish); the file is then unusable, and a
// writer destroyed before a successful Finish removes its file.
//
// Thread-compatible: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace etcdw::bbolt {

inline constexpr uint32_t kWriterPageSize = 4096;
// bbolt's limits (bolt_*.go: MaxKeySize, MaxValueSize).
inline constexpr size_t kMaxKeySize = 32768;
inline constexpr size_t kMaxValueSize = (size_t{1} << 31) - 2;

struct WriterStats {
  uint64_t pages = 0;  // the high-water mark: the file holds pages * 4096 bytes
  uint64_t entries = 0;
  uint64_t buckets = 0;
  uint64_t overflow_pages = 0;  // pages spanned by elements bigger than a page
};

class BoltWriter {
 public:
  // Creates `path` (it must not exist: nothing is overwritten). The file is complete only after
  // Finish returns Ok.
  static Result<std::unique_ptr<BoltWriter>> Create(const std::string& path);
  ~BoltWriter();
  BoltWriter(const BoltWriter&) = delete;
  BoltWriter& operator=(const BoltWriter&) = delete;

  // Ends the open bucket, if any, and opens the top-level bucket `name`, which must sort after
  // every bucket added before it and be non-empty.
  Status BeginBucket(std::string_view name);
  // Adds an entry to the open bucket; `key` must sort after the bucket's previous key.
  Status Put(std::string_view key, std::string_view value);
  // Ends the open bucket, writes the root bucket, the freelist and both meta pages, and closes
  // the file without syncing it (a caller that keeps the file syncs it; Maintenance.Snapshot's
  // file is streamed and deleted). Returns the statistics; the file then holds exactly
  // stats.pages pages.
  Result<WriterStats> Finish();

  class Impl;

 private:
  explicit BoltWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace etcdw::bbolt
