// Feeds the sidecar's LZW decoder (".Z" snapshots, Go's compress/lzw) arbitrary bytes, cut into
// two writes at a point the input chooses, and round-trips the input through the encoder and the
// decoder: decode(encode(x)) must be x.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"
#include "sidecar/lzw.h"

namespace {

using etcdw::Status;
using etcdw::sidecar::ByteSink;
using etcdw::sidecar::LzwDecoder;
using etcdw::sidecar::LzwEncoder;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "lzw_fuzzer: %s\n", what);
  std::abort();
}

// Decodes `in` written in two pieces cut at `cut`; the status of the first failing call.
Status Decode(std::string_view in, size_t cut, std::string* out) {
  const ByteSink sink = [out](std::string_view bytes) {
    out->append(bytes);
    return Status();
  };
  LzwDecoder decoder;
  Status s = decoder.Write(in.substr(0, cut), sink);
  if (s.ok()) s = decoder.Write(in.substr(cut), sink);
  if (s.ok()) s = decoder.Finish(sink);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = in.empty() ? 0 : data[0] % (in.size() + 1);

  std::string decoded;
  (void)Decode(in, cut, &decoded);

  // The round trip, the input written to the encoder in two pieces as well.
  std::string encoded;
  const ByteSink sink = [&encoded](std::string_view bytes) {
    encoded.append(bytes);
    return Status();
  };
  LzwEncoder encoder;
  if (!encoder.Write(in.substr(0, cut), sink).ok() || !encoder.Write(in.substr(cut), sink).ok() ||
      !encoder.Finish(sink).ok()) {
    Fail("the encoder failed");
  }
  std::string round;
  const Status s = Decode(encoded, encoded.size() / 2, &round);
  if (!s.ok()) Fail("the decoder refused the encoder's output");
  if (round != in) Fail("decode(encode(x)) != x");
  return 0;
}
