// Versioned keys: `<user key bytes><8-byte big-endian version>`, ordered by user key ascending
// and, for equal user keys, by version DESCENDING, so that seeking to (key, v) lands on the
// newest version of `key` at or below v. The Keys column uses this order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rocksdb {
class Comparator;
}

namespace etcdw::storage {

constexpr size_t kVersionSuffixBytes = 8;

std::string MakeVersionedKey(std::string_view user_key, uint64_t version);
void AppendVersionedKey(std::string& out, std::string_view user_key, uint64_t version);
// Precondition: `vkey` is at least 8 bytes (every key in the column is).
std::string_view UserKeyOf(std::string_view vkey);
uint64_t VersionOf(std::string_view vkey);

// The RocksDB comparator for the order above. Its name is recorded in the database.
const rocksdb::Comparator* VersionedKeyComparator();

}  // namespace etcdw::storage
