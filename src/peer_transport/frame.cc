#include "frame.h"

#include <cstring>

#include "etcdw/common/hash.h"

namespace etcdw::peer_transport {

namespace {
std::string_view View(const uint8_t* p, size_t n) {
  return std::string_view(reinterpret_cast<const char*>(p), n);
}
}  // namespace

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | p[i];
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

const char* HandshakeResultName(HandshakeResult r) {
  switch (r) {
    case HandshakeResult::kAccepted:
      return "accepted";
    case HandshakeResult::kBadVersion:
      return "unsupported protocol version";
    case HandshakeResult::kClusterMismatch:
      return "cluster ID mismatch";
    case HandshakeResult::kWrongReceiver:
      return "receiver ID mismatch (the connection is for another member)";
    case HandshakeResult::kBadStreamKind:
      return "unknown stream kind";
  }
  return "unknown handshake result";
}

std::array<uint8_t, kHandshakeSize> EncodeHandshake(const Handshake& h) {
  std::array<uint8_t, kHandshakeSize> b{};
  PutU32(&b[0], kHandshakeMagic);
  b[4] = static_cast<uint8_t>(h.version >> 8);
  b[5] = static_cast<uint8_t>(h.version);
  b[6] = h.kind;
  b[7] = 0;
  PutU64(&b[8], h.cluster_id);
  PutU64(&b[16], h.sender_id);
  PutU64(&b[24], h.receiver_id);
  PutU32(&b[32], common::Crc32c(0, View(b.data(), 32)));
  return b;
}

Result<Handshake> DecodeHandshake(const std::array<uint8_t, kHandshakeSize>& b) {
  if (GetU32(&b[0]) != kHandshakeMagic) return InvalidArgument("not a peer transport handshake");
  if (GetU32(&b[32]) != common::Crc32c(0, View(b.data(), 32))) {
    return DataLoss("handshake checksum mismatch");
  }
  Handshake h;
  h.version = static_cast<uint16_t>(b[4] << 8 | b[5]);
  h.kind = b[6];
  h.cluster_id = GetU64(&b[8]);
  h.sender_id = GetU64(&b[16]);
  h.receiver_id = GetU64(&b[24]);
  return h;
}

std::array<uint8_t, kAckSize> EncodeAck(HandshakeResult r) {
  std::array<uint8_t, kAckSize> b{};
  PutU32(&b[0], kAckMagic);
  PutU32(&b[4], static_cast<uint32_t>(r));
  return b;
}

Result<HandshakeResult> DecodeAck(const std::array<uint8_t, kAckSize>& b) {
  if (GetU32(&b[0]) != kAckMagic) return InvalidArgument("not a peer transport acknowledgement");
  return static_cast<HandshakeResult>(GetU32(&b[4]));
}

FrameHeader DecodeFrameHeader(const std::array<uint8_t, kFrameHeaderSize>& b) {
  return FrameHeader{GetU32(&b[0]), GetU32(&b[4]), b[8]};
}

size_t BeginFrame(std::string& out) {
  size_t offset = out.size();
  out.append(kFrameHeaderSize, '\0');
  return offset;
}

void EndFrame(std::string& out, size_t header_offset, FrameType type) {
  const size_t start = header_offset + kFrameHeaderSize;
  auto* h = reinterpret_cast<uint8_t*>(out.data() + header_offset);
  PutU32(h, static_cast<uint32_t>(out.size() - start));
  PutU32(h + 4, common::Crc32c(0, std::string_view(out).substr(start)));
  h[8] = static_cast<uint8_t>(type);
}

void AppendFrame(std::string& out, FrameType type, std::string_view payload) {
  size_t h = BeginFrame(out);
  out.append(payload);
  EndFrame(out, h, type);
}

void AppendMessageFrame(std::string& out, const raftpb::Message& m, size_t size) {
  size_t h = BeginFrame(out);
  size_t start = out.size();
  out.resize(start + size);
  m.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + start));
  EndFrame(out, h, FrameType::kMessage);
}

namespace {
void AppendU32(std::string& out, uint32_t v) {
  uint8_t b[4];
  PutU32(b, v);
  out.append(reinterpret_cast<const char*>(b), 4);
}
void AppendU64(std::string& out, uint64_t v) {
  uint8_t b[8];
  PutU64(b, v);
  out.append(reinterpret_cast<const char*>(b), 8);
}
void AppendReply(std::string& out, const Status& status, std::string_view payload) {
  AppendU32(out, static_cast<uint32_t>(status.code()));
  AppendU32(out, static_cast<uint32_t>(status.message().size()));
  out.append(status.message());
  out.append(payload);
}
const uint8_t* Bytes(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }
}  // namespace

void AppendCallRequest(std::string& out, uint64_t id, uint32_t method, std::string_view payload) {
  size_t h = BeginFrame(out);
  AppendU64(out, id);
  AppendU32(out, method);
  out.append(payload);
  EndFrame(out, h, FrameType::kCallRequest);
}

Result<CallRequest> DecodeCallRequest(std::string_view frame_payload) {
  if (frame_payload.size() < kCallRequestOverhead) return DataLoss("call request too short");
  CallRequest r;
  r.id = GetU64(Bytes(frame_payload));
  r.method = GetU32(Bytes(frame_payload) + 8);
  r.payload = frame_payload.substr(kCallRequestOverhead);
  return r;
}

void AppendCallResponse(std::string& out, uint64_t id, const Status& status,
                        std::string_view payload) {
  size_t h = BeginFrame(out);
  AppendU64(out, id);
  AppendReply(out, status, payload);
  EndFrame(out, h, FrameType::kCallResponse);
}

Result<CallResponse> DecodeCallResponse(std::string_view frame_payload) {
  if (frame_payload.size() < kCallResponseOverhead) return DataLoss("call response too short");
  CallResponse r;
  r.id = GetU64(Bytes(frame_payload));
  auto reply = DecodeReply(frame_payload.substr(8));
  if (!reply.ok()) return reply.status();
  r.reply = std::move(reply).value();
  return r;
}

void AppendClusterInfo(std::string& out, const Status& status, std::string_view payload) {
  size_t h = BeginFrame(out);
  AppendReply(out, status, payload);
  EndFrame(out, h, FrameType::kClusterInfo);
}

Result<Reply> DecodeReply(std::string_view body) {
  if (body.size() < kReplyOverhead) return DataLoss("reply too short");
  const uint32_t code = GetU32(Bytes(body));
  const uint32_t message_size = GetU32(Bytes(body) + 4);
  if (message_size > body.size() - kReplyOverhead) return DataLoss("reply message overruns");
  std::string message(body.substr(kReplyOverhead, message_size));
  Reply r;
  if (code == 0) {
    r.status = Status::Ok();
  } else {
    const Code c = code <= static_cast<uint32_t>(Code::kUnauthenticated) ? static_cast<Code>(code)
                                                                         : Code::kUnknown;
    r.status = Status(c, std::move(message));
  }
  r.payload = body.substr(kReplyOverhead + message_size);
  return r;
}

}  // namespace etcdw::peer_transport
