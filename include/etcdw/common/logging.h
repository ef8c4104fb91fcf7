// Structured logging: one JSON object per line on stderr, in the shape of zap's production
// encoder that gardener's tools emit ({"level","ts","caller","msg", fields...}), via spdlog.
//
//   log::Info("etcd server is ready", {log::F("listen", url), log::F("revision", rev)});
#pragma once

#include <cstdint>
#include <initializer_list>
#include <source_location>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace etcdw::log {

// Where a log call was made: std::source_location where the compiler provides it. libstdc++'s
// needs a builtin that clang gained only in version 15, so for clang 14 (which clang-tidy, run on
// this code, is) the same is built from the older builtins.
#if defined(__cpp_lib_source_location)
using SourceLocation = std::source_location;
#else
class SourceLocation {
 public:
  static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                          unsigned line = __builtin_LINE()) noexcept {
    SourceLocation loc;
    loc.file_ = file;
    loc.line_ = line;
    return loc;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr unsigned line() const noexcept { return line_; }

 private:
  const char* file_ = "";
  unsigned line_ = 0;
};
#endif

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Parses a zap/etcd level name: debug, info, warn, error, dpanic, panic, fatal (the last three
// are treated as error).
Result<Level> ParseLevel(std::string_view name);

// One extra JSON field; `json` holds the already-encoded value.
struct Field {
  std::string key;
  std::string json;
};
Field F(std::string_view key, std::string_view value);
Field F(std::string_view key, const char* value);
Field F(std::string_view key, const std::string& value);
Field F(std::string_view key, int64_t value);
Field F(std::string_view key, uint64_t value);
Field F(std::string_view key, int value);
Field F(std::string_view key, unsigned value);
Field F(std::string_view key, bool value);
Field F(std::string_view key, double value);
Field F(std::string_view key, const Status& status);  // rendered as {"error": "..."}-style string
// A 64-bit ID rendered as 16 hex digits, as etcd prints member and lease IDs.
Field Hex(std::string_view key, uint64_t id);

// Sets the minimum level. Thread-safe; may be called at any time.
void SetLevel(Level level);
Level GetLevel();
bool Enabled(Level level);

void Write(Level level, std::string_view msg, std::initializer_list<Field> fields,
           const SourceLocation& loc);

inline void Debug(std::string_view msg, std::initializer_list<Field> fields = {},
                  const SourceLocation& loc = SourceLocation::current()) {
  if (Enabled(Level::kDebug)) Write(Level::kDebug, msg, fields, loc);
}
inline void Info(std::string_view msg, std::initializer_list<Field> fields = {},
                 const SourceLocation& loc = SourceLocation::current()) {
  if (Enabled(Level::kInfo)) Write(Level::kInfo, msg, fields, loc);
}
inline void Warn(std::string_view msg, std::initializer_list<Field> fields = {},
                 const SourceLocation& loc = SourceLocation::current()) {
  if (Enabled(Level::kWarn)) Write(Level::kWarn, msg, fields, loc);
}
inline void Error(std::string_view msg, std::initializer_list<Field> fields = {},
                  const SourceLocation& loc = SourceLocation::current()) {
  if (Enabled(Level::kError)) Write(Level::kError, msg, fields, loc);
}

// Appends `s` to `out` as a JSON string literal (quotes included). Invalid UTF-8 bytes are
// escaped as \u00XX so every line stays valid JSON whatever the key bytes are.
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace etcdw::log
