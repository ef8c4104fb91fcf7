// Command-line flags with the semantics of Go's `flag` package, which gardener's etcd-wrapper
// and etcd-backup-restore use, so that the same argument lists behave the same way:
//   -name value, -name=value, --name value, --name=value
//   bools: -flag (true) or -flag=true|false; "-flag false" does NOT set false
//   parsing stops at "--" or at the first non-flag argument
//   -h / -help / --help: usage requested
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace etcdw::common {

class FlagSet {
 public:
  explicit FlagSet(std::string program) : program_(std::move(program)) {}

  void String(const std::string& name, std::string* target, const std::string& def,
              const std::string& usage);
  void Int(const std::string& name, int64_t* target, int64_t def, const std::string& usage);
  void Bool(const std::string& name, bool* target, bool def, const std::string& usage);
  // Go duration syntax ("30s", "2m0s"); a bare integer other than 0 is rejected.
  void Duration(const std::string& name, std::chrono::milliseconds* target,
                std::chrono::milliseconds def, const std::string& usage);
  // A list flag as pflag's (cobra's) StringSlice and StringArray are: the first occurrence
  // replaces the default, each later one appends. kCommaSeparated splits every value at commas
  // and drops empty items (StringSlice); kWhole keeps each value as one item (StringArray).
  enum class ListSyntax { kCommaSeparated, kWhole };
  void StringList(const std::string& name, std::vector<std::string>* target,
                  const std::vector<std::string>& def, ListSyntax syntax, const std::string& usage);
  // pflag's one-letter shorthand: `-e x` sets the flag `name` (registered before), and
  // IsSet(name) reports it.
  void Shorthand(const std::string& letter, const std::string& name);

  enum class Outcome { kOk, kHelp, kError };
  struct ParseResult {
    Outcome outcome = Outcome::kOk;
    std::string error;                    // set for kError, Go's wording
    std::vector<std::string> positional;  // arguments after the flags
  };
  ParseResult Parse(const std::vector<std::string>& args);

  // "  -name type\n    \tusage (default ...)" lines, sorted by name, as Go prints them.
  std::string Usage() const;
  // Whether the command line gave the flag (by its name or its shorthand).
  bool IsSet(const std::string& name) const { return set_.count(name) > 0; }

 private:
  struct Flag {
    std::string type;  // "string", "int", "bool", "duration", "strings"
    std::string usage;
    std::string def_text;
    bool is_bool = false;
    std::function<bool(const std::string&, std::string* err)> set;
    std::string shorthand_of;  // for a shorthand, the flag it sets
  };
  std::string program_;
  std::map<std::string, Flag> flags_;
  std::set<std::string> set_;
};

// Parses a Go duration for flags (strict: a unit is required except for "0").
bool ParseGoDuration(const std::string& text, std::chrono::milliseconds* out);
// Formats like Go's Duration.String(): "0s", "1.5s", "2m0s", "1h0m0s".
std::string FormatGoDuration(std::chrono::milliseconds d);

}  // namespace etcdw::common
