// Checksums: CRC-32C (Castagnoli, as etcd's Hash/HashKV use) and SHA-256 (snapshot trailers);
// HMAC-SHA256 and base64 for the request signatures of the object stores.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace etcdw::common {

// Extends a running CRC-32C with `data`. Start with crc = 0. Uses the CPU's CRC32 instruction
// (SSE 4.2) when it has one: the Raft log checksums every record it reads at start-up.
uint32_t Crc32c(uint32_t crc, std::string_view data);
// The same, table-driven, on any CPU (what Crc32c falls back to; tests compare the two).
uint32_t Crc32cPortable(uint32_t crc, std::string_view data);

// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view data);
  std::array<uint8_t, 32> Final();

 private:
  void* ctx_;  // EVP_MD_CTX
};

std::string ToHex(std::string_view bytes);

// HMAC-SHA256 of `data` under `key`: 32 raw bytes.
std::string HmacSha256(std::string_view key, std::string_view data);

// Standard base64 (RFC 4648 section 4, '+' '/', padded with '=').
std::string Base64Encode(std::string_view bytes);
// Decodes standard padded base64, skipping CR and LF anywhere (as Go's decoder does, so that a
// key read from a file with a trailing line break still decodes). nullopt for any other
// character outside the alphabet, a length that is not a multiple of 4, or misplaced padding.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace etcdw::common
