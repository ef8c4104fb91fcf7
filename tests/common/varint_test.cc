#include "etcdw/common/varint.h"

#include <google/protobuf/io/coded_stream.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace etcdw::common {
namespace {

constexpr uint64_t kSamples[] = {0,
                                 1,
                                 127,
                                 128,
                                 300,
                                 16383,
                                 16384,
                                 (uint64_t{1} << 35) - 1,
                                 uint64_t{1} << 35,
                                 uint64_t{1} << 63,
                                 std::numeric_limits<uint64_t>::max()};

TEST(VarintTest, EncodesAsProtobufDoes) {
  for (uint64_t v : kSamples) {
    uint8_t buf[10];
    const uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(v, buf);
    const std::string want(reinterpret_cast<const char*>(buf), static_cast<size_t>(end - buf));
    std::string got;
    AppendVarint(got, v);
    EXPECT_EQ(got, want) << v;
    EXPECT_EQ(VarintSize(v), want.size()) << v;
  }
}

TEST(VarintTest, ConsumeReadsWhatAppendWroteAndLeavesTheRest) {
  std::string all;
  for (uint64_t v : kSamples) AppendVarint(all, v);
  all += "tail";
  std::string_view in = all;
  for (uint64_t v : kSamples) {
    uint64_t got = 0;
    ASSERT_TRUE(ConsumeVarint(in, &got)) << v;
    EXPECT_EQ(got, v);
  }
  EXPECT_EQ(in, "tail");
}

TEST(VarintTest, TruncatedOrOverlongInputIsRefused) {
  std::string v;
  AppendVarint(v, uint64_t{1} << 40);
  std::string_view truncated = std::string_view(v).substr(0, v.size() - 1);
  uint64_t out = 0;
  EXPECT_FALSE(ConsumeVarint(truncated, &out));
  std::string_view empty;
  EXPECT_FALSE(ConsumeVarint(empty, &out));
  const std::string overlong(11, '\x80');  // continuation bits past the tenth byte
  std::string_view in = overlong;
  EXPECT_FALSE(ConsumeVarint(in, &out));
}

}  // namespace
}  // namespace etcdw::common
