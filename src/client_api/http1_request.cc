#include "http1_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace etcdw::client_api {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether the comma-separated header value `v` lists `token` (case-insensitive).
bool ListsToken(std::string_view v, std::string_view token) {
  while (!v.empty()) {
    const size_t comma = v.find(',');
    if (Lower(Trim(v.substr(0, comma))) == token) return true;
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return false;
}

// A token character of RFC 9110 (method and header names).
bool IsTokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// Parses the request line and headers of `head` (without its blank line) into *out.
bool ParseHead(std::string_view head, Http1Request* out) {
  size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return false;
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method) || target.empty() || version.size() != 8 ||
      version.substr(0, 7) != "HTTP/1." || !std::isdigit(static_cast<unsigned char>(version[7]))) {
    return false;
  }
  out->method = std::string(method);
  const size_t q = target.find('?');
  out->path = std::string(target.substr(0, q));
  out->query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
  out->minor_version = version[7] - '0';
  out->headers.clear();
  while (eol != std::string_view::npos) {
    head.remove_prefix(eol + 2);
    eol = head.find("\r\n");
    const std::string_view h = head.substr(0, eol);
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || !IsToken(h.substr(0, colon))) return false;
    out->headers.emplace_back(Lower(h.substr(0, colon)), std::string(Trim(h.substr(colon + 1))));
  }
  return true;
}

std::optional<size_t> ParseSize(std::string_view s, int base) {
  size_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

constexpr size_t kMaxChunkLine = 1024;
constexpr size_t kMaxTrailerBytes = 4096;

// Decodes the chunked body starting at `in`: kComplete with *consumed set (through the trailer
// section's blank line), kIncomplete, kBadRequest or kBodyTooLarge.
Http1Parse::Result Dechunk(std::string_view in, size_t max_body, std::string* body,
                           size_t* consumed) {
  body->clear();
  size_t at = 0;
  while (true) {
    // A chunk-size line (extensions included) is at most kMaxChunkLine bytes, whether it is
    // seen whole or still arriving (then the '\r' of its end may be in already).
    const size_t eol = in.find("\r\n", at);
    if (eol == std::string_view::npos)
      return in.size() - at > kMaxChunkLine + 1 ? Http1Parse::kBadRequest : Http1Parse::kIncomplete;
    if (eol - at > kMaxChunkLine) return Http1Parse::kBadRequest;
    std::string_view size_line = in.substr(at, eol - at);
    size_line = Trim(size_line.substr(0, size_line.find(';')));  // extensions are ignored
    const auto size = ParseSize(size_line, 16);
    if (!size) return Http1Parse::kBadRequest;
    at = eol + 2;
    if (*size == 0) break;
    if (*size > max_body || body->size() + *size > max_body) return Http1Parse::kBodyTooLarge;
    if (in.size() < at + *size + 2) return Http1Parse::kIncomplete;
    if (in.substr(at + *size, 2) != "\r\n") return Http1Parse::kBadRequest;
    body->append(in.substr(at, *size));
    at += *size + 2;
  }
  // Trailer fields, up to a blank line; they are not kept. At most kMaxTrailerBytes, whether
  // seen whole or still arriving (Go's server refuses a trailer whose end is not within its
  // 4 KiB read buffer), so a client cannot grow the connection's buffer with trailer lines.
  const size_t trailer_at = at;
  while (true) {
    const size_t eol = in.find("\r\n", at);
    if (eol == std::string_view::npos) {
      return in.size() - trailer_at > kMaxTrailerBytes ? Http1Parse::kBadRequest
                                                       : Http1Parse::kIncomplete;
    }
    if (eol + 2 - trailer_at > kMaxTrailerBytes) return Http1Parse::kBadRequest;
    const bool blank = eol == at;
    at = eol + 2;
    if (blank) break;
  }
  *consumed = at;
  return Http1Parse::kComplete;
}

}  // namespace

const std::string* Http1Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

bool Http1Request::KeepAlive() const {
  const std::string* c = Header("connection");
  if (minor_version == 0) return c && ListsToken(*c, "keep-alive");
  return !c || !ListsToken(*c, "close");
}

bool Http1Request::ExpectsContinue() const {
  const std::string* e = Header("expect");
  return e && Lower(*e) == "100-continue" && minor_version >= 1;
}

Http1Parse ParseHttp1Request(std::string_view in, size_t max_head, size_t max_body,
                             Http1Request* out) {
  Http1Parse p;
  // Blank lines before a request are ignored (RFC 9112, 2.2).
  size_t start = 0;
  while (in.substr(start, 2) == "\r\n") start += 2;
  const size_t head_end = in.find("\r\n\r\n", start);
  if (head_end == std::string_view::npos) {
    // The bytes in may end with the first three of the blank line, which is not part of the
    // head: only beyond those is the head known to be too large.
    p.result =
        in.size() - start > max_head + 3 ? Http1Parse::kHeadTooLarge : Http1Parse::kIncomplete;
    return p;
  }
  if (head_end - start > max_head) {
    p.result = Http1Parse::kHeadTooLarge;
    return p;
  }
  if (!ParseHead(in.substr(start, head_end - start), out)) {
    p.result = Http1Parse::kBadRequest;
    return p;
  }
  p.head_complete = true;
  const size_t body_at = head_end + 4;
  if (const std::string* te = out->Header("transfer-encoding")) {
    // Only chunked is understood (and a body coded otherwise cannot be framed).
    if (Lower(Trim(*te)) != "chunked") {
      p.result = Http1Parse::kUnsupportedTransferEncoding;
      return p;
    }
    size_t used = 0;
    p.result = Dechunk(in.substr(body_at), max_body, &out->body, &used);
    if (p.result == Http1Parse::kComplete) p.consumed = body_at + used;
    return p;
  }
  size_t length = 0;
  // Several Content-Length headers must agree (as Go's server checks them).
  const std::string* first_length = out->Header("content-length");
  for (const auto& [name, value] : out->headers) {
    if (name == "content-length" && Trim(value) != Trim(*first_length)) {
      p.result = Http1Parse::kBadRequest;
      return p;
    }
  }
  if (const std::string* cl = first_length) {
    const auto n = ParseSize(*cl, 10);
    if (!n) {
      p.result = Http1Parse::kBadRequest;
      return p;
    }
    length = *n;
  }
  if (length > max_body) {
    p.result = Http1Parse::kBodyTooLarge;
    return p;
  }
  if (in.size() - body_at < length) return p;  // kIncomplete
  out->body = std::string(in.substr(body_at, length));
  p.result = Http1Parse::kComplete;
  p.consumed = body_at + length;
  return p;
}

}  // namespace etcdw::client_api
