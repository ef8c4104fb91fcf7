#include "go_json_decode.h"

#include <cstdint>
#include <cstdio>

namespace etcdw::client_api::gojson {

namespace {

bool IsSpace(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool IsDigit(unsigned char c) { return c >= '0' && c <= '9'; }
bool IsHex(unsigned char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Go's encoding/json nesting limit.
constexpr size_t kMaxDepth = 10000;

// The steps of Go's scanner (encoding/json/scanner.go) that the callers tell apart.
enum Op { kContinue, kEndObject, kEndArray, kEnd, kError };

// Go's scanner: one state per position of the grammar, fed a byte at a time. Its errors are
// Go's word for word.
class Scanner {
 public:
  Op Step(unsigned char c);
  // The end of the input (Go's scanner.eof): kEnd, or kError with error() set.
  Op Eof();
  const std::string& error() const { return error_; }
  size_t depth() const { return parse_.size(); }

 private:
  enum State {
    kBeginValue,
    kBeginValueOrEmpty,
    kBeginStringOrEmpty,
    kBeginString,
    kEndValue,
    kEndTop,
    kInString,
    kInStringEsc,
    kInStringEscU,
    kInStringEscU1,
    kInStringEscU12,
    kInStringEscU123,
    kNeg,
    k1,
    k0,
    kDot,
    kDot0,
    kE,
    kESign,
    kE0,
    kT,
    kTr,
    kTru,
    kF,
    kFa,
    kFal,
    kFals,
    kN,
    kNu,
    kNul,
    kErrorState,
  };
  enum Parse { kObjectKey, kObjectValue, kArrayValue };

  Op Fail(unsigned char c, const char* context);
  Op Push(unsigned char c, Parse p);
  void Pop();
  Op BeginValue(unsigned char c);
  Op EndValue(unsigned char c);
  Op EndTop(unsigned char c);
  // A literal's next byte must be `want`; then `next`.
  Op Expect(unsigned char c, char want, State next, const char* context);

  State state_ = kBeginValue;
  std::vector<Parse> parse_;
  bool end_top_ = false;
  std::string error_;
};

// Go's quoteChar: the byte, as the code point it is in Latin-1, quoted like a Go rune literal.
std::string QuoteChar(unsigned char c) {
  if (c == '\'') return "'\\''";
  if (c == '"') return "'\"'";
  const std::string q = Quote(c < 0x80 ? std::string(1, static_cast<char>(c))
                                       : std::string{static_cast<char>(0xC0 | (c >> 6)),
                                                     static_cast<char>(0x80 | (c & 0x3F))});
  return "'" + q.substr(1, q.size() - 2) + "'";
}

Op Scanner::Fail(unsigned char c, const char* context) {
  state_ = kErrorState;
  error_ = "invalid character " + QuoteChar(c) + " " + context;
  return kError;
}

Op Scanner::Push(unsigned char c, Parse p) {
  parse_.push_back(p);
  if (parse_.size() <= kMaxDepth) return kContinue;
  return Fail(c, "exceeded max depth");
}

void Scanner::Pop() {
  parse_.pop_back();
  if (parse_.empty()) {
    state_ = kEndTop;
    end_top_ = true;
  } else {
    state_ = kEndValue;
  }
}

Op Scanner::BeginValue(unsigned char c) {
  if (IsSpace(c)) return kContinue;
  switch (c) {
    case '{':
      state_ = kBeginStringOrEmpty;
      return Push(c, kObjectKey);
    case '[':
      state_ = kBeginValueOrEmpty;
      return Push(c, kArrayValue);
    case '"':
      state_ = kInString;
      return kContinue;
    case '-':
      state_ = kNeg;
      return kContinue;
    case '0':
      state_ = k0;
      return kContinue;
    case 't':
      state_ = kT;
      return kContinue;
    case 'f':
      state_ = kF;
      return kContinue;
    case 'n':
      state_ = kN;
      return kContinue;
    default:
      break;
  }
  if (c >= '1' && c <= '9') {
    state_ = k1;
    return kContinue;
  }
  return Fail(c, "looking for beginning of value");
}

Op Scanner::EndTop(unsigned char c) {
  // Go complains about a byte after the value, yet reports the end first.
  if (!IsSpace(c)) Fail(c, "after top-level value");
  return kEnd;
}

Op Scanner::EndValue(unsigned char c) {
  if (parse_.empty()) {
    state_ = kEndTop;
    end_top_ = true;
    return EndTop(c);
  }
  if (IsSpace(c)) {
    state_ = kEndValue;
    return kContinue;
  }
  switch (parse_.back()) {
    case kObjectKey:
      if (c == ':') {
        parse_.back() = kObjectValue;
        state_ = kBeginValue;
        return kContinue;
      }
      return Fail(c, "after object key");
    case kObjectValue:
      if (c == ',') {
        parse_.back() = kObjectKey;
        state_ = kBeginString;
        return kContinue;
      }
      if (c == '}') {
        Pop();
        return kEndObject;
      }
      return Fail(c, "after object key:value pair");
    case kArrayValue:
      if (c == ',') {
        state_ = kBeginValue;
        return kContinue;
      }
      if (c == ']') {
        Pop();
        return kEndArray;
      }
      return Fail(c, "after array element");
  }
  return Fail(c, "");
}

Op Scanner::Expect(unsigned char c, char want, State next, const char* context) {
  if (c != static_cast<unsigned char>(want)) return Fail(c, context);
  state_ = next;
  return kContinue;
}

Op Scanner::Step(unsigned char c) {
  switch (state_) {
    case kBeginValue:
      return BeginValue(c);
    case kBeginValueOrEmpty:
      if (IsSpace(c)) return kContinue;
      if (c == ']') return EndValue(c);
      return BeginValue(c);
    case kBeginStringOrEmpty:
      if (IsSpace(c)) return kContinue;
      if (c == '}') {
        parse_.back() = kObjectValue;
        return EndValue(c);
      }
      [[fallthrough]];
    case kBeginString:
      if (IsSpace(c)) return kContinue;
      if (c == '"') {
        state_ = kInString;
        return kContinue;
      }
      return Fail(c, "looking for beginning of object key string");
    case kEndValue:
      return EndValue(c);
    case kEndTop:
      return EndTop(c);
    case kInString:
      if (c == '"') {
        state_ = kEndValue;
        return kContinue;
      }
      if (c == '\\') {
        state_ = kInStringEsc;
        return kContinue;
      }
      if (c < 0x20) return Fail(c, "in string literal");
      return kContinue;
    case kInStringEsc:
      switch (c) {
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
        case '\\':
        case '/':
        case '"':
          state_ = kInString;
          return kContinue;
        case 'u':
          state_ = kInStringEscU;
          return kContinue;
        default:
          return Fail(c, "in string escape code");
      }
    case kInStringEscU:
    case kInStringEscU1:
    case kInStringEscU12:
    case kInStringEscU123:
      if (!IsHex(c)) return Fail(c, "in \\u hexadecimal character escape");
      state_ = state_ == kInStringEscU123 ? kInString : static_cast<State>(state_ + 1);
      return kContinue;
    case kNeg:
      if (c == '0') {
        state_ = k0;
        return kContinue;
      }
      if (c >= '1' && c <= '9') {
        state_ = k1;
        return kContinue;
      }
      return Fail(c, "in numeric literal");
    case k1:
      if (IsDigit(c)) return kContinue;
      [[fallthrough]];
    case k0:
      if (c == '.') {
        state_ = kDot;
        return kContinue;
      }
      if (c == 'e' || c == 'E') {
        state_ = kE;
        return kContinue;
      }
      return EndValue(c);
    case kDot:
      if (IsDigit(c)) {
        state_ = kDot0;
        return kContinue;
      }
      return Fail(c, "after decimal point in numeric literal");
    case kDot0:
      if (IsDigit(c)) return kContinue;
      if (c == 'e' || c == 'E') {
        state_ = kE;
        return kContinue;
      }
      return EndValue(c);
    case kE:
      if (c == '+' || c == '-') {
        state_ = kESign;
        return kContinue;
      }
      [[fallthrough]];
    case kESign:
      if (IsDigit(c)) {
        state_ = kE0;
        return kContinue;
      }
      return Fail(c, "in exponent of numeric literal");
    case kE0:
      if (IsDigit(c)) return kContinue;
      return EndValue(c);
    case kT:
      return Expect(c, 'r', kTr, "in literal true (expecting 'r')");
    case kTr:
      return Expect(c, 'u', kTru, "in literal true (expecting 'u')");
    case kTru:
      return Expect(c, 'e', kEndValue, "in literal true (expecting 'e')");
    case kF:
      return Expect(c, 'a', kFa, "in literal false (expecting 'a')");
    case kFa:
      return Expect(c, 'l', kFal, "in literal false (expecting 'l')");
    case kFal:
      return Expect(c, 's', kFals, "in literal false (expecting 's')");
    case kFals:
      return Expect(c, 'e', kEndValue, "in literal false (expecting 'e')");
    case kN:
      return Expect(c, 'u', kNu, "in literal null (expecting 'u')");
    case kNu:
      return Expect(c, 'l', kNul, "in literal null (expecting 'l')");
    case kNul:
      return Expect(c, 'l', kEndValue, "in literal null (expecting 'l')");
    case kErrorState:
      return kError;
  }
  return kError;
}

Op Scanner::Eof() {
  if (!error_.empty()) return kError;
  if (end_top_) return kEnd;
  Step(' ');
  if (end_top_ && error_.empty()) return kEnd;
  if (error_.empty()) error_ = "unexpected end of JSON input";
  return kError;
}

// Where the valid JSON value starting at `i` (no white space before it) ends.
size_t ValueEnd(std::string_view s, size_t i) {
  int depth = 0;
  bool in_string = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;  // a scalar's end inside its container
      if (--depth == 0) return i + 1;
    } else if (depth == 0 && (IsSpace(static_cast<unsigned char>(c)) || c == ',')) {
      return i;
    }
  }
  return s.size();
}

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && IsSpace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

void AppendUtf8(uint32_t r, std::string* out) {
  if (r < 0x80) {
    out->push_back(static_cast<char>(r));
  } else if (r < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (r >> 6)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else if (r < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (r >> 12)));
    out->push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (r >> 18)));
    out->push_back(static_cast<char>(0x80 | ((r >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3F)));
  }
}

