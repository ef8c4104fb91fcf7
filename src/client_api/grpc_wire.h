// The gRPC protocol on top of HTTP/2 (grpc/grpc doc/PROTOCOL-HTTP2.md), the parts a server
// needs: length-prefixed messages, the grpc-message encoding, and the texts etcd's Go server
// (grpc-go) answers malformed requests with.
#pragma once

#include <google/protobuf/message_lite.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace etcdw::client_api {

// The 5-byte prefix: a compressed flag and the message length, big-endian.
constexpr size_t kMessagePrefixBytes = 5;

// `m` serialized after its prefix (uncompressed).
std::string FrameMessage(const google::protobuf::MessageLite& m);
// An already serialized message after its prefix.
std::string FrameBytes(std::string_view serialized);

// Reads a message prefix (at least kMessagePrefixBytes of `prefix`) into *length. Errors as
// grpc-go's: over `max_bytes` RESOURCE_EXHAUSTED "grpc: received message larger than max
// (N vs. M)"; flagged compressed INTERNAL.
Status CheckPrefix(std::string_view prefix, size_t max_bytes, size_t* length);

// The one message of a unary request body, unprefixed. Errors as grpc-go's: a message over
// `max_bytes` is RESOURCE_EXHAUSTED "grpc: received message larger than max (N vs. M)"; a
// message flagged compressed INTERNAL (requests naming a grpc-encoding are refused before, see
// UnsupportedEncoding); a body that is not exactly one message INTERNAL.
Result<std::string_view> SingleMessage(std::string_view body, size_t max_bytes);

// The answer to a request whose grpc-encoding is not "identity": no decompressor is offered
// (etcd's server registers none either), UNIMPLEMENTED.
Status UnsupportedEncoding(std::string_view encoding);

// Parses `payload` into `m`; INTERNAL "grpc: error unmarshalling request: ..." when it is not
// a valid encoding.
Status ParseRequest(std::string_view payload, google::protobuf::MessageLite* m);

// Parses a stream's request message into `m`; INTERNAL "grpc: failed to unmarshal the received
// message" when it is not a valid encoding (grpc-go's words for streams).
Status ParseStreamMessage(std::string_view payload, google::protobuf::MessageLite* m);

// grpc-message's encoding: bytes outside printable ASCII, and '%', become %XX.
std::string PercentEncode(std::string_view text);

// The value of a grpc-timeout header: 1 to 8 digits and a unit (H, M, S, m, u, n), as gRPC's
// HTTP/2 protocol defines it. nullopt when malformed.
std::optional<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view value);

// How a unary call ends when its deadline (grpc-timeout) passes before its answer: grpc-go's
// DEADLINE_EXCEEDED with the text of Go's context.DeadlineExceeded, as etcd's handlers return it.
Status DeadlineExceeded();

}  // namespace etcdw::client_api
