#include "etcdw/sidecar/compression.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "etcdw/common/hash.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

namespace fs = std::filesystem;

const Compression kCompressed[] = {Compression::kGzip, Compression::kZlib, Compression::kLzw};
const Compression kAll[] = {Compression::kNone, Compression::kGzip, Compression::kZlib,
                            Compression::kLzw};

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

std::string Sha256Hex(const std::string& data) {
  common::Sha256 sha;
  sha.Update(data);
  auto d = sha.Final();
  return common::ToHex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

// Pseudo-random bytes with compressible stretches: random blocks, repeated text, zero runs.
std::string MixedData(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s;
  s.reserve(size);
  while (s.size() < size) {
    switch (rng() % 3) {
      case 0:
        for (int i = 0; i < 4096; ++i) s.push_back(static_cast<char>(rng()));
        break;
      case 1:
        for (int i = 0; i < 100; ++i) s += "key/" + std::to_string(rng() % 50) + "=value;";
        break;
      default:
        s.append(rng() % 20000, '\0');
    }
  }
  s.resize(size);
  return s;
}

class CompressionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<testsupport::ScratchDir>("compression");
    dir_ = scratch_->path();
    ASSERT_FALSE(scratch_->path().empty());
  }
  void TearDown() override { scratch_.reset(); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  void Write(const std::string& name, const std::string& data) const {
    ASSERT_TRUE(testsupport::WriteFile(Path(name), data));
  }
  std::string Read(const std::string& name) const { return testsupport::ReadFile(Path(name)); }
  // Compresses `data` with `c` and returns the compressed bytes.
  std::string Compress(const std::string& data, Compression c) {
    Write("plain", data);
    Status s = CompressFile(Path("plain"), Path("packed"), c);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return Read("packed");
  }
  // Decompresses `packed`; on success returns the output in *out.
  Status Decompress(const std::string& packed, Compression c, std::string* out = nullptr) {
    Write("in", packed);
    Status s = DecompressFile(Path("in"), Path("out"), c);
    if (s.ok() && out != nullptr) *out = Read("out");
    return s;
  }
  // Damaged input must be DataLoss naming the file, and leave no output behind.
  void ExpectDataLoss(const std::string& packed, Compression c, const std::string& what) {
    Status s = Decompress(packed, c);
    EXPECT_EQ(s.code(), Code::kDataLoss) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find(Path("in")), std::string::npos) << what << ": " << s.message();
    EXPECT_FALSE(fs::exists(Path("out"))) << what;
  }

  std::unique_ptr<testsupport::ScratchDir> scratch_;  // removed by TearDown
  fs::path dir_;
};

TEST(CompressionPolicyTest, ParsesGardenerPolicies) {
  EXPECT_EQ(*ParseCompressionPolicy("gzip"), Compression::kGzip);
  EXPECT_EQ(*ParseCompressionPolicy("zlib"), Compression::kZlib);
  EXPECT_EQ(*ParseCompressionPolicy("lzw"), Compression::kLzw);
  for (const char* bad : {"", "GZIP", "lz4", "zstd", "gzip "}) {
    Result<Compression> r = ParseCompressionPolicy(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("gzip, zlib, lzw"), std::string::npos);
  }
}

