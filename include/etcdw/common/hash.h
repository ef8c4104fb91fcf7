// Checksums: CRC-32C (Castagnoli, as etcd's Hash/HashKV use) and SHA-256 (snapshot trailers).
#pragma once

#include <array>
#include <cstdint>
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

}  // namespace etcdw::common
