// Frames read from a peer connection in large pieces.
//
// A sender writes all its queued frames with one write, so one read usually brings several
// frames (a leader's appends, a follower's answers): reading into a buffer and handing the
// frames out from it costs one system call per read instead of two per frame (header, then
// payload), and wakes the connection's strand once per read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"
#include "frame.h"

namespace etcdw::peer_transport {

// A frame handed out by FrameBuffer::Next. `payload` views the buffer: valid until the next call
// of Next, Space or Commit.
struct Frame {
  uint8_t type = 0;
  std::string_view payload;
};

class FrameBuffer {
 public:
  // Room a read is offered beyond the frame it completes, so that it can bring the frames queued
  // behind it.
  static constexpr size_t kReadBytes = size_t{64} << 10;
  // An emptied buffer larger than this (it held a large frame) is given back.
  static constexpr size_t kKeepBytes = 1 << 20;

  // Frames whose payload is longer than `max_payload` are refused.
  explicit FrameBuffer(size_t max_payload) : max_payload_(max_payload) {}

  // Where the next read puts its bytes: room for the rest of the frame begun (as its header
  // announces) and at least kReadBytes more. Moves the buffered bytes to the front when needed.
  struct Span {
    char* data;
    size_t size;
  };
  Span Space();
  // `n` bytes were read into the last Space().
  void Commit(size_t n);

  // The next whole frame when it is buffered, nullopt when more bytes are needed. DataLoss when
  // the next frame announces a payload over the limit or its payload fails its checksum: the
  // stream is then out of step and must be closed.
  Result<std::optional<Frame>> Next();

  // Bytes read and not yet handed out.
  size_t buffered() const { return end_ - begin_; }

 private:
  // The bytes the frame at begin_ needs in all, as far as its header is known.
  size_t FrameBytes() const;

  const size_t max_payload_;
  std::string buf_;
  size_t begin_ = 0;  // the first byte not handed out
  size_t end_ = 0;    // one past the last byte read
};

}  // namespace etcdw::peer_transport
