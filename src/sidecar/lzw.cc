#include "lzw.h"

#include <algorithm>

namespace etcdw::sidecar {
namespace {

constexpr uint32_t kLiteralWidth = 8;
constexpr uint32_t kClear = 1u << kLiteralWidth;  // 256
constexpr uint32_t kEnd = kClear + 1;             // 257
constexpr uint32_t kMaxWidth = 12;
constexpr uint32_t kMaxCode = (1u << kMaxWidth) - 1;  // 4095: never assigned by the encoder
constexpr int kTableBits = 14;                        // 16384 slots for < 4096 entries
constexpr uint32_t kTableMask = (1u << kTableBits) - 1;
constexpr size_t kOutChunk = size_t{64} << 10;

uint32_t Slot(uint32_t key) { return (key * 0x9E3779B1u) >> (32 - kTableBits); }

}  // namespace

LzwEncoder::LzwEncoder() : table_(size_t{1} << kTableBits, 0) { ResetTable(); }

void LzwEncoder::ResetTable() {
  std::fill(table_.begin(), table_.end(), 0);
  hi_ = kEnd;
  width_ = kLiteralWidth + 1;
  overflow_ = 1u << width_;
}

void LzwEncoder::Emit(uint32_t code) {
  bits_ |= static_cast<uint64_t>(code) << nbits_;
  nbits_ += width_;
  while (nbits_ >= 8) {
    out_.push_back(static_cast<char>(bits_ & 0xFF));
    bits_ >>= 8;
    nbits_ -= 8;
  }
}

bool LzwEncoder::AdvanceHi() {
  ++hi_;
  if (hi_ == overflow_) {
    ++width_;
    overflow_ <<= 1;
  }
  if (hi_ == kMaxCode) {
    // The table is full: tell the decoder (at the current width) and start over.
    Emit(kClear);
    ResetTable();
    return true;
  }
  return false;
}

int32_t LzwEncoder::Find(uint32_t key) const {
  for (uint32_t s = Slot(key);; s = (s + 1) & kTableMask) {
    uint32_t e = table_[s];
    if (e == 0) return -1;
    if (e >> 12 == key) return static_cast<int32_t>(e & kMaxCode);
  }
}

void LzwEncoder::Insert(uint32_t key, uint32_t code) {
  uint32_t s = Slot(key);
  while (table_[s] != 0) s = (s + 1) & kTableMask;
  table_[s] = key << 12 | code;
}

Status LzwEncoder::Drain(const ByteSink& sink) {
  if (out_.empty()) return Status::Ok();
  Status s = sink(out_);
  out_.clear();
  return s;
}

Status LzwEncoder::Write(std::string_view data, const ByteSink& sink) {
  if (data.empty()) return Status::Ok();
  size_t i = 0;
  uint32_t code;
  if (saved_ < 0) {
    // Like Go (and GIF's advice), every stream opens with a clear code; the first code after it
    // is always a literal.
    Emit(kClear);
    code = static_cast<uint8_t>(data[0]);
    i = 1;
  } else {
    code = static_cast<uint32_t>(saved_);
  }
  for (; i < data.size(); ++i) {
    uint32_t literal = static_cast<uint8_t>(data[i]);
    uint32_t key = code << 8 | literal;
    int32_t found = Find(key);
    if (found >= 0) {  // the match goes on
      code = static_cast<uint32_t>(found);
      continue;
    }
    Emit(code);
    code = literal;
    if (!AdvanceHi()) Insert(key, hi_);
    if (out_.size() >= kOutChunk) ETCDW_RETURN_IF_ERROR(Drain(sink));
  }
  saved_ = static_cast<int32_t>(code);
  return Drain(sink);
}

Status LzwEncoder::Finish(const ByteSink& sink) {
  if (saved_ >= 0) {
    Emit(static_cast<uint32_t>(saved_));
    AdvanceHi();  // may emit a clear code and narrow the end code, exactly as Go does
  } else {
    Emit(kClear);  // empty input: the stream is just clear, end
  }
  Emit(kEnd);
  if (nbits_ > 0) {
    out_.push_back(static_cast<char>(bits_ & 0xFF));
    bits_ = 0;
    nbits_ = 0;
  }
  return Drain(sink);
}

LzwDecoder::LzwDecoder()
    : hi_(kEnd), width_(kLiteralWidth + 1), overflow_(1u << (kLiteralWidth + 1)) {}

Status LzwDecoder::Flush(const ByteSink& sink) {
  if (out_.empty()) return Status::Ok();
  Status s = sink(out_);
  out_.clear();
  return s;
}

Status LzwDecoder::Decode(uint32_t code) {
  if (code == kClear) {
    width_ = kLiteralWidth + 1;
    hi_ = kEnd;
    overflow_ = 1u << width_;
    last_ = -1;
    return Status::Ok();
  }
  if (code == kEnd) {
    ended_ = true;
    return Status::Ok();
  }
  uint8_t first;
  if (code < kClear) {
    first = static_cast<uint8_t>(code);
    out_.push_back(static_cast<char>(first));
  } else if (code <= hi_) {
    // Expand back to front into scratch_. While codes are being assigned, the code equal to hi_
    // is not in the table yet: it stands for the previous expansion followed by that
    // expansion's first byte. Once the table is frozen (last_ < 0, hi_ == 4095), hi_ is a
    // complete entry. Right after a clear code hi_ is the end code, handled above.
    size_t i = scratch_.size();
    uint32_t c = code;
    if (code == hi_ && last_ >= 0) {
      uint32_t head = static_cast<uint32_t>(last_);
      while (head >= kClear) head = prefix_[head];
      scratch_[--i] = static_cast<uint8_t>(head);
      c = static_cast<uint32_t>(last_);
    }
    while (c >= kClear) {
      scratch_[--i] = suffix_[c];
      c = prefix_[c];
    }
    scratch_[--i] = static_cast<uint8_t>(c);
    first = static_cast<uint8_t>(c);
    out_.append(reinterpret_cast<const char*>(scratch_.data()) + i, scratch_.size() - i);
  } else {
    return DataLoss("invalid LZW code " + std::to_string(code) + " (next code " +
                    std::to_string(hi_) + ")");
  }
  if (last_ >= 0) {
    suffix_[hi_] = first;
    prefix_[hi_] = static_cast<uint16_t>(last_);
  }
  last_ = static_cast<int32_t>(code);
  ++hi_;
  if (hi_ >= overflow_) {
    if (width_ == kMaxWidth) {
      // The table is full and the encoder did not clear it: keep it frozen.
      last_ = -1;
      --hi_;
    } else {
      ++width_;
      overflow_ <<= 1;
    }
  }
  return Status::Ok();
}

Status LzwDecoder::Write(std::string_view data, const ByteSink& sink) {
  for (char ch : data) {
    if (ended_) return DataLoss("data after the LZW end code");
    bits_ |= static_cast<uint64_t>(static_cast<uint8_t>(ch)) << nbits_;
    nbits_ += 8;
    while (!ended_ && nbits_ >= width_) {
      uint32_t code = static_cast<uint32_t>(bits_ & ((1u << width_) - 1));
      bits_ >>= width_;
      nbits_ -= width_;
      ETCDW_RETURN_IF_ERROR(Decode(code));
    }
    if (out_.size() >= kOutChunk) ETCDW_RETURN_IF_ERROR(Flush(sink));
  }
  return Flush(sink);
}

Status LzwDecoder::Finish(const ByteSink& sink) {
  ETCDW_RETURN_IF_ERROR(Flush(sink));
  if (!ended_) return DataLoss("truncated LZW stream (no end code)");
  return Status::Ok();
}

}  // namespace etcdw::sidecar