constexpr uint32_t kReplacement = 0xFFFD;

// Decodes the UTF-8 sequence at s[i] as Go's utf8.DecodeRune: *size bytes; kReplacement with
// size 1 when invalid (overlong forms and surrogates included).
uint32_t DecodeRune(std::string_view s, size_t i, size_t* size) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  *size = 1;
  if (c < 0x80) return c;
  size_t n = 0;
  uint32_t r = 0;
  uint32_t min = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, r = c & 0x1F, min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, r = c & 0x0F, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, r = c & 0x07, min = 0x10000;
  } else {
    return kReplacement;
  }
  if (i + n > s.size()) return kReplacement;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return kReplacement;
    r = (r << 6) | (b(k) & 0x3F);
  }
  if (r < min || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) return kReplacement;
  *size = n;
  return r;
}

// Go's unicode.IsPrint, closely enough for what error texts quote: ASCII graphics and space,
// and code points from U+00A0 on but the few Latin-1 ones Go deems not printable.
bool IsPrint(uint32_t r) {
  if (r < 0x80) return r >= 0x20 && r < 0x7F;
  if (r < 0xA1 || r == 0xAD) return false;
  return !(r >= 0x2028 && r <= 0x2029) && r != 0xFEFF;
}

// Go's strconv.appendEscapedRune.
void AppendQuotedRune(uint32_t r, std::string* out) {
  char buf[16];
  if (r == '"' || r == '\\') {
    out->push_back('\\');
    out->push_back(static_cast<char>(r));
    return;
  }
  if (IsPrint(r)) return AppendUtf8(r, out);
  switch (r) {
    case '\a':
      *out += "\\a";
      return;
    case '\b':
      *out += "\\b";
      return;
    case '\f':
      *out += "\\f";
      return;
    case '\n':
      *out += "\\n";
      return;
    case '\r':
      *out += "\\r";
      return;
    case '\t':
      *out += "\\t";
      return;
    case '\v':
      *out += "\\v";
      return;
    default:
      break;
  }
  if (r < ' ' || r == 0x7F) {
    std::snprintf(buf, sizeof buf, "\\x%02x", r);
  } else if (r < 0x10000) {
    std::snprintf(buf, sizeof buf, "\\u%04x", r);
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08x", r);
  }
  *out += buf;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// The \uXXXX escape at s[i] (its backslash), or -1.
int32_t GetU4(std::string_view s, size_t i) {
  if (i + 6 > s.size() || s[i] != '\\' || s[i + 1] != 'u') return -1;
  int32_t r = 0;
  for (size_t k = 2; k < 6; ++k) {
    if (!IsHex(static_cast<unsigned char>(s[i + k]))) return -1;
    r = r * 16 + HexValue(s[i + k]);
  }
  return r;
}

}  // namespace

