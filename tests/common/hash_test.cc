#include "etcdw/common/hash.h"

#include <gtest/gtest.h>

#include <random>

namespace etcdw::common {
namespace {

// Bit-at-a-time CRC-32C, the definition the table-driven version must agree with.
uint32_t ReferenceCrc32c(std::string_view data) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

std::string Digest(std::string_view data) {
  Sha256 sha;
  sha.Update(data);
  auto d = sha.Final();
  return ToHex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c(0, ""), 0u);
  EXPECT_EQ(Crc32c(0, "123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(0, "a"), 0xC1D04330u);
  // RFC 3720 (iSCSI) appendix B.4.
  EXPECT_EQ(Crc32c(0, std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(0, std::string(32, '\xff')), 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up.push_back(static_cast<char>(i));
    down.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32c(0, up), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(0, down), 0x113FDB5Cu);
}

TEST(Crc32cTest, ExtendingEqualsHashingTheConcatenation) {
  const std::string a = "hello, ", b = "world";
  EXPECT_EQ(Crc32c(Crc32c(0, a), b), Crc32c(0, a + b));
  EXPECT_EQ(Crc32c(Crc32c(0, "1234"), "56789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(Crc32c(0, ""), "123456789"), 0xE3069283u);
}

TEST(Crc32cTest, AgreesWithBitwiseDefinitionAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::string buf(300, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  for (size_t off = 0; off < 8; ++off) {
    for (size_t len = 0; len + off <= 80; ++len) {
      std::string_view s(buf.data() + off, len);
      ASSERT_EQ(Crc32c(0, s), ReferenceCrc32c(s)) << "off " << off << " len " << len;
      ASSERT_EQ(Crc32cPortable(0, s), ReferenceCrc32c(s)) << "off " << off << " len " << len;
    }
  }
  EXPECT_EQ(Crc32c(0, buf), ReferenceCrc32c(buf));
  EXPECT_EQ(Crc32cPortable(0, buf), ReferenceCrc32c(buf));
  EXPECT_EQ(Crc32c(Crc32c(0, "1234"), "56789"), Crc32cPortable(Crc32cPortable(0, "1234"), "56789"));
  // Split anywhere.
  for (size_t cut = 0; cut <= buf.size(); cut += 13) {
    std::string_view s(buf);
    EXPECT_EQ(Crc32c(Crc32c(0, s.substr(0, cut)), s.substr(cut)), ReferenceCrc32c(buf));
  }
}

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, IncrementalEqualsOneShot) {
  Sha256 sha;
  sha.Update("a");
  sha.Update("");
  sha.Update("bc");
  auto d = sha.Final();
  EXPECT_EQ(ToHex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size())),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string million(1000000, 'a');
  EXPECT_EQ(Digest(million), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(ToHexTest, LowercaseTwoDigitsPerByte) {
  EXPECT_EQ(ToHex(""), "");
  EXPECT_EQ(ToHex(std::string("\x00\x0f\xa0\xff", 4)), "000fa0ff");
}

}  // namespace
}  // namespace etcdw::common
