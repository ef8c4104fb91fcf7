// Feeds the peer transport's decoders arbitrary bytes: the handshake and its acknowledgement
// (the input's first bytes), and the frame stream (the rest), split into frames by FrameBuffer
// with reads cut where the input chooses, with call requests, call responses and replies decoded
// from every frame payload. Beyond not crashing, it checks that:
// - the frames do not depend on where the reads are cut: the stream read whole, read in pieces
//   and read a byte at a time gives the same frames and the same end (an error, or the same bytes
//   left over), which are the frames a plain reading of the documented format gives;
// - the frames, written again with AppendFrame, are the bytes they were read from;
// - what decodes encodes back to the same bytes (handshake, acknowledgement, frame header, call
//   request, call response and cluster information whose status survives the trip), and a
//   handshake made of the input's fields decodes to those fields.
// Input: byte 0 chooses the frame size limit, byte 1 the read sizes; bytes 2.. are decoded as a
// handshake (36 bytes), an acknowledgement and a frame header (their first bytes), and are the
// frame stream, after the handshake or acknowledgement they begin with, as on a connection.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/common/hash.h"
#include "peer_transport/frame.h"
#include "peer_transport/frame_buffer.h"

namespace {

namespace pt = etcdw::peer_transport;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "peer_frames_fuzzer: %s\n", what);
  std::abort();
}

struct Frame {
  uint8_t type;
  std::string payload;
  bool operator==(const Frame&) const = default;
};

// What reading a stream gives: its frames, then either an error or the bytes left over.
struct Reading {
  std::vector<Frame> frames;
  bool error = false;
  size_t left = 0;
  bool operator==(const Reading&) const = default;
};

// Reads `stream` through a FrameBuffer, each read bringing at most the next of `reads` bytes
// (cycling; at least one byte).
Reading ReadThroughBuffer(std::string_view stream, size_t max_payload,
                          const std::vector<size_t>& reads) {
  pt::FrameBuffer buffer(max_payload);
  Reading out;
  size_t at = 0;
  for (size_t r = 0; at < stream.size(); ++r) {
    const pt::FrameBuffer::Span space = buffer.Space();
    if (space.size == 0) Fail("Space offered no room");
    const size_t n = std::min({reads[r % reads.size()], space.size, stream.size() - at});
    std::memcpy(space.data, stream.data() + at, n);
    buffer.Commit(n);
    at += n;
    for (;;) {
      auto next = buffer.Next();
      if (!next.ok()) {
        if (next.status().message().empty()) Fail("an error without a message");
        out.error = true;
        return out;
      }
      if (!next->has_value()) break;
      out.frames.push_back(Frame{(*next)->type, std::string((*next)->payload)});
    }
  }
  out.left = buffer.buffered();
  return out;
}

// The documented format read plainly: u32 length | u32 CRC-32C | u8 type | payload.
Reading ReadPlainly(std::string_view stream, size_t max_payload) {
  Reading out;
  size_t at = 0;
  while (stream.size() - at >= pt::kFrameHeaderSize) {
    const auto* h = reinterpret_cast<const uint8_t*>(stream.data() + at);
    const uint32_t length = pt::GetU32(h);
    if (length > max_payload) {
      out.error = true;
      return out;
    }
    if (stream.size() - at - pt::kFrameHeaderSize < length) break;
    const std::string_view payload = stream.substr(at + pt::kFrameHeaderSize, length);
    if (etcdw::common::Crc32c(0, payload) != pt::GetU32(h + 4)) {
      out.error = true;
      return out;
    }
    out.frames.push_back(Frame{h[8], std::string(payload)});
    at += pt::kFrameHeaderSize + length;
  }
  out.left = stream.size() - at;
  return out;
}

std::string_view View(const uint8_t* p, size_t n) {
  return std::string_view(reinterpret_cast<const char*>(p), n);
}

// The payload of the one frame in `frame`, after checking that it is one frame of type `type`.
std::string_view PayloadOf(const std::string& frame, pt::FrameType type) {
  if (frame.size() < pt::kFrameHeaderSize) Fail("an encoded frame is shorter than a header");
  const auto* h = reinterpret_cast<const uint8_t*>(frame.data());
  if (pt::GetU32(h) != frame.size() - pt::kFrameHeaderSize) Fail("an encoded frame's length");
  if (h[8] != static_cast<uint8_t>(type)) Fail("an encoded frame's type");
  return std::string_view(frame).substr(pt::kFrameHeaderSize);
}

// Whether a decoded reply's status encodes back to the code and message it came from: codes this
// build does not know become kUnknown, and an OK status carries no message.
bool ReplyIsExact(std::string_view body) {
  const auto* b = reinterpret_cast<const uint8_t*>(body.data());
  const uint32_t code = pt::GetU32(b);
  const uint32_t message_size = pt::GetU32(b + 4);
  return code <= static_cast<uint32_t>(etcdw::Code::kUnauthenticated) &&
         (code != 0 || message_size == 0);
}

