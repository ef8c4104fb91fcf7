#include "etcdw/common/logging.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace etcdw::log {
namespace {

std::string Json(std::string_view s) {
  std::string out;
  AppendJsonString(out, s);
  return out;
}

TEST(AppendJsonStringTest, PlainTextIsQuoted) {
  EXPECT_EQ(Json(""), "\"\"");
  EXPECT_EQ(Json("etcd server is ready"), "\"etcd server is ready\"");
  std::string out = "prefix:";
  AppendJsonString(out, "x");
  EXPECT_EQ(out, "prefix:\"x\"");
}

TEST(AppendJsonStringTest, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(Json("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(Json("C:\\dir"), "\"C:\\\\dir\"");
  EXPECT_EQ(Json("a\nb\rc\td"), "\"a\\nb\\rc\\td\"");
  EXPECT_EQ(Json(std::string("\0", 1)), "\"\\u0000\"");
  EXPECT_EQ(Json("\x01\x1f"), "\"\\u0001\\u001f\"");
  EXPECT_EQ(Json("\x7f"), "\"\\u007f\"");
  EXPECT_EQ(Json("/<>&'"), "\"/<>&'\"");
}

TEST(AppendJsonStringTest, ValidUtf8IsCopied) {
  EXPECT_EQ(Json("caf\xC3\xA9"), "\"caf\xC3\xA9\"");            // U+00E9
  EXPECT_EQ(Json("\xE2\x82\xAC"), "\"\xE2\x82\xAC\"");          // U+20AC
  EXPECT_EQ(Json("\xF0\x9F\x98\x80"), "\"\xF0\x9F\x98\x80\"");  // U+1F600
  EXPECT_EQ(Json("\xEF\xBF\xBF"), "\"\xEF\xBF\xBF\"");          // U+FFFF
  EXPECT_EQ(Json("\xF4\x8F\xBF\xBF"), "\"\xF4\x8F\xBF\xBF\"");  // U+10FFFF, the last
  EXPECT_EQ(Json("\xED\x9F\xBF"), "\"\xED\x9F\xBF\"");          // U+D7FF, before surrogates
}

TEST(AppendJsonStringTest, InvalidUtf8BytesAreEscaped) {
  // A lone continuation byte, a lone lead byte and bytes that never occur in UTF-8.
  EXPECT_EQ(Json("\x80"), "\"\\u0080\"");
  EXPECT_EQ(Json("a\xffz"), "\"a\\u00ffz\"");
  EXPECT_EQ(Json("\xfe"), "\"\\u00fe\"");
  // Truncated sequences: every byte is escaped, what follows is kept.
  EXPECT_EQ(Json("\xE2\x82"), "\"\\u00e2\\u0082\"");
  EXPECT_EQ(Json("\xE2\x82x"), "\"\\u00e2\\u0082x\"");
  EXPECT_EQ(Json("\xF0\x9F\x98"), "\"\\u00f0\\u009f\\u0098\"");
  // A lead byte followed by a new sequence rather than a continuation.
  EXPECT_EQ(Json("\xC3\xC3\xA9"), "\"\\u00c3\xC3\xA9\"");
}

TEST(AppendJsonStringTest, OverlongSurrogateAndOutOfRangeSequencesAreInvalid) {
  // Overlong encodings of '/' and NUL.
  EXPECT_EQ(Json("\xC0\xAF"), "\"\\u00c0\\u00af\"");
  EXPECT_EQ(Json("\xC1\xBF"), "\"\\u00c1\\u00bf\"");
  EXPECT_EQ(Json("\xE0\x80\xAF"), "\"\\u00e0\\u0080\\u00af\"");
  EXPECT_EQ(Json("\xF0\x80\x80\xAF"), "\"\\u00f0\\u0080\\u0080\\u00af\"");
  // UTF-16 surrogates U+D800 and U+DFFF.
  EXPECT_EQ(Json("\xED\xA0\x80"), "\"\\u00ed\\u00a0\\u0080\"");
  EXPECT_EQ(Json("\xED\xBF\xBF"), "\"\\u00ed\\u00bf\\u00bf\"");
  // Above U+10FFFF.
  EXPECT_EQ(Json("\xF4\x90\x80\x80"), "\"\\u00f4\\u0090\\u0080\\u0080\"");
  EXPECT_EQ(Json("\xF5\x80\x80\x80"), "\"\\u00f5\\u0080\\u0080\\u0080\"");
}

TEST(ParseLevelTest, ZapNames) {
  struct Case {
    const char* name;
    Level want;
  } cases[] = {
      {"debug", Level::kDebug}, {"info", Level::kInfo},   {"", Level::kInfo},
      {"warn", Level::kWarn},   {"error", Level::kError}, {"dpanic", Level::kError},
      {"panic", Level::kError}, {"fatal", Level::kError}, {"DEBUG", Level::kDebug},
      {"INFO", Level::kInfo},   {"WARN", Level::kWarn},   {"Error", Level::kError},
  };
  for (const auto& c : cases) {
    auto l = ParseLevel(c.name);
    ASSERT_TRUE(l.ok()) << c.name;
    EXPECT_EQ(*l, c.want) << c.name;
  }
}

TEST(ParseLevelTest, UnknownNameIsAnError) {
  auto l = ParseLevel("verbose");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(l.status().message(),
            "unknown log level 'verbose' (want debug, info, warn, error, dpanic, panic or fatal)");
}

TEST(FieldTest, EncodesValuesAsJson) {
  EXPECT_EQ(F("k", "v").json, "\"v\"");
  EXPECT_EQ(F("k", std::string("a\"b")).json, "\"a\\\"b\"");
  EXPECT_EQ(F("k", std::string_view("x")).key, "k");
  EXPECT_EQ(F("k", int64_t{-5}).json, "-5");
  EXPECT_EQ(F("k", uint64_t{18446744073709551615u}).json, "18446744073709551615");
  EXPECT_EQ(F("k", 7).json, "7");
  EXPECT_EQ(F("k", 7u).json, "7");
  EXPECT_EQ(F("k", true).json, "true");
  EXPECT_EQ(F("k", false).json, "false");
  EXPECT_EQ(F("k", 0.5).json, "0.5");
  EXPECT_EQ(F("err", InvalidArgument("bad \"x\"")).json, "\"InvalidArgument: bad \\\"x\\\"\"");
  EXPECT_EQ(Hex("member-id", 0xff).json, "\"00000000000000ff\"");
  EXPECT_EQ(Hex("lease", 0x694d7ae0f1e5a60bULL).json, "\"694d7ae0f1e5a60b\"");
}

TEST(FieldTest, NonFiniteDoublesStayValidJson) {
  // zap writes these as strings; bare nan/inf would break the JSON line.
  EXPECT_EQ(F("k", std::numeric_limits<double>::quiet_NaN()).json, "\"NaN\"");
  EXPECT_EQ(F("k", std::numeric_limits<double>::infinity()).json, "\"+Inf\"");
  EXPECT_EQ(F("k", -std::numeric_limits<double>::infinity()).json, "\"-Inf\"");
}

TEST(LevelTest, SetLevelControlsEnabled) {
  Level saved = GetLevel();
  SetLevel(Level::kWarn);
  EXPECT_EQ(GetLevel(), Level::kWarn);
  EXPECT_FALSE(Enabled(Level::kDebug));
  EXPECT_FALSE(Enabled(Level::kInfo));
  EXPECT_TRUE(Enabled(Level::kWarn));
  EXPECT_TRUE(Enabled(Level::kError));
  SetLevel(Level::kOff);
  EXPECT_FALSE(Enabled(Level::kError));
  SetLevel(Level::kDebug);
  EXPECT_TRUE(Enabled(Level::kDebug));
  SetLevel(saved);
}

TEST(WriteTest, WritesOneJsonObjectPerLine) {
  Level saved = GetLevel();
  SetLevel(Level::kInfo);
  ::testing::internal::CaptureStderr();
  Info("hello \"world\"", {F("revision", int64_t{5}), Hex("id", 1)});
  Debug("not shown");
  std::string out = ::testing::internal::GetCapturedStderr();
  SetLevel(saved);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;  // one line: debug was filtered
  EXPECT_EQ(out.rfind("{\"level\":\"info\",\"ts\":\"", 0), 0u) << out;
  EXPECT_NE(out.find("\"caller\":\"common/logging_test.cc:"), std::string::npos) << out;
  EXPECT_NE(out.find("\"msg\":\"hello \\\"world\\\"\",\"revision\":5,\"id\":\"0000000000000001\"}"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace etcdw::log
