// Feeds the client port's HTTP/2 session (H2Connection: nghttp2 framing, HPACK, flow control, and
// our gRPC layer on top: request headers, message prefixes, grpc-timeout, pings, stream
// bookkeeping) arbitrary bytes after the client preface, cut into reads of fuzzer-chosen sizes,
// with a handler that answers as the server does: unary requests with their message echoed or
// with the error SingleMessage gives, stream messages echoed, a half-close finished. Beyond not
// crashing it checks the session's promises to its caller: each stream opened is reported gone
// at most once, and only streams that were opened; a `written` callback is called exactly once;
// Drain makes progress until the session has nothing more to send.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "client_api/grpc_wire.h"
#include "client_api/h2_connection.h"

namespace {

using etcdw::client_api::FrameBytes;
using etcdw::client_api::H2Connection;
using etcdw::client_api::SingleMessage;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "h2_connection_fuzzer: %s\n", what);
  std::abort();
}

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kBodyLimit = 4096;

struct Observed {
  std::set<int32_t> opened;
  std::set<int32_t> gone;
  std::map<uint64_t, int> written_calls;  // callback number -> times called
  uint64_t next_written = 0;
};

// Everything the session has to send, in slices; false when Drain failed.
bool DrainAll(H2Connection& c) {
  for (int i = 0; i < 64; ++i) {
    std::string out;
    if (!c.Drain(out, 16 << 10).ok()) return false;
    if (out.empty()) return true;
  }
  return true;  // a client that never reads our window updates may leave more queued
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte chooses the read size (1 to 256 bytes), so frames are split everywhere.
  const size_t read_size = 1 + static_cast<size_t>(data[0]);
  std::string in(kPreface);
  in.append(reinterpret_cast<const char*>(data) + 1, size - 1);

  Observed seen;
  H2Connection* conn = nullptr;
  H2Connection::Handler h;
  h.is_stream = [](const std::string& path) {
    return path.find("Watch") != std::string::npos || path.find("KeepAlive") != std::string::npos;
  };
  h.on_request = [&](H2Connection::Request& r) {
    auto msg = SingleMessage(r.body, kBodyLimit);
    if (msg.ok()) {
      conn->Respond(r.stream, etcdw::Status::Ok(), FrameBytes(*msg));
    } else {
      conn->Respond(r.stream, msg.status(), "");
    }
  };
  h.on_stream_open = [&](H2Connection::Request& r) {
    if (!seen.opened.insert(r.stream).second) Fail("a stream was opened twice");
  };
  h.on_message = [&](int32_t stream, std::string_view payload) {
    if (seen.opened.count(stream) == 0) Fail("a message for a stream never opened");
    const uint64_t n = seen.next_written++;
    seen.written_calls[n] = 0;
    conn->Send(stream, FrameBytes(payload), [&seen, n](bool) { ++seen.written_calls[n]; });
  };
  h.on_half_close = [&](int32_t stream) {
    if (seen.opened.count(stream) == 0) Fail("a half-close for a stream never opened");
    conn->Finish(stream, etcdw::Status::Ok());
  };
  h.on_stream_gone = [&](int32_t stream) {
    if (seen.opened.count(stream) == 0) Fail("a stream never opened is gone");
    if (!seen.gone.insert(stream).second) Fail("a stream was reported gone twice");
  };

  {
    H2Connection c(kBodyLimit, h);
    conn = &c;
    for (size_t at = 0; at < in.size(); at += read_size) {
      const size_t n = std::min(read_size, in.size() - at);
      const bool ok = c.Feed(in.data() + at, n).ok();
      const bool drained = DrainAll(c);
      if (!ok || !drained) break;  // the caller closes the connection
    }
    (void)c.Finished();
    (void)c.open_streams();
    c.GoAway();
    (void)DrainAll(c);
  }
  // Every Send's callback ran once: while the connection lived, or when it was destroyed.
  for (const auto& [n, calls] : seen.written_calls) {
    if (calls != 1)
      Fail(calls == 0 ? "a written callback never ran" : "a written callback ran twice");
  }
  return 0;
}
