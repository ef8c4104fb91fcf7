// The peer transport's wire format (see peer_transport.h for the protocol as a whole).
//
// Every connection starts with a handshake that the dialer writes:
//   u32 magic "EWPT" | u16 version | u8 stream kind | u8 reserved (0) |
//   u64 cluster ID | u64 sender ID | u64 receiver ID | u32 CRC-32C of the preceding 32 bytes
// and that the receiver answers with
//   u32 magic "EWPA" | u32 handshake result (0: accepted)
// before anything else is sent. Then frames, in both directions as the stream kind allows:
//   u32 payload length | u32 CRC-32C of the payload | u8 frame type | payload
// All integers are big-endian.
//
// Frame payloads other than raw bytes:
//   kCallRequest   u64 call ID | u32 method | request bytes
//   kCallResponse  u64 call ID | reply
//   kClusterInfo   reply
// where a reply is
//   u32 status code (etcdw::Code, numerically gRPC's) | u32 message length | message (UTF-8) |
//   answer bytes
// The caller picks call IDs (unique among its calls in flight on one connection); the receiver
// answers each request exactly once, in any order, echoing its ID.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"
#include "etcdw/raft.pb.h"

namespace etcdw::peer_transport {

inline constexpr uint32_t kHandshakeMagic = 0x45575054;  // "EWPT"
inline constexpr uint32_t kAckMagic = 0x45575041;        // "EWPA"
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kHandshakeSize = 36;
inline constexpr size_t kAckSize = 8;
inline constexpr size_t kFrameHeaderSize = 9;
// Snapshot data travels in chunk frames of at most this size (and at most max_message_bytes).
inline constexpr size_t kSnapshotChunkBytes = size_t{256} << 10;
// The payload of a snapshot end frame: u64 total bytes | u32 CRC-32C of all the bytes.
inline constexpr size_t kSnapshotEndSize = 12;
// The fixed parts of call and reply payloads.
inline constexpr size_t kCallRequestOverhead = 12;  // u64 call ID | u32 method
inline constexpr size_t kReplyOverhead = 8;         // u32 status code | u32 message length
inline constexpr size_t kCallResponseOverhead = 8 + kReplyOverhead;

enum class StreamKind : uint8_t {
  kMessages = 1,     // dialer -> receiver: kMessage frames only; the receiver sends nothing
  kSnapshot = 2,     // dialer -> receiver: kSnapshotHeader, kSnapshotChunk*, kSnapshotEnd;
                     // receiver -> dialer: one kSnapshotResult
  kCall = 3,         // dialer -> receiver: kCallRequest frames; receiver -> dialer: one
                     // kCallResponse per request, in any order. Many calls in flight at once.
  kClusterInfo = 4,  // dialer -> receiver: nothing; receiver -> dialer: one kClusterInfo frame,
                     // then it closes. Accepted with cluster ID 0 and receiver ID 0 (a member
                     // joining with a fresh data directory knows neither).
};

enum class FrameType : uint8_t {
  kMessage = 1,         // a serialized raftpb::Message
  kSnapshotHeader = 2,  // the serialized MsgSnap
  kSnapshotChunk = 3,   // snapshot bytes
  kSnapshotEnd = 4,     // u64 total bytes | u32 CRC-32C of all snapshot bytes
  kSnapshotResult = 5,  // u8 1 (durable and delivered) or 0 | UTF-8 reason
  kCallRequest = 6,     // u64 call ID | u32 method | request bytes
  kCallResponse = 7,    // u64 call ID | u32 code | u32 message length | message | answer bytes
  kClusterInfo = 8,     // u32 code | u32 message length | message | serialized cluster info
};

enum class HandshakeResult : uint32_t {
  kAccepted = 0,
  kBadVersion = 1,
  kClusterMismatch = 2,
  kWrongReceiver = 3,
  kBadStreamKind = 4,
};
const char* HandshakeResultName(HandshakeResult r);

struct Handshake {
  uint16_t version = kProtocolVersion;
  uint8_t kind = 0;  // a StreamKind; checked by the receiver
  uint64_t cluster_id = 0;
  uint64_t sender_id = 0;
  uint64_t receiver_id = 0;
};

std::array<uint8_t, kHandshakeSize> EncodeHandshake(const Handshake& h);
// Checks the magic and the checksum (not the IDs, version or kind).
Result<Handshake> DecodeHandshake(const std::array<uint8_t, kHandshakeSize>& b);

std::array<uint8_t, kAckSize> EncodeAck(HandshakeResult r);
// The result carried by an acknowledgement; an error when the magic is wrong.
Result<HandshakeResult> DecodeAck(const std::array<uint8_t, kAckSize>& b);

struct FrameHeader {
  uint32_t length = 0;
  uint32_t crc = 0;
  uint8_t type = 0;
};
FrameHeader DecodeFrameHeader(const std::array<uint8_t, kFrameHeaderSize>& b);

// Appends a whole frame to `out`.
void AppendFrame(std::string& out, FrameType type, std::string_view payload);
// Appends a kMessage frame holding `m`, serialized in place (`size` is m.ByteSizeLong()).
void AppendMessageFrame(std::string& out, const raftpb::Message& m, size_t size);
// Frames built in place: BeginFrame reserves the header at the end of `out` and returns its
// offset; the payload is then appended to `out`, and EndFrame fills in the header.
size_t BeginFrame(std::string& out);
void EndFrame(std::string& out, size_t header_offset, FrameType type);

// A call request's payload, viewing the frame payload it was decoded from.
struct CallRequest {
  uint64_t id = 0;
  uint32_t method = 0;
  std::string_view payload;
};
// A reply (a call's answer or the cluster information): a status and, usually only when it is
// OK, the answer's bytes (viewing the frame payload it was decoded from).
struct Reply {
  Status status;
  std::string_view payload;
};
struct CallResponse {
  uint64_t id = 0;
  Reply reply;
};

void AppendCallRequest(std::string& out, uint64_t id, uint32_t method, std::string_view payload);
// An error when the payload is shorter than its fixed part.
Result<CallRequest> DecodeCallRequest(std::string_view frame_payload);
void AppendCallResponse(std::string& out, uint64_t id, const Status& status,
                        std::string_view payload);
Result<CallResponse> DecodeCallResponse(std::string_view frame_payload);
void AppendClusterInfo(std::string& out, const Status& status, std::string_view payload);
// Decodes a reply body (a kClusterInfo payload, or a kCallResponse payload after its call ID).
// Codes unknown to this build become Code::kUnknown; the message is kept verbatim.
Result<Reply> DecodeReply(std::string_view body);

void PutU32(uint8_t* p, uint32_t v);
void PutU64(uint8_t* p, uint64_t v);
uint32_t GetU32(const uint8_t* p);
uint64_t GetU64(const uint8_t* p);

}  // namespace etcdw::peer_transport
