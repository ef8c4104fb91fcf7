// Go's encoding/json and golang/protobuf 1.3's jsonpb as the gateway reproduces them. The
// expected texts are those etcd 3.4.23's gateway answered with for the same bodies.
#include "client_api/go_json_decode.h"

#include <gtest/gtest.h>

#include <string>

#include "client_api/jsonpb_decode.h"
#include "etcd/etcdserverpb/rpc.pb.h"

namespace etcdw::client_api {
namespace {

std::string FirstError(std::string_view in) { return gojson::ReadFirstValue(in).error; }

TEST(GoJsonTest, TheFirstValueEndsWhereGoDecoderStops) {
  EXPECT_EQ(gojson::ReadFirstValue(" \n ").result, gojson::FirstValue::kNone);
  auto v = gojson::ReadFirstValue(R"( {"a":"}{\"x"} {"b":1})");
  EXPECT_EQ(v.value, R"({"a":"}{\"x"})");
  EXPECT_EQ(v.end, 14u);
  v = gojson::ReadFirstValue("12 x");
  EXPECT_EQ(v.value, "12");
  EXPECT_EQ(v.end, 2u);
  v = gojson::ReadFirstValue("true");
  EXPECT_EQ(v.value, "true");
  EXPECT_EQ(gojson::ReadFirstValue(R"({"key":"Zm9v"}})").value, R"({"key":"Zm9v"})");
}

TEST(GoJsonTest, SyntaxErrorsAreGosWords) {
  EXPECT_EQ(FirstError("{"), "unexpected EOF");
  EXPECT_EQ(FirstError("tru"), "unexpected EOF");
  EXPECT_EQ(FirstError("{bad"), "invalid character 'b' looking for beginning of object key string");
  EXPECT_EQ(FirstError("{'key':1}"),
            "invalid character '\\'' looking for beginning of object key string");
  EXPECT_EQ(FirstError(R"({"key" "a"})"), "invalid character '\"' after object key");
  EXPECT_EQ(FirstError(R"({"key":"a" "b"})"), "invalid character '\"' after object key:value pair");
  EXPECT_EQ(FirstError(R"({"limit":-})"), "invalid character '}' in numeric literal");
  EXPECT_EQ(FirstError(R"({"limit":01})"), "invalid character '1' after object key:value pair");
  EXPECT_EQ(FirstError(R"({"limit":1e})"), "invalid character '}' in exponent of numeric literal");
  EXPECT_EQ(FirstError(R"({"key":"\x"})"), "invalid character 'x' in string escape code");
  EXPECT_EQ(FirstError(R"({"key":"\u12"})"),
            "invalid character '\"' in \\u hexadecimal character escape");
  EXPECT_EQ(FirstError("[1 2]"), "invalid character '2' after array element");
  EXPECT_EQ(FirstError("nulx"), "invalid character 'x' in literal null (expecting 'l')");
  EXPECT_EQ(FirstError("\"a\tb\""), "invalid character '\\t' in string literal");
  EXPECT_EQ(FirstError("\x01"), "invalid character '\\x01' looking for beginning of value");
  EXPECT_EQ(FirstError("\xc3"), "invalid character '\u00c3' looking for beginning of value");
  EXPECT_EQ(gojson::CheckValid(""), "unexpected end of JSON input");
  EXPECT_EQ(gojson::CheckValid("1 2"), "invalid character '2' after top-level value");
  EXPECT_EQ(gojson::CheckValid(" 1 "), "");
}

TEST(GoJsonTest, Base64IsGosStdEncoding) {
  std::string err;
  EXPECT_EQ(gojson::Base64Decode("Zm9v", &err), "foo");
  EXPECT_EQ(gojson::Base64Decode("Zm8=\n", &err), "fo");
  EXPECT_EQ(gojson::Base64Decode("Zg==", &err), "f");
  EXPECT_TRUE(err.empty()) << err;
  for (const auto& [in, at] : std::vector<std::pair<std::string, int>>{
           {"!!", 0}, {"Zm9", 0}, {"Zm9vZ", 4}, {"Zg=", 3}, {"Zg==x", 4}, {"Z===", 1}}) {
    err.clear();
    gojson::Base64Decode(in, &err);
    EXPECT_EQ(err, "illegal base64 data at input byte " + std::to_string(at)) << in;
  }
}