FirstValue ReadFirstValue(std::string_view in) {
  FirstValue out;
  Scanner scan;
  const size_t start = SkipSpace(in, 0);
  for (size_t i = 0; i < in.size(); ++i) {
    const Op op = scan.Step(static_cast<unsigned char>(in[i]));
    if (op == kError) {
      out.result = FirstValue::kError;
      out.error = scan.error();
      return out;
    }
    // A scalar ends at the byte after it (which is not part of it); an object or array at its
    // closing byte.
    size_t end = 0;
    if (op == kEnd) {
      end = i;
    } else if ((op == kEndObject || op == kEndArray) && scan.depth() == 0) {
      end = i + 1;
    } else {
      continue;
    }
    out.result = FirstValue::kValue;
    out.value = in.substr(start, end - start);
    out.end = end;
    return out;
  }
  if (start == in.size()) return out;  // io.EOF
  if (scan.Step(' ') == kEnd) {
    out.result = FirstValue::kValue;
    out.value = in.substr(start);
    out.end = in.size();
    return out;
  }
  out.result = FirstValue::kError;
  out.error = "unexpected EOF";
  return out;
}

std::string CheckValid(std::string_view in) {
  Scanner scan;
  for (char c : in) {
    if (scan.Step(static_cast<unsigned char>(c)) == kError) return scan.error();
  }
  return scan.Eof() == kError ? scan.error() : "";
}