TEST(CompressionPolicyTest, SuffixesAndTheirInverse) {
  EXPECT_EQ(CompressionSuffix(Compression::kNone), "");
  EXPECT_EQ(CompressionSuffix(Compression::kGzip), ".gz");
  EXPECT_EQ(CompressionSuffix(Compression::kZlib), ".zlib");
  EXPECT_EQ(CompressionSuffix(Compression::kLzw), ".Z");
  for (Compression c : kAll) EXPECT_EQ(*CompressionFromSuffix(CompressionSuffix(c)), c);
  for (const char* bad : {".z", ".GZ", "gz", ".bz2", ".final"}) {
    EXPECT_EQ(CompressionFromSuffix(bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST_F(CompressionTest, RoundTripsEveryKind) {
  const std::string inputs[] = {"", "x", "hello, etcd", std::string(70000, 'a'),
                                MixedData(3 * 1024 * 1024 + 12345, 1)};
  for (Compression c : kAll) {
    for (const std::string& in : inputs) {
      std::string packed = Compress(in, c);
      if (c == Compression::kNone) {
        EXPECT_EQ(packed, in);
      } else {
        EXPECT_NE(packed, in);
      }
      std::string out;
      Status s = Decompress(packed, c, &out);
      ASSERT_TRUE(s.ok()) << CompressionSuffix(c) << " " << in.size() << ": " << s.ToString();
      EXPECT_TRUE(out == in) << CompressionSuffix(c) << " size " << in.size() << " came back as "
                             << out.size() << " bytes";
      if (in.size() > 1000000 && c != Compression::kNone) {
        EXPECT_LT(packed.size(), in.size());
      }
    }
  }
}

TEST_F(CompressionTest, FormatsCarryTheirHeaders) {
  std::string gz = Compress("abc", Compression::kGzip);
  EXPECT_EQ(gz.substr(0, 3), Bytes({0x1f, 0x8b, 0x08}));  // gzip magic, deflate
  std::string zl = Compress("abc", Compression::kZlib);
  EXPECT_EQ(zl.substr(0, 2), Bytes({0x78, 0x9c}));  // 32 KiB window, default level
}

TEST_F(CompressionTest, GzipInteropWithCommandLine) {
  const std::string data = MixedData(2 * 1024 * 1024, 2);
  // Ours -> gzip -d.
  Write("plain", data);
  ASSERT_TRUE(CompressFile(Path("plain"), Path("ours.gz"), Compression::kGzip).ok());
  ASSERT_EQ(std::system(("gzip -dc '" + Path("ours.gz") + "' > '" + Path("theirs") + "'").c_str()),
            0);
  EXPECT_TRUE(Read("theirs") == data);
  // gzip -> ours.
  ASSERT_EQ(std::system(("gzip -9 -c '" + Path("plain") + "' > '" + Path("cli.gz") + "'").c_str()),
            0);
  ASSERT_TRUE(DecompressFile(Path("cli.gz"), Path("back"), Compression::kGzip).ok());
  EXPECT_TRUE(Read("back") == data);
  // Concatenated members, as `gzip -c a >> x` makes and Go's reader accepts.
  ASSERT_EQ(
      std::system(("printf 'second member\\n' | gzip -c >> '" + Path("cli.gz") + "'").c_str()), 0);
  ASSERT_TRUE(DecompressFile(Path("cli.gz"), Path("back"), Compression::kGzip).ok());
  EXPECT_TRUE(Read("back") == data + "second member\n");
}

TEST_F(CompressionTest, DecodesFixedZlibVector) {
  // python3: zlib.compress(b"etcd-backup-restore zlib vector\n" * 3)
  const std::string packed =
      Bytes({0x78, 0x9c, 0x4b, 0x2d, 0x49, 0x4e, 0xd1, 0x4d, 0x4a, 0x4c, 0xce, 0x2e, 0x2d, 0xd0,
             0x2d, 0x4a, 0x2d, 0x2e, 0xc9, 0x2f, 0x4a, 0x55, 0xa8, 0xca, 0xc9, 0x4c, 0x52, 0x28,
             0x4b, 0x4d, 0x06, 0x72, 0xb8, 0x52, 0x29, 0x94, 0x07, 0x00, 0xde, 0x7e, 0x24, 0x07});
  std::string out;
  ASSERT_TRUE(Decompress(packed, Compression::kZlib, &out).ok());
  std::string want;
  for (int i = 0; i < 3; ++i) want += "etcd-backup-restore zlib vector\n";
  EXPECT_EQ(out, want);
}

// Produced by Go 1.19: lzw.NewWriter(w, lzw.LSB, 8), which opens with a clear code.
const std::string kGoTobe = "TOBEORNOTTOBEORTOBEORNOT";
const std::string kGoTobeLzw =
    Bytes({0x00, 0xa9, 0x3c, 0x11, 0x52, 0xe4, 0x89, 0x14, 0x27, 0x4f, 0xa8,
           0x08, 0x24, 0x68, 0x70, 0x61, 0xc1, 0x83, 0x09, 0x03, 0x02});

TEST_F(CompressionTest, LzwMatchesGoWriterExactly) {
  EXPECT_EQ(Compress(kGoTobe, Compression::kLzw), kGoTobeLzw);
  EXPECT_EQ(Compress("", Compression::kLzw), Bytes({0x00, 0x03, 0x02}));  // clear, end
  std::string out;
  ASSERT_TRUE(Decompress(kGoTobeLzw, Compression::kLzw, &out).ok());
  EXPECT_EQ(out, kGoTobe);

  // 300000 bytes of 64 symbols: many width changes and table resets. Go 1.19's output for the
  // same input is 312987 bytes with this SHA-256.
  std::string lcg;
  uint32_t x = 1;
  for (int i = 0; i < 300000; ++i) {
    x = x * 1103515245u + 12345u;
    lcg.push_back(static_cast<char>(0x20 + ((x >> 16) & 0x3f)));
  }
  std::string packed = Compress(lcg, Compression::kLzw);
  EXPECT_EQ(packed.size(), 312987u);
  EXPECT_EQ(Sha256Hex(packed), "8b97e1d3b940c3ed425fb32a357644c3dc89d226b0e3c00095ae2e37a9a8f3c7");
}

TEST_F(CompressionTest, LzwReadsGoReaderTestVectors) {
  // From Go's compress/lzw reader tests (streams from encoders that send no leading clear code,
  // and a GIF stream that does).
  std::string out;
  ASSERT_TRUE(Decompress(Bytes({0x01, 0x01}), Compression::kLzw, &out).ok());
  EXPECT_EQ(out, "");
  ASSERT_TRUE(Decompress(Bytes({0x54, 0x9e, 0x08, 0x29, 0xf2, 0x44, 0x8a, 0x93, 0x27, 0x54,
                                0x04, 0x12, 0x34, 0xb8, 0xb0, 0xe0, 0xc1, 0x84, 0x01, 0x01}),
                         Compression::kLzw, &out)
                  .ok());
  EXPECT_EQ(out, kGoTobe);
  ASSERT_TRUE(Decompress(Bytes({0x00, 0x51, 0xfc, 0x1b, 0x28, 0x70, 0xa0, 0xc1, 0x83, 0x01, 0x01}),
                         Compression::kLzw, &out)
                  .ok());
  EXPECT_EQ(out, Bytes({0x28, 0xff, 0xff, 0xff, 0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                        0xff, 0xff, 0xff}));
  // The table fills without a clear code (3839 zero literals), then code 4095 and the end code
  // follow: the frozen table still expands 4095 (two zero bytes).
  std::string frozen(5406, '\0');
  frozen += Bytes({0x80, 0xff, 0x0f, 0x08});
  ASSERT_TRUE(Decompress(frozen, Compression::kLzw, &out).ok());
  EXPECT_EQ(out, std::string(3841, '\0'));
}

TEST_F(CompressionTest, TruncatedInputIsDataLoss) {
  const std::string data = MixedData(300000, 3);
  for (Compression c : kCompressed) {
    std::string packed = Compress(data, c);
    for (size_t keep : {size_t{0}, size_t{1}, size_t{5}, packed.size() / 2, packed.size() - 8,
                        packed.size() - 4, packed.size() - 1}) {
      ExpectDataLoss(packed.substr(0, keep), c,
                     std::string(CompressionSuffix(c)) + " cut to " + std::to_string(keep));
    }
  }
}

TEST_F(CompressionTest, DamagedGzipAndZlibAreDataLoss) {
  const std::string data = MixedData(200000, 4);
  std::string gz = Compress(data, Compression::kGzip);
  auto flip = [](std::string s, size_t pos) {
    s[pos] = static_cast<char>(s[pos] ^ 0x10);
    return s;
  };
  ExpectDataLoss(flip(gz, 0), Compression::kGzip, "gzip magic");
  ExpectDataLoss(flip(gz, gz.size() / 2), Compression::kGzip, "gzip body");
  ExpectDataLoss(flip(gz, gz.size() - 6), Compression::kGzip, "gzip CRC-32");
  ExpectDataLoss(flip(gz, gz.size() - 2), Compression::kGzip, "gzip length");
  ExpectDataLoss(gz + "garbage", Compression::kGzip, "gzip trailing garbage");
  ExpectDataLoss(gz + std::string(4, '\0'), Compression::kGzip, "gzip trailing zeros");

  std::string zl = Compress(data, Compression::kZlib);
  ExpectDataLoss(flip(zl, 0), Compression::kZlib, "zlib header");
  ExpectDataLoss(flip(zl, zl.size() / 2), Compression::kZlib, "zlib body");
  ExpectDataLoss(flip(zl, zl.size() - 1), Compression::kZlib, "zlib Adler-32");
  ExpectDataLoss(zl + "x", Compression::kZlib, "zlib trailing garbage");
  // A gzip stream is not a zlib stream.
  ExpectDataLoss(gz, Compression::kZlib, "gzip read as zlib");
}

TEST_F(CompressionTest, DamagedLzwIsDataLoss) {
  // LZW has no checksum: what is detectable is an invalid code, a missing end code and data after
  // the end code.
  std::string packed = Compress(MixedData(100000, 5), Compression::kLzw);
  ExpectDataLoss(packed + "x", Compression::kLzw, "lzw trailing garbage");
  // Codes (9 bits, LSB first): clear, 'A', then 300 while the next code to assign is 258.
  ExpectDataLoss(Bytes({0x00, 0x83, 0xb0, 0x04}), Compression::kLzw, "lzw invalid code");
  // clear, 'A' and no end code.
  ExpectDataLoss(Bytes({0x00, 0x83, 0x00}), Compression::kLzw, "lzw without end code");
}

TEST_F(CompressionTest, MissingSourceIsNotFound) {
  for (Compression c : kAll) {
    EXPECT_EQ(CompressFile(Path("absent"), Path("out"), c).code(), Code::kNotFound);
    EXPECT_EQ(DecompressFile(Path("absent"), Path("out"), c).code(), Code::kNotFound);
  }
}

}  // namespace
}  // namespace etcdw::sidecar
