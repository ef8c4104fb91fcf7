// Snapshot compression as gardener's --compress-snapshots / --compression-policy: gzip (".gz")
// and zlib (".zlib") with the zlib library, lzw (".Z", Go's compress/lzw: LSB order, literal
// width 8). The whole object is compressed, trailer included. Streaming, file to file: a
// snapshot never has to fit in memory.
#pragma once

#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace etcdw::sidecar {

enum class Compression { kNone, kGzip, kZlib, kLzw };

// "gzip" | "zlib" | "lzw"; anything else is an error naming the allowed values.
Result<Compression> ParseCompressionPolicy(std::string_view policy);
// "" | ".gz" | ".zlib" | ".Z"
std::string_view CompressionSuffix(Compression c);
// The inverse of CompressionSuffix; an unknown suffix is an error.
Result<Compression> CompressionFromSuffix(std::string_view suffix);

// Writes `src` compressed to `dst` (created or truncated). kNone copies.
Status CompressFile(const std::string& src, const std::string& dst, Compression c);
// Writes `src` decompressed to `dst`. Damaged or truncated input is an error (DataLoss) that
// names the file, never a silently shortened output.
Status DecompressFile(const std::string& src, const std::string& dst, Compression c);

}  // namespace etcdw::sidecar
