#include "etcdw/common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>

namespace etcdw::log {

namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};

// The spdlog logger writes preformatted lines; spdlog provides the locking and the sink.
spdlog::logger& Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto l = std::make_shared<spdlog::logger>("etcdw", sink);
    l->set_pattern("%v");
    l->set_level(spdlog::level::trace);
    l->flush_on(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

const char* LevelName(Level l) {
  switch (l) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
    case Level::kOff:
      return "off";
  }
  return "info";
}

void AppendTimestamp(std::string& out) {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::time_point_cast<std::chrono::seconds>(now);
  int ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now - secs).count());
  std::time_t t = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  out += buf;
}

std::string_view ShortFile(std::string_view path) {
  // Keep "<dir>/<file>" like zap's short caller.
  size_t last = path.rfind('/');
  if (last == std::string_view::npos || last == 0) return path;
  size_t prev = path.rfind('/', last - 1);
  return prev == std::string_view::npos ? path : path.substr(prev + 1);
}

}  // namespace

Result<Level> ParseLevel(std::string_view name) {
  // zap accepts each name in lower or upper case (and tries lower case as a fallback).
  std::string n(name);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "debug") return Level::kDebug;
  if (n == "info" || n.empty()) return Level::kInfo;
  if (n == "warn" || n == "warning") return Level::kWarn;
  if (n == "error" || n == "dpanic" || n == "panic" || n == "fatal") return Level::kError;
  return InvalidArgument("unknown log level '" + std::string(name) +
                         "' (want debug, info, warn, error, dpanic, panic or fatal)");
}

namespace {

// Length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or 0 if there is none.
size_t Utf8SequenceLength(std::string_view s) {
  auto byte = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = byte(0);
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong below U+0800
    if (c == 0xED) hi = 0x9F;  // surrogates U+D800..U+DFFF
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong below U+10000
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < len || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
  }
  return len;
}

// JSON's two-character escapes of control characters (as Go's encoder writes them), or null.
const char* ShortEscape(unsigned char c) {
  switch (c) {
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      return nullptr;
  }
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (const char* escape = ShortEscape(c)) {
      out += escape;
      ++i;
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (size_t len = c >= 0x80 ? Utf8SequenceLength(s.substr(i)) : 0; len > 0) {
      // A well-formed sequence is copied.
      out.append(s.substr(i, len));
      i += len;
    } else {
      // Other control characters, DEL, and bytes of no well-formed sequence, one at a time.
      out += "\\u00";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
      ++i;
    }
  }
  out.push_back('"');
}

Field F(std::string_view key, std::string_view value) {
  Field f{std::string(key), {}};
  AppendJsonString(f.json, value);
  return f;
}
Field F(std::string_view key, const char* value) { return F(key, std::string_view(value)); }
Field F(std::string_view key, const std::string& value) { return F(key, std::string_view(value)); }
Field F(std::string_view key, int64_t value) { return {std::string(key), std::to_string(value)}; }
Field F(std::string_view key, uint64_t value) { return {std::string(key), std::to_string(value)}; }
Field F(std::string_view key, int value) { return {std::string(key), std::to_string(value)}; }
Field F(std::string_view key, unsigned value) { return {std::string(key), std::to_string(value)}; }
Field F(std::string_view key, bool value) { return {std::string(key), value ? "true" : "false"}; }
Field F(std::string_view key, double value) {
  // JSON has no NaN or infinities; zap writes them as these strings.
  if (std::isnan(value)) return {std::string(key), "\"NaN\""};
  if (std::isinf(value)) return {std::string(key), value > 0 ? "\"+Inf\"" : "\"-Inf\""};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", value);
  return {std::string(key), buf};
}
Field F(std::string_view key, const Status& status) { return F(key, status.ToString()); }
Field Hex(std::string_view key, uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"%016llx\"", static_cast<unsigned long long>(id));
  return {std::string(key), buf};
}

void SetLevel(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
Level GetLevel() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }
bool Enabled(Level level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void Write(Level level, std::string_view msg, std::initializer_list<Field> fields,
           const SourceLocation& loc) {
  std::string line;
  line.reserve(128 + msg.size());
  line += "{\"level\":\"";
  line += LevelName(level);
  line += "\",\"ts\":\"";
  AppendTimestamp(line);
  line += "\",\"caller\":\"";
  line += ShortFile(loc.file_name());
  line += ':';
  line += std::to_string(loc.line());
  line += "\",\"msg\":";
  AppendJsonString(line, msg);
  for (const Field& f : fields) {
    line.push_back(',');
    AppendJsonString(line, f.key);
    line.push_back(':');
    line += f.json;
  }
  line.push_back('}');
  Logger().log(spdlog::level::info, line);
}

}  // namespace etcdw::log
