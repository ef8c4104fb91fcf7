#include "frame_buffer.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "etcdw/common/hash.h"

namespace etcdw::peer_transport {

namespace {
FrameHeader HeaderAt(const char* p) {
  std::array<uint8_t, kFrameHeaderSize> h;
  std::memcpy(h.data(), p, h.size());
  return DecodeFrameHeader(h);
}
}  // namespace

size_t FrameBuffer::FrameBytes() const {
  if (buffered() < kFrameHeaderSize) return kFrameHeaderSize;
  // A length over the limit is refused by Next before any room is made for it.
  const size_t length = std::min<size_t>(HeaderAt(buf_.data() + begin_).length, max_payload_);
  return kFrameHeaderSize + length;
}

FrameBuffer::Span FrameBuffer::Space() {
  if (begin_ == end_) {
    begin_ = end_ = 0;
    if (buf_.size() > kKeepBytes) std::string().swap(buf_);
  }
  const size_t want = std::max(FrameBytes(), buffered() + kReadBytes);
  if (buf_.size() - begin_ < want) {
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, buffered());
      end_ -= begin_;
      begin_ = 0;
    }
    if (buf_.size() < want) buf_.resize(want);
  }
  return Span{buf_.data() + end_, buf_.size() - end_};
}

void FrameBuffer::Commit(size_t n) { end_ = std::min(end_ + n, buf_.size()); }

Result<std::optional<Frame>> FrameBuffer::Next() {
  if (buffered() < kFrameHeaderSize) return std::optional<Frame>();
  const FrameHeader h = HeaderAt(buf_.data() + begin_);
  if (h.length > max_payload_) {
    return DataLoss("frame of " + std::to_string(h.length) + " bytes exceeds max-message-bytes (" +
                    std::to_string(max_payload_) + ")");
  }
  if (buffered() < kFrameHeaderSize + h.length) return std::optional<Frame>();
  const std::string_view payload(buf_.data() + begin_ + kFrameHeaderSize, h.length);
  if (common::Crc32c(0, payload) != h.crc) return DataLoss("checksum mismatch");
  begin_ += kFrameHeaderSize + h.length;
  return std::optional<Frame>(Frame{h.type, payload});
}

}  // namespace etcdw::peer_transport
