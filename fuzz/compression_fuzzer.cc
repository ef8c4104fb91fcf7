// Feeds the sidecar's snapshot decompression (DecompressFile: gzip, zlib and lzw, as restoring a
// compressed snapshot reads it) arbitrary files, and round-trips the input through CompressFile.
// The API is file to file and reads its source in 64 KiB pieces, so an input of at most 4 KiB
// arrives in one read; splitting reads is the lzw harness's business. Beyond not crashing:
// - decompression succeeds or says why (DataLoss for damaged data), and leaves no output file
//   when it fails; what it accepts compresses and decompresses back to itself;
// - decompress(compress(x)) == x for each compression, two gzip members back to back
//   decompress to both, and every proper prefix of a compressed file is refused (never a
//   silently shortened snapshot), as is a zlib stream with bytes after it.
// Input: byte 0 picks the compression of the arbitrary file (its low two bits) and byte 1 where
// compressed files are cut; the rest is both the arbitrary file and the x of the round trips.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"
#include "etcdw/sidecar/compression.h"
#include "scratch_dir.h"

namespace {

namespace fs = std::filesystem;
using etcdw::Code;
using etcdw::Status;
using etcdw::sidecar::CompressFile;
using etcdw::sidecar::Compression;
using etcdw::sidecar::DecompressFile;

[[noreturn]] void Fail(const char* what, Compression c) {
  std::fprintf(stderr, "compression_fuzzer: %s (compression %d)\n", what, static_cast<int>(c));
  std::abort();
}

// A file of the process's scratch directory.
std::string Path(const char* name) {
  return etcdw::fuzz::ScratchDir("compression_fuzzer") + "/" + name;
}

void Write(const std::string& path, std::string_view data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) std::abort();
}

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Decompresses `data` as `c`: the status, and the output when it succeeds. A failure must name
// a reason and leave no output file.
Status Decompress(std::string_view data, Compression c, std::string* out) {
  const std::string src = Path("in"), dst = Path("out");
  Write(src, data);
  Write(dst, "stale");
  const Status s = DecompressFile(src, dst, c);
  if (!s.ok()) {
    if (s.message().empty()) Fail("an error without a message", c);
    if (fs::exists(dst)) Fail("a failed decompression left its output", c);
    return s;
  }
  *out = Read(dst);
  return s;
}

std::string Compress(std::string_view data, Compression c) {
  const std::string src = Path("plain"), dst = Path("packed");
  Write(src, data);
  if (!CompressFile(src, dst, c).ok()) Fail("compression failed", c);
  return Read(dst);
}

// decompress(compress(x)) == x, and prefixes of compress(x) cut where `cut` says are refused.
void RoundTrip(std::string_view x, Compression c, uint8_t cut) {
  const std::string packed = Compress(x, c);
  std::string back;
  if (!Decompress(packed, c, &back).ok()) Fail("a compressed file does not decompress", c);
  if (back != x) Fail("decompress(compress(x)) != x", c);
  if (c == Compression::kNone || packed.empty()) return;
  for (size_t n : {size_t{0}, packed.size() - 1, cut % packed.size()}) {
    std::string part;
    const Status s = Decompress(std::string_view(packed).substr(0, n), c, &part);
    if (s.ok()) Fail("a compressed file cut short decompressed", c);
    if (s.code() != Code::kDataLoss) Fail("a compressed file cut short is not DataLoss", c);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto c = static_cast<Compression>(data[0] & 3);
  const uint8_t cut = data[1];
  const std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);

  // The input as a compressed file.
  std::string out;
  if (Decompress(in, c, &out).ok()) {
    if (c == Compression::kNone && out != in) Fail("an uncompressed copy differs", c);
    std::string again;
    if (!Decompress(Compress(out, c), c, &again).ok() || again != out) {
      Fail("what decompressed does not round-trip", c);
    }
  }

  for (Compression k :
       {Compression::kNone, Compression::kGzip, Compression::kZlib, Compression::kLzw}) {
    RoundTrip(in, k, cut);
  }
  // gzip members back to back are one file (as Go's reader and the gzip tool take them); a zlib
  // stream is alone in its file.
  const std::string gz = Compress(in, Compression::kGzip);
  std::string both;
  const std::string twice = std::string(in) + std::string(in);
  if (!Decompress(gz + gz, Compression::kGzip, &both).ok() || both != twice) {
    Fail("two gzip members do not decompress to both", Compression::kGzip);
  }
  const std::string zl = Compress(in, Compression::kZlib);
  std::string after;
  if (Decompress(zl + "x", Compression::kZlib, &after).ok()) {
    Fail("bytes after a zlib stream were accepted", Compression::kZlib);
  }
  return 0;
}
