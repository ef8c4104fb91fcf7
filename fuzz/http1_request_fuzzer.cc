// Feeds the client port's HTTP/1.x request parser arbitrary bytes. Beyond not crashing, it checks
// the parser's promise that a request split over reads parses the same: a complete request's
// every proper prefix is incomplete (or, with the head in, still incomplete), and the request
// alone, without what follows it, parses to the same request and length.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "client_api/http1_request.h"

namespace {

using etcdw::client_api::Http1Parse;
using etcdw::client_api::Http1Request;
using etcdw::client_api::ParseHttp1Request;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "http1_request_fuzzer: %s\n", what);
  std::abort();
}

bool Same(const Http1Request& a, const Http1Request& b) {
  return a.method == b.method && a.path == b.path && a.query == b.query &&
         a.minor_version == b.minor_version && a.headers == b.headers && a.body == b.body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // The first two bytes choose the limits, so that the fuzzer reaches both sides of each.
  const size_t max_head = 16 + static_cast<size_t>(data[0]) * 8;
  const size_t max_body = static_cast<size_t>(data[1]) * 16;
  const std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);

  Http1Request req;
  const Http1Parse p = ParseHttp1Request(in, max_head, max_body, &req);
  (void)req.KeepAlive();
  (void)req.ExpectsContinue();
  (void)req.Header("content-length");
  if (p.result != Http1Parse::kComplete) return 0;
  if (p.consumed == 0 || p.consumed > in.size()) Fail("consumed out of range");
  if (req.body.size() > max_body) Fail("body over the limit accepted");

  // The request alone parses the same.
  Http1Request alone;
  const Http1Parse q = ParseHttp1Request(in.substr(0, p.consumed), max_head, max_body, &alone);
  if (q.result != Http1Parse::kComplete || q.consumed != p.consumed || !Same(req, alone)) {
    Fail("the request without what follows it parses differently");
  }
  // Every proper prefix is incomplete (a few cut points, to keep executions fast).
  for (size_t cut : {size_t{0}, p.consumed / 2, p.consumed - 1}) {
    Http1Request part;
    const Http1Parse r = ParseHttp1Request(in.substr(0, cut), max_head, max_body, &part);
    if (r.result != Http1Parse::kIncomplete)
      Fail("a prefix of a complete request is not incomplete");
  }
  return 0;
}