std::string RangeError(std::string_view body) {
  etcdserverpb::RangeRequest r;
  return UnmarshalJsonPb(gojson::ReadFirstValue(body).value, &r);
}

TEST(JsonPbTest, TypeErrorsAreJsonpbs) {
  EXPECT_EQ(RangeError("[]"),
            "json: cannot unmarshal array into Go value of type map[string]json.RawMessage");
  EXPECT_EQ(RangeError("1"),
            "json: cannot unmarshal number into Go value of type map[string]json.RawMessage");
  EXPECT_EQ(RangeError("null"), "");
  EXPECT_EQ(RangeError(R"({"key":123})"),
            "json: cannot unmarshal number into Go value of type []uint8");
  EXPECT_EQ(RangeError(R"({"key":"!!"})"), "illegal base64 data at input byte 0");
  EXPECT_EQ(RangeError(R"({"limit":"abc"})"),
            "invalid character 'a' looking for beginning of value");
  EXPECT_EQ(RangeError(R"({"limit":1.5})"),
            "json: cannot unmarshal number 1.5 into Go value of type int64");
  EXPECT_EQ(RangeError(R"({"limit":"1.5"})"),
            "json: cannot unmarshal number 1.5 into Go value of type int64");
  EXPECT_EQ(RangeError(R"({"limit":true})"),
            "json: cannot unmarshal bool into Go value of type int64");
  EXPECT_EQ(RangeError(R"({"limit":""})"), "unexpected end of JSON input");
  EXPECT_EQ(RangeError(R"({"limit":99999999999999999999})"),
            "json: cannot unmarshal number 99999999999999999999 into Go value of type int64");
  EXPECT_EQ(RangeError(R"({"sort_order":"FOO"})"),
            "unknown value \"FOO\" for enum etcdserverpb.RangeRequest_SortOrder");
  EXPECT_EQ(RangeError(R"({"keys_only":"true"})"),
            "json: cannot unmarshal string into Go value of type bool");
  EXPECT_EQ(RangeError(R"({"keys_only":1})"),
            "json: cannot unmarshal number into Go value of type bool");
  EXPECT_EQ(RangeError(R"({"key":null,"unknown":{"a":[1,{"b":2}]}})"), "");
}

TEST(JsonPbTest, ValuesDecodeAsGoDoes) {
  etcdserverpb::TxnRequest t;
  ASSERT_EQ(UnmarshalJsonPb(R"({"compare":[{"key":"Zm9v","result":"EQUAL","target":"VALUE",)"
                            R"("value":"YmFy"},{"key":"YQ==","target":1,"version":"5"}],)"
                            R"("success":[{"requestPut":{"key":"dA==","value":[104,105]}}]})",
                            &t),
            "");
  ASSERT_EQ(t.compare_size(), 2);
  EXPECT_EQ(t.compare(0).value(), "bar");
  EXPECT_EQ(t.compare(1).target(), etcdserverpb::Compare::CREATE);
  EXPECT_EQ(t.compare(1).version(), 5);
  EXPECT_EQ(t.success(0).request_put().value(), "hi");
  etcdserverpb::RangeRequest r;
  ASSERT_EQ(
      UnmarshalJsonPb(R"({"range_end":"eA==","rangeEnd":"eQ==","limit":"3","sort_order":7})", &r),
      "");
  EXPECT_EQ(r.range_end(), "y") << "the camelCase name wins";
  EXPECT_EQ(r.limit(), 3);
  EXPECT_EQ(static_cast<int>(r.sort_order()), 7);
}

}  // namespace
}  // namespace etcdw::client_api
