// The checks a snapshot's payload passes before upload: gardener's size rule for full snapshots
// and the SHA-256 trailer of both kinds.
#include "etcdw/sidecar/snapshot_verify.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "etcdw/common/hash.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

void WritePayload(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

// `body` followed by its SHA-256.
std::string WithTrailer(const std::string& body) {
  common::Sha256 sha;
  sha.Update(body);
  auto digest = sha.Final();
  return body + std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

class SnapshotVerifyTest : public ::testing::Test {
 protected:
  std::string File(const std::string& name, const std::string& data) {
    const std::string path = dir_.path() + "/" + name;
    WritePayload(path, data);
    return path;
  }
  testsupport::ScratchDir dir_{"verify"};
};

TEST_F(SnapshotVerifyTest, FullSnapshotChecksSizeAndTrailer) {
  ASSERT_FALSE(dir_.path().empty());
  std::string body(4 * 512, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 131 + 7);
  const std::string whole = WithTrailer(body);

  const std::string good = File("good", whole);
  EXPECT_TRUE(VerifyFullSnapshotFile(good).ok()) << VerifyFullSnapshotFile(good).ToString();

  // Truncated: the size rule catches it.
  const std::string truncated = File("truncated", whole.substr(0, body.size() + 16));
  Status st = VerifyFullSnapshotFile(truncated);
  EXPECT_EQ(st.code(), Code::kDataLoss);
  EXPECT_NE(st.message().find(truncated), std::string::npos) << st.message();

  // Right size, one bit flipped in the content, then in the trailer.
  std::string flipped = whole;
  flipped[1000] ^= 0x10;
  st = VerifyFullSnapshotFile(File("flipped", flipped));
  EXPECT_EQ(st.code(), Code::kDataLoss);
  EXPECT_NE(st.message().find("SHA-256 mismatch"), std::string::npos) << st.message();
  std::string flipped_trailer = whole;
  flipped_trailer.back() ^= 0x01;
  EXPECT_EQ(VerifyFullSnapshotFile(File("flipped_trailer", flipped_trailer)).code(),
            Code::kDataLoss);

  // A valid hash but the wrong size (content not a multiple of 512).
  EXPECT_EQ(VerifyFullSnapshotFile(File("odd", WithTrailer(body.substr(0, 1000)))).code(),
            Code::kDataLoss);

  EXPECT_EQ(VerifyFullSnapshotFile(File("empty", "")).code(), Code::kDataLoss);
  EXPECT_EQ(VerifyFullSnapshotFile(dir_.path() + "/missing").code(), Code::kNotFound);
}

TEST_F(SnapshotVerifyTest, DeltaSnapshotChecksTrailerOfAnySize) {
  ASSERT_FALSE(dir_.path().empty());
  // Any length will do for a delta (no 512-byte rule).
  const std::string json = R"([{"etcdEvent":{"kv":{"key":"YQ=="}},"time":"x"}])";
  const std::string good = File("good", WithTrailer(json));
  EXPECT_TRUE(VerifyDeltaSnapshotFile(good).ok()) << VerifyDeltaSnapshotFile(good).ToString();
  // The same file is no full snapshot.
  EXPECT_EQ(VerifyFullSnapshotFile(good).code(), Code::kDataLoss);

  std::string flipped = WithTrailer(json);
  flipped[3] ^= 0x20;
  const std::string damaged = File("flipped", flipped);
  Status st = VerifyDeltaSnapshotFile(damaged);
  EXPECT_EQ(st.code(), Code::kDataLoss);
  EXPECT_NE(st.message().find(damaged), std::string::npos) << st.message();

  // The trailer alone (an empty payload) or less is a delta without its hash.
  st = VerifyDeltaSnapshotFile(File("trailer_only", WithTrailer("")));
  EXPECT_EQ(st.code(), Code::kDataLoss);
  EXPECT_NE(st.message().find("missing hash"), std::string::npos) << st.message();
  EXPECT_EQ(VerifyDeltaSnapshotFile(File("short", "abc")).code(), Code::kDataLoss);
  EXPECT_EQ(VerifyDeltaSnapshotFile(dir_.path() + "/missing").code(), Code::kNotFound);
}

}  // namespace
}  // namespace etcdw::sidecar
