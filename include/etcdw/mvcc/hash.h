// Store hashes for consistency checks between members (etcd's Hash and HashKV).
#pragma once

#include <cstdint>

#include "etcdw/common/status.h"
#include "etcdw/mvcc/kv_store.h"

namespace etcdw::mvcc {

struct HashKVResult {
  uint32_t hash = 0;
  int64_t rev = 0;          // the store revision when hashed
  int64_t compact_rev = 0;  // the compaction revision the hash is relative to
};

// CRC-32C over every key version visible at revisions in [compaction revision, rev]
// (rev 0: the current revision). Versions that compaction removes are excluded whether or
// not the physical compaction has run, so members with the same history agree.
Result<HashKVResult> HashKV(const KvStore& store, int64_t rev);

// CRC-32C over the whole replicated state (keys, revision log, leases).
Result<uint32_t> HashAll(const storage::Engine& engine);

}  // namespace etcdw::mvcc
