// A small HTTP/1.x request parser for the client port's HTTP endpoints and the gRPC gateway:
// the request line, headers, and a body framed by Content-Length or chunked transfer coding,
// each bounded. It parses from the start of a buffer that grows as bytes arrive, so a request
// split over any number of reads, or followed by the next one (pipelining), parses the same.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace etcdw::client_api {

struct Http1Request {
  std::string method;
  std::string path;   // the target before '?'
  std::string query;  // after '?', without it
  int minor_version = 1;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;                                          // de-chunked

  // The first header named `name` (lower-case); nullptr without one.
  const std::string* Header(std::string_view name) const;
  // Whether the client lets the connection stay open after the answer (HTTP/1.1 without
  // "Connection: close", HTTP/1.0 with "Connection: keep-alive").
  bool KeepAlive() const;
  // Whether the client waits for "100 Continue" before it sends the body.
  bool ExpectsContinue() const;
};

struct Http1Parse {
  enum Result {
    kIncomplete,    // more bytes needed (`head_complete` says whether the head is in)
    kComplete,      // *out holds the request, which took `consumed` bytes
    kBadRequest,    // malformed: 400
    kHeadTooLarge,  // the head exceeds the limit: 431
    kBodyTooLarge,  // the body exceeds the limit: 413
    kUnsupportedTransferEncoding,  // a transfer coding other than chunked alone: 501
  };
  Result result = kIncomplete;
  size_t consumed = 0;
  bool head_complete = false;
};

// Parses the request `in` starts with. `max_head` bounds the request line and headers,
// `max_body` the body (decoded).
Http1Parse ParseHttp1Request(std::string_view in, size_t max_head, size_t max_body,
                             Http1Request* out);

}  // namespace etcdw::client_api