void CheckPayloadDecoders(std::string_view payload) {
  if (auto req = pt::DecodeCallRequest(payload); req.ok()) {
    std::string again;
    pt::AppendCallRequest(again, req->id, req->method, req->payload);
    if (PayloadOf(again, pt::FrameType::kCallRequest) != payload) {
      Fail("a call request encoded again differs");
    }
  } else if (payload.size() >= pt::kCallRequestOverhead) {
    Fail("a call request long enough was refused");
  }

  auto resp = pt::DecodeCallResponse(payload);
  if (resp.ok()) {
    if (payload.size() < pt::kCallResponseOverhead) Fail("a short call response decoded");
    if (ReplyIsExact(payload.substr(8))) {
      std::string again;
      pt::AppendCallResponse(again, resp->id, resp->reply.status, resp->reply.payload);
      if (PayloadOf(again, pt::FrameType::kCallResponse) != payload) {
        Fail("a call response encoded again differs");
      }
    }
  } else if (resp.status().message().empty()) {
    Fail("a call response error without a message");
  }

  auto reply = pt::DecodeReply(payload);
  if (reply.ok()) {
    const std::string_view p = reply->payload;
    if (p.data() < payload.data() || p.data() + p.size() != payload.data() + payload.size()) {
      Fail("a reply's answer is not the end of its payload");
    }
    if (ReplyIsExact(payload)) {
      std::string again;
      pt::AppendClusterInfo(again, reply->status, reply->payload);
      if (PayloadOf(again, pt::FrameType::kClusterInfo) != payload) {
        Fail("a reply encoded again differs");
      }
    }
  }
}

void CheckHandshake(std::string_view in) {
  std::array<uint8_t, pt::kHandshakeSize> b{};
  std::memcpy(b.data(), in.data(), std::min(in.size(), b.size()));
  auto h = pt::DecodeHandshake(b);
  if (h.ok()) {
    std::array<uint8_t, pt::kHandshakeSize> again = pt::EncodeHandshake(*h);
    // The reserved byte is written 0 and not checked on reading (only through the checksum).
    if (b[7] == 0 && again != b) Fail("a handshake encoded again differs");
  } else if (pt::GetU32(b.data()) == pt::kHandshakeMagic &&
             pt::GetU32(&b[32]) == etcdw::common::Crc32c(0, View(b.data(), 32))) {
    Fail("a handshake with its magic and checksum was refused");
  }

  // The input's fields as a handshake: they come back.
  pt::Handshake mine;
  mine.version = static_cast<uint16_t>(b[4] << 8 | b[5]);
  mine.kind = b[6];
  mine.cluster_id = pt::GetU64(&b[8]);
  mine.sender_id = pt::GetU64(&b[16]);
  mine.receiver_id = pt::GetU64(&b[24]);
  auto back = pt::DecodeHandshake(pt::EncodeHandshake(mine));
  if (!back.ok() || back->version != mine.version || back->kind != mine.kind ||
      back->cluster_id != mine.cluster_id || back->sender_id != mine.sender_id ||
      back->receiver_id != mine.receiver_id) {
    Fail("an encoded handshake does not decode to its fields");
  }

  std::array<uint8_t, pt::kAckSize> a{};
  std::memcpy(a.data(), in.data(), std::min(in.size(), a.size()));
  auto ack = pt::DecodeAck(a);
  if (ack.ok() != (pt::GetU32(a.data()) == pt::kAckMagic)) Fail("an ack's magic");
  if (ack.ok() && pt::EncodeAck(*ack) != a) Fail("an ack encoded again differs");
  (void)pt::HandshakeResultName(static_cast<pt::HandshakeResult>(pt::GetU32(&a[4])));

  std::array<uint8_t, pt::kFrameHeaderSize> fh{};
  std::memcpy(fh.data(), in.data(), std::min(in.size(), fh.size()));
  const pt::FrameHeader header = pt::DecodeFrameHeader(fh);
  std::array<uint8_t, pt::kFrameHeaderSize> fh_again{};
  pt::PutU32(&fh_again[0], header.length);
  pt::PutU32(&fh_again[4], header.crc);
  fh_again[8] = header.type;
  if (fh_again != fh) Fail("a frame header written again differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t max_payload = static_cast<size_t>(data[0]) * 16;
  const uint8_t read_choice = data[1];
  const std::string_view in = View(data + 2, size - 2);

  CheckHandshake(in);
  std::string_view stream = in;
  if (in.size() >= 4 && pt::GetU32(data + 2) == pt::kHandshakeMagic) {
    stream.remove_prefix(std::min(in.size(), pt::kHandshakeSize));
  } else if (in.size() >= 4 && pt::GetU32(data + 2) == pt::kAckMagic) {
    stream.remove_prefix(std::min(in.size(), pt::kAckSize));
  }

  // Read sizes from 1 to 16 bytes, chosen by the bits of byte 1 and the input's length.
  std::vector<size_t> cut;
  for (int i = 0; i < 8; ++i)
    cut.push_back(1 + ((read_choice >> i) & 1) * 7 + (stream.size() + i) % 9);
  const Reading plain = ReadPlainly(stream, max_payload);
  const Reading whole = ReadThroughBuffer(stream, max_payload, {stream.size() + 1});
  if (whole != plain) Fail("the frames read whole are not the documented format's");
  if (ReadThroughBuffer(stream, max_payload, cut) != whole) {
    Fail("the frames depend on where the reads are cut");
  }
  if (ReadThroughBuffer(stream, max_payload, {1}) != whole) {
    Fail("the frames read a byte at a time differ");
  }

  // Written again, the frames are the bytes read.
  std::string again;
  for (const Frame& f : whole.frames) {
    pt::AppendFrame(again, static_cast<pt::FrameType>(f.type), f.payload);
    CheckPayloadDecoders(f.payload);
  }
  if (!whole.error && again != stream.substr(0, stream.size() - whole.left)) {
    Fail("the frames written again are not the bytes read");
  }
  if (whole.error && stream.substr(0, again.size()) != again) {
    Fail("the frames before an error written again are not the bytes read");
  }
  return 0;
}
