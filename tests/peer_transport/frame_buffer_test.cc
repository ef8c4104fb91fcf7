// FrameBuffer: frames cut out of a byte stream that arrives in arbitrary pieces.
#include "peer_transport/frame_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace etcdw::peer_transport {
namespace {

std::string FrameOf(FrameType type, const std::string& payload) {
  std::string out;
  AppendFrame(out, type, payload);
  return out;
}

// Copies `bytes` into the buffer through Space/Commit, at most `piece` bytes per read.
void Feed(FrameBuffer& b, std::string_view bytes, size_t piece) {
  while (!bytes.empty()) {
    const FrameBuffer::Span room = b.Space();
    ASSERT_GT(room.size, 0u);
    const size_t n = std::min({piece, room.size, bytes.size()});
    std::memcpy(room.data, bytes.data(), n);
    b.Commit(n);
    bytes.remove_prefix(n);
  }
}

// Every whole frame buffered, as (type, payload).
std::vector<std::pair<int, std::string>> Drain(FrameBuffer& b) {
  std::vector<std::pair<int, std::string>> out;
  for (;;) {
    auto next = b.Next();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !next->has_value()) return out;
    out.emplace_back((*next)->type, std::string((*next)->payload));
  }
}

TEST(FrameBufferTest, OneReadBringsSeveralFrames) {
  FrameBuffer b(1 << 20);
  const std::string bytes = FrameOf(FrameType::kMessage, "one") +
                            FrameOf(FrameType::kMessage, std::string(1000, 'x')) +
                            FrameOf(FrameType::kCallRequest, "");
  Feed(b, bytes, bytes.size());
  auto frames = Drain(b);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0], std::make_pair(1, std::string("one")));
  EXPECT_EQ(frames[1], std::make_pair(1, std::string(1000, 'x')));
  EXPECT_EQ(frames[2], std::make_pair(6, std::string()));
  EXPECT_EQ(b.buffered(), 0u);
}

TEST(FrameBufferTest, FramesSplitAcrossReadsAtEveryByte) {
  const std::string bytes = FrameOf(FrameType::kMessage, "first payload") +
                            FrameOf(FrameType::kSnapshotChunk, std::string(300, 'c'));
  for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, size_t{100}}) {
    FrameBuffer b(1 << 20);
    std::vector<std::pair<int, std::string>> frames;
    for (size_t at = 0; at < bytes.size(); at += piece) {
      Feed(b, std::string_view(bytes).substr(at, piece), piece);
      for (auto& f : Drain(b)) frames.push_back(std::move(f));
      if (at + piece < kFrameHeaderSize + 13) {
        EXPECT_TRUE(frames.empty())
            << "a frame handed out before all its bytes came, piece " << piece;
      }
    }
    ASSERT_EQ(frames.size(), 2u) << "piece " << piece;
    EXPECT_EQ(frames[0].second, "first payload");
    EXPECT_EQ(frames[1], std::make_pair(3, std::string(300, 'c')));
  }
}

TEST(FrameBufferTest, ALargeFrameGetsRoomForItAllAndItsMemoryIsGivenBack) {
  FrameBuffer b(8 << 20);
  const std::string big(3 << 20, 'b');
  const std::string bytes = FrameOf(FrameType::kSnapshotChunk, big);
  Feed(b, std::string_view(bytes).substr(0, kFrameHeaderSize), kFrameHeaderSize);
  // Once its header is known, one read can bring the whole frame.
  EXPECT_GE(b.Space().size, big.size());
  Feed(b, std::string_view(bytes).substr(kFrameHeaderSize), bytes.size());
  auto frames = Drain(b);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].second, big);
  // Emptied, the buffer drops back to its usual size.
  EXPECT_EQ(b.Space().size, FrameBuffer::kReadBytes);
}

TEST(FrameBufferTest, APartialFrameMovesToTheFrontAndReadsStayLarge) {
  FrameBuffer b(1 << 20);
  const std::string frame = FrameOf(FrameType::kMessage, std::string(1000, 'm'));
  std::string stream;
  while (stream.size() < 3 * FrameBuffer::kReadBytes) stream += frame;
  size_t got = 0;
  for (size_t at = 0; at < stream.size();) {
    const FrameBuffer::Span room = b.Space();
    EXPECT_GE(room.size, FrameBuffer::kReadBytes);
    const size_t n = std::min(room.size, stream.size() - at);
    std::memcpy(room.data, stream.data() + at, n);
    b.Commit(n);
    at += n;
    for (auto& f : Drain(b)) {
      EXPECT_EQ(f.second, std::string(1000, 'm'));
      ++got;
    }
    EXPECT_LT(b.buffered(), frame.size());
  }
  EXPECT_EQ(got, stream.size() / frame.size());
}

TEST(FrameBufferTest, AFrameOverTheLimitIsRefusedOnItsHeader) {
  FrameBuffer b(100);
  std::string header(kFrameHeaderSize, '\0');
  PutU32(reinterpret_cast<uint8_t*>(header.data()), 101);
  header[8] = 1;
  Feed(b, header, header.size());
  auto next = b.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), Code::kDataLoss);
  EXPECT_EQ(next.status().message(), "frame of 101 bytes exceeds max-message-bytes (100)");
  // A frame of exactly the limit is fine.
  FrameBuffer exact(100);
  Feed(exact, FrameOf(FrameType::kMessage, std::string(100, 'e')), 1000);
  EXPECT_EQ(Drain(exact).size(), 1u);
}

TEST(FrameBufferTest, AChecksumMismatchIsDataLoss) {
  FrameBuffer b(1 << 20);
  std::string bytes = FrameOf(FrameType::kMessage, "good") + FrameOf(FrameType::kMessage, "bad");
  bytes.back() ^= 0x20;
  Feed(b, bytes, bytes.size());
  auto first = b.Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->payload, "good");
  auto second = b.Next();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kDataLoss);
  EXPECT_EQ(second.status().message(), "checksum mismatch");
}

}  // namespace
}  // namespace etcdw::peer_transport
