#include "grpc_wire.h"

#include <cstring>

namespace etcdw::client_api {

namespace {

// A string of kMessagePrefixBytes + n bytes starting with the prefix for an n-byte message.
std::string Prefixed(size_t n) {
  std::string out(kMessagePrefixBytes + n, '\0');
  out[1] = static_cast<char>((n >> 24) & 0xff);
  out[2] = static_cast<char>((n >> 16) & 0xff);
  out[3] = static_cast<char>((n >> 8) & 0xff);
  out[4] = static_cast<char>(n & 0xff);
  return out;
}

}  // namespace

std::string FrameMessage(const google::protobuf::MessageLite& m) {
  std::string out = Prefixed(m.ByteSizeLong());
  m.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + kMessagePrefixBytes));
  return out;
}

std::string FrameBytes(std::string_view serialized) {
  std::string out = Prefixed(serialized.size());
  if (!serialized.empty()) {
    std::memcpy(out.data() + kMessagePrefixBytes, serialized.data(), serialized.size());
  }
  return out;
}

Status CheckPrefix(std::string_view prefix, size_t max_bytes, size_t* length) {
  const auto* p = reinterpret_cast<const uint8_t*>(prefix.data());
  const size_t n = (size_t{p[1]} << 24) | (size_t{p[2]} << 16) | (size_t{p[3]} << 8) | size_t{p[4]};
  if (p[0] != 0) {
    // Requests with a grpc-encoding are refused before their body (UnsupportedEncoding).
    return Status(Code::kInternal, "grpc: compressed flag set with identity or empty encoding");
  }
  if (n > max_bytes) {
    return Status(Code::kResourceExhausted, "grpc: received message larger than max (" +
                                                std::to_string(n) + " vs. " +
                                                std::to_string(max_bytes) + ")");
  }
  *length = n;
  return Status::Ok();
}

Result<std::string_view> SingleMessage(std::string_view body, size_t max_bytes) {
  if (body.size() < kMessagePrefixBytes) {
    return Status(Code::kInternal, "grpc: the request ended inside a message prefix");
  }
  size_t n = 0;
  ETCDW_RETURN_IF_ERROR(CheckPrefix(body, max_bytes, &n));
  if (body.size() - kMessagePrefixBytes != n) {
    return Status(Code::kInternal, body.size() - kMessagePrefixBytes < n
                                       ? "grpc: the request ended inside a message"
                                       : "grpc: a unary request carried more than one message");
  }
  return body.substr(kMessagePrefixBytes);
}

Status UnsupportedEncoding(std::string_view encoding) {
  return Status(Code::kUnimplemented, "grpc: Decompressor is not installed for grpc-encoding \"" +
                                          std::string(encoding) + "\"");
}

Status ParseRequest(std::string_view payload, google::protobuf::MessageLite* m) {
  if (m->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) return Status::Ok();
  return Status(Code::kInternal,
                "grpc: error unmarshalling request: proto: cannot parse invalid wire-format data");
}

Status ParseStreamMessage(std::string_view payload, google::protobuf::MessageLite* m) {
  if (m->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) return Status::Ok();
  return Status(Code::kInternal, "grpc: failed to unmarshal the received message");
}

std::string PercentEncode(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

std::optional<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view value) {
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  int64_t n = 0;
  for (char c : value.substr(0, value.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  using std::chrono::nanoseconds;
  switch (value.back()) {
    case 'H':
      return std::chrono::duration_cast<nanoseconds>(std::chrono::hours(n));
    case 'M':
      return std::chrono::duration_cast<nanoseconds>(std::chrono::minutes(n));
    case 'S':
      return std::chrono::duration_cast<nanoseconds>(std::chrono::seconds(n));
    case 'm':
      return std::chrono::duration_cast<nanoseconds>(std::chrono::milliseconds(n));
    case 'u':
      return std::chrono::duration_cast<nanoseconds>(std::chrono::microseconds(n));
    case 'n':
      return nanoseconds(n);
    default:
      return std::nullopt;
  }
}

Status DeadlineExceeded() { return Status(Code::kDeadlineExceeded, "context deadline exceeded"); }

}  // namespace etcdw::client_api