std::vector<std::pair<std::string, std::string_view>> ObjectMembers(std::string_view raw) {
  std::vector<std::pair<std::string, std::string_view>> out;
  size_t i = SkipSpace(raw, 1);  // past '{'
  while (i < raw.size() && raw[i] == '"') {
    const size_t key_end = ValueEnd(raw, i);
    std::string key = Unquote(raw.substr(i, key_end - i));
    i = SkipSpace(raw, SkipSpace(raw, key_end) + 1);  // past ':'
    const size_t value_end = ValueEnd(raw, i);
    out.emplace_back(std::move(key), raw.substr(i, value_end - i));
    i = SkipSpace(raw, value_end);
    if (i < raw.size() && raw[i] == ',') i = SkipSpace(raw, i + 1);
  }
  return out;
}

std::vector<std::string_view> ArrayElements(std::string_view raw) {
  std::vector<std::string_view> out;
  size_t i = SkipSpace(raw, 1);  // past '['
  while (i < raw.size() && raw[i] != ']') {
    const size_t end = ValueEnd(raw, i);
    out.push_back(raw.substr(i, end - i));
    i = SkipSpace(raw, end);
    if (i < raw.size() && raw[i] == ',') i = SkipSpace(raw, i + 1);
  }
  return out;
}

std::string Unquote(std::string_view raw) {
  std::string out;
  const std::string_view s = raw.substr(1, raw.size() >= 2 ? raw.size() - 2 : 0);
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '\\' && i + 1 < s.size()) {
      const char e = s[i + 1];
      if (e != 'u') {
        switch (e) {
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          default:
            out += e;  // " \ /
        }
        i += 2;
        continue;
      }
      int32_t r = GetU4(s, i);
      i += 6;
      if (r >= 0xD800 && r < 0xE000) {
        // A pair of escapes that make one code point; anything else is replaced.
        const int32_t r2 = GetU4(s, i);
        if (r < 0xDC00 && r2 >= 0xDC00 && r2 < 0xE000) {
          AppendUtf8(0x10000 + ((r - 0xD800) << 10) + (r2 - 0xDC00), &out);
          i += 6;
          continue;
        }
        r = kReplacement;
      }
      AppendUtf8(static_cast<uint32_t>(r), &out);
      continue;
    }
    size_t n = 0;
    const uint32_t r = DecodeRune(s, i, &n);
    if (r == kReplacement && n == 1) {
      AppendUtf8(kReplacement, &out);
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    const uint32_t r = DecodeRune(s, i, &n);
    if (r == kReplacement && n == 1) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
      out += buf;
    } else {
      AppendQuotedRune(r, &out);
    }
    i += n;
  }
  return out + "\"";
}

std::string Base64Decode(std::string_view s, std::string* error) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto fail = [&](size_t at) {
    *error = "illegal base64 data at input byte " + std::to_string(at);
    return std::string();
  };
  const auto newline = [](char c) { return c == '\n' || c == '\r'; };
  std::string out;
  size_t si = 0;
  // Go's decodeQuantum, one quantum of four characters at a time.
  while (si < s.size()) {
    uint32_t buf[4] = {0, 0, 0, 0};
    size_t dlen = 4;
    bool trailing = false;
    for (size_t j = 0; j < 4; ++j) {
      if (si == s.size()) {
        if (j == 0) return out;
        return fail(si - j);  // padding is required
      }
      const char in = s[si++];
      const size_t v = kAlphabet.find(in);
      if (v != std::string_view::npos) {
        buf[j] = static_cast<uint32_t>(v);
        continue;
      }
      if (newline(in)) {
        --j;
        continue;
      }
      if (in != '=') return fail(si - 1);
      // Padding: the quantum ends here.
      if (j < 2) return fail(si - 1);
      if (j == 2) {
        while (si < s.size() && newline(s[si])) ++si;
        if (si == s.size()) return fail(s.size());
        if (s[si] != '=') return fail(si - 1);
        ++si;
      }
      while (si < s.size() && newline(s[si])) ++si;
      trailing = si < s.size();
      dlen = j;
      break;
    }
    const uint32_t val = buf[0] << 18 | buf[1] << 12 | buf[2] << 6 | buf[3];
    const char bytes[3] = {static_cast<char>(val >> 16), static_cast<char>(val >> 8),
                           static_cast<char>(val)};
    out.append(bytes, dlen - 1);
    if (trailing) return fail(si);
  }
  return out;
}

}  // namespace etcdw::client_api::gojson
