// A reader of bbolt database files (the storage of etcd's backend and of `etcdctl snapshot
// save`'s files), written from the format alone: no Go, no bbolt.
//
// The format, as this reader relies on it (all integers little-endian):
//   - The file is an array of pages of the database's page size. Every page starts with a
//     16-byte header: id (u64), flags (u16: 0x01 branch, 0x02 leaf, 0x04 meta, 0x10 freelist),
//     count (u16: elements), overflow (u32: further pages this one spans).
//   - Pages 0 and 1 are meta pages; after the header: magic 0xED0CDAED (u32), version 2 (u32),
//     page size (u32), flags (u32), the root bucket (root page u64, sequence u64), the freelist
//     page (u64), the high-water page id (u64: pages in use), the transaction id (u64), and an
//     FNV-1a 64 checksum (u64) of the 56 bytes before it. The valid meta with the higher
//     transaction id is the current one.
//   - A bucket is a B+tree: branch pages hold `count` elements {pos u32, ksize u32, page u64},
//     leaf pages `count` elements {flags u32, pos u32, ksize u32, vsize u32}; `pos` is the
//     offset of the key from the element itself, the value follows the key. A leaf element with
//     flag 0x01 is a nested bucket whose value starts with a bucket header {root page u64,
//     sequence u64}; root 0 means an inline bucket: its single leaf page follows the header
//     inside the value. The root bucket's leaf elements are the top-level buckets.
//
// Damage is an error that names the page and what is wrong with it (a checksum, a page id
// outside the file, an element outside its page, keys out of order, in a page or across pages
// (a page's keys outside the range its branch element gives it), a page of the wrong kind, a
// cycle), never a crash, an out-of-bounds read or a loop. Memory stays bounded: pages are read one
// at a time with pread (a traversal holds one page per tree level).
//
// Thread-safety: a BoltDb may be read from several threads at once (reads share only the file
// descriptor, used with pread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/common/status.h"

namespace etcdw::bbolt {

inline constexpr uint32_t kMagic = 0xED0CDAED;
inline constexpr uint32_t kVersion = 2;

// The current meta page's fields.
struct Meta {
  uint32_t page_size = 0;
  uint64_t root_page = 0;
  uint64_t freelist_page = 0;
  uint64_t high_water = 0;  // pages in use: every page id is below it
  uint64_t txid = 0;
  int from_page = 0;  // 0 or 1: the meta page it came from
};

// Whether `head` (a file's first bytes, at least 32) starts like a bbolt file: a meta page with
// the magic and version 2. Cheap; says nothing about the rest.
bool LooksLikeBolt(std::string_view head);

class BoltDb {
 public:
  // Opens `path` read-only. `length` bounds the database to the file's first `length` bytes
  // (an etcd snapshot's 32-byte SHA-256 trailer follows the database); -1: the whole file.
  // Errors: the file cannot be read, no valid meta page, a page size that is not a power of two
  // between 512 and 1 MiB, more pages in use than the file holds (a truncated file).
  static Result<std::unique_ptr<BoltDb>> Open(const std::string& path, int64_t length = -1);
  ~BoltDb();

  const Meta& meta() const { return meta_; }

  // Called for each entry of a bucket, in key order. A nested bucket's value is empty and
  // `is_bucket` is set. Returning an error stops the walk and is returned.
  using Visitor =
      std::function<Status(std::string_view key, std::string_view value, bool is_bucket)>;

  // Walks the bucket at `path` (names from the root: {} is the root bucket, whose entries are
  // the top-level buckets). kNotFound names the missing bucket.
  Status ForEach(const std::vector<std::string>& path, const Visitor& visit) const;
  // The value of `key` in the bucket at `path`; none when absent (or when it is a bucket).
  Result<std::optional<std::string>> Get(const std::vector<std::string>& path,
                                         std::string_view key) const;
  // Whether the bucket at `path` exists.
  Result<bool> HasBucket(const std::vector<std::string>& path) const;

  class Impl;

 private:
  BoltDb() = default;
  std::unique_ptr<Impl> impl_;
  Meta meta_;
};

// FNV-1a, 64 bits (bbolt's meta checksum).
uint64_t Fnv1a64(std::string_view data);

}  // namespace etcdw::bbolt
