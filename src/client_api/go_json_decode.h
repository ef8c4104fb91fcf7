// JSON as Go's encoding/json reads it (Go 1.19, what etcd 3.4's gateway is built with): its
// scanner's syntax errors word for word ("invalid character 'b' looking for beginning of object
// key string", "unexpected EOF"), its Decoder's idea of where the first value of a stream ends,
// its string unquoting, and the base64 its []byte fields take. The gateway decodes request
// bodies with these so that a malformed body is refused with etcd's own error text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace etcdw::client_api::gojson {

// What json.Decoder.Decode reads from the start of `in`.
struct FirstValue {
  enum Result {
    kNone,   // only white space: io.EOF
    kValue,  // `value` (without surrounding white space); the next value starts at `end`
    kError,  // `error`: a syntax error, or "unexpected EOF" for a value cut short
  };
  Result result = kNone;
  std::string_view value;
  size_t end = 0;
  std::string error;
};
FirstValue ReadFirstValue(std::string_view in);

// json.Unmarshal's check that `in` is one JSON value and nothing else: "" when it is, otherwise
// the error ("unexpected end of JSON input", "invalid character 'x' after top-level value" ...).
std::string CheckValid(std::string_view in);

// The members of the valid JSON object `raw`, keys unquoted, values as raw JSON, in order.
std::vector<std::pair<std::string, std::string_view>> ObjectMembers(std::string_view raw);
// The elements of the valid JSON array `raw`, as raw JSON.
std::vector<std::string_view> ArrayElements(std::string_view raw);
// The valid JSON string `raw` (with its quotes) unquoted as Go does: escapes resolved, invalid
// UTF-8 and lone surrogates as U+FFFD.
std::string Unquote(std::string_view raw);

// `s` as Go's strconv.Quote writes it (fmt's %q).
std::string Quote(std::string_view s);

// `s` decoded as Go's base64.StdEncoding decodes it (padding required, CR and LF skipped). On
// failure `*error` is Go's "illegal base64 data at input byte N".
std::string Base64Decode(std::string_view s, std::string* error);

}  // namespace etcdw::client_api::gojson
