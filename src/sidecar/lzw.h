// LZW streams as Go's compress/lzw writes and reads them with LSB bit order and literal width 8
// (gardener's ".Z" snapshots). Codes are 9 to 12 bits wide, packed least significant bit first;
// 256 is the clear code, 257 the end code. The encoder starts every stream with a clear code,
// emits another clear code whenever code 4095 would be assigned, and ends with the end code, so
// that its output is byte-identical to Go's lzw.NewWriter(w, lzw.LSB, 8).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/common/status.h"

namespace etcdw::sidecar {

// Receives output bytes; a non-OK status aborts the operation and is returned by it.
using ByteSink = std::function<Status(std::string_view)>;

class LzwEncoder {
 public:
  LzwEncoder();
  // Compresses `data`, a continuation of everything written before.
  Status Write(std::string_view data, const ByteSink& sink);
  // Writes the pending code and the end code. The encoder must not be used afterwards.
  Status Finish(const ByteSink& sink);

 private:
  void Emit(uint32_t code);
  // Advances the next code to assign; returns true when the table was full and has been reset
  // (a clear code was emitted), in which case no entry is to be added.
  bool AdvanceHi();
  int32_t Find(uint32_t key) const;
  void Insert(uint32_t key, uint32_t code);
  void ResetTable();
  Status Drain(const ByteSink& sink);

  // Open-addressed map (prefix code << 8 | byte) -> code, packed as key << 12 | code; 0 = empty
  // (a valid entry always has code > 257).
  std::vector<uint32_t> table_;
  uint32_t hi_;         // the code assigned to the next table entry
  uint32_t width_;      // current code width in bits
  uint32_t overflow_;   // hi_ value at which the width grows
  int32_t saved_ = -1;  // the code of the longest match so far; -1 before any input
  uint64_t bits_ = 0;
  uint32_t nbits_ = 0;
  std::string out_;
};

class LzwDecoder {
 public:
  LzwDecoder();
  // Decodes `data`, a continuation of everything written before. Output is passed to `sink` in
  // pieces of bounded size. An invalid code or data after the end code is DataLoss.
  Status Write(std::string_view data, const ByteSink& sink);
  // Flushes buffered output; DataLoss when the end code has not been seen (truncated input).
  Status Finish(const ByteSink& sink);

 private:
  Status Decode(uint32_t code);
  Status Flush(const ByteSink& sink);

  std::array<uint16_t, 4096> prefix_{};
  std::array<uint8_t, 4096> suffix_{};
  std::array<uint8_t, 4096> scratch_{};  // one expansion, built back to front
  uint32_t hi_;
  uint32_t width_;
  uint32_t overflow_;
  int32_t last_ = -1;  // the previous code; -1 right after a clear code
  uint64_t bits_ = 0;
  uint32_t nbits_ = 0;
  bool ended_ = false;  // the end code has been read
  std::string out_;
};

}  // namespace etcdw::sidecar
