// Feeds the gateway's Go-compatible JSON decoding arbitrary bytes, and checks that its pieces
// agree: the first value of a stream is itself valid, its members and elements are valid values
// that the decoder splits again, strings unquote, and base64 decoding either succeeds or says
// why.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "client_api/go_json_decode.h"

namespace {

namespace gojson = etcdw::client_api::gojson;

[[noreturn]] void Fail(const char* what, std::string_view value) {
  std::fprintf(stderr, "go_json_fuzzer: %s: %.*s\n", what, static_cast<int>(value.size()),
               value.data());
  std::abort();
}

// Walks the valid JSON value `v` the way the gateway does, to `depth` levels.
void Walk(std::string_view v, int depth) {
  if (!gojson::CheckValid(v).empty()) Fail("a value the decoder produced is not valid", v);
  if (v.empty()) Fail("empty value", v);
  if (depth == 0) return;
  switch (v.front()) {
    case '{':
      for (const auto& [key, member] : gojson::ObjectMembers(v)) Walk(member, depth - 1);
      break;
    case '[':
      for (std::string_view element : gojson::ArrayElements(v)) Walk(element, depth - 1);
      break;
    case '"': {
      const std::string s = gojson::Unquote(v);
      std::string error;
      (void)gojson::Base64Decode(s, &error);
      break;
    }
    default:
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string valid = gojson::CheckValid(in);
  const gojson::FirstValue first = gojson::ReadFirstValue(in);
  if (first.result == gojson::FirstValue::kValue) {
    if (first.end > in.size()) Fail("first value ends past the input", in);
    if (first.value.data() < in.data() ||
        first.value.data() + first.value.size() > in.data() + in.size()) {
      Fail("first value is not within the input", in);
    }
    Walk(first.value, 32);
  } else if (valid.empty()) {
    Fail("valid JSON without a first value", in);
  }
  if (first.result == gojson::FirstValue::kError && first.error.empty()) {
    Fail("an error without a message", in);
  }
  std::string error;
  (void)gojson::Base64Decode(in, &error);
  (void)gojson::Quote(in);
  return 0;
}
