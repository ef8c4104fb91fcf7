#include "etcdw/common/flags.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string_view>

#include "etcdw/common/config.h"
#include "etcdw/common/url.h"

namespace etcdw::common {

bool ParseGoDuration(const std::string& text, std::chrono::milliseconds* out) {
  // time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+ or a bare [-+]?0.
  std::string s = text;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s = s.substr(1);
  }
  if (s == "0") {
    *out = std::chrono::milliseconds(0);
    return true;
  }
  // A unit is required otherwise; ParseDuration would read bare digits in its own unit, and
  // it trims blanks, which Go does not accept.
  if (s.empty() || s.find_first_not_of("0123456789") == std::string::npos) return false;
  if (Trim(s).size() != s.size()) return false;
  auto d = ParseDuration(s, std::chrono::milliseconds(1));
  if (!d.ok()) return false;
  *out = neg ? -d.value() : d.value();
  return true;
}

std::string FormatGoDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string sign = ms < 0 ? "-" : "";
  if (ms < 0) ms = -ms;
  if (ms < 1000) return sign + std::to_string(ms) + "ms";
  int64_t h = ms / 3600000, m = (ms / 60000) % 60, s = (ms / 1000) % 60, frac = ms % 1000;
  std::string secs = std::to_string(s);
  if (frac) {
    char buf[8];
    std::snprintf(buf, sizeof buf, ".%03lld", static_cast<long long>(frac));
    std::string f = buf;
    while (f.back() == '0') f.pop_back();
    secs += f;
  }
  std::string out = sign;
  if (h) out += std::to_string(h) + "h";
  if (h || m) out += std::to_string(m) + "m";
  return out + secs + "s";
}

namespace {

const char kParseError[] = "parse error";
const char kRangeError[] = "value out of range";

// Go's underscoreOK: underscores may only separate digits, or a base prefix and a digit.
bool UnderscoresOk(std::string_view s) {
  char saw = '^';  // ^ start, 0 digit or base prefix, _ underscore, ! anything else
  size_t i = 0;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  bool hex = false;
  if (s.size() >= 2 && s[0] == '0') {
    char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[1])));
    if (p == 'b' || p == 'o' || p == 'x') {
      i = 2;
      saw = '0';
      hex = p == 'x';
    }
  }
  for (; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isdigit(c) || (hex && std::isxdigit(c))) {
      saw = '0';
    } else if (c == '_') {
      if (saw != '0') return false;
      saw = '_';
    } else {
      if (saw == '_') return false;
      saw = '!';
    }
  }
  return saw != '_';
}

// strconv.ParseInt(s, 0, 64): optional sign, base from the prefix (0x, 0o, 0b, or 0 for
// octal), underscores between digits. On failure `err` is Go's flag error text.
bool ParseGoInt(const std::string& s, int64_t* out, std::string* err) {
  *err = kParseError;
  size_t i = 0;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    i = 1;
  }
  uint64_t base = 10;
  bool digits_seen = false;  // the "0" of an octal prefix is itself a digit
  if (s.size() > i + 1 && s[i] == '0') {
    char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i + 1])));
    if (p == 'x' || p == 'o' || p == 'b') {
      base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      i += 2;
    } else {
      base = 8;
      i += 1;
      digits_seen = true;
    }
  }
  if (!UnderscoresOk(s)) return false;
  const uint64_t limit = neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  uint64_t v = 0;
  bool overflow = false;
  for (; i < s.size(); ++i) {
    if (s[i] == '_') continue;
    unsigned char c = static_cast<unsigned char>(s[i]);
    uint64_t d;
    if (std::isdigit(c))
      d = c - '0';
    else if (std::isalpha(c))
      d = static_cast<uint64_t>(std::tolower(c) - 'a') + 10;
    else
      return false;
    if (d >= base) return false;
    digits_seen = true;
    if (v > (limit - d) / base)
      overflow = true;
    else
      v = v * base + d;
  }
  if (!digits_seen) return false;
  if (overflow) {
    *err = kRangeError;
    return false;
  }
  *out = neg ? static_cast<int64_t>(~v + 1) : static_cast<int64_t>(v);
  return true;
}

}  // namespace

void FlagSet::String(const std::string& name, std::string* target, const std::string& def,
                     const std::string& usage) {
  *target = def;
  flags_[name] = Flag{"string", usage, def.empty() ? "" : "\"" + def + "\"", false,
                      [target](const std::string& v, std::string*) {
                        *target = v;
                        return true;
                      }};
}

void FlagSet::Int(const std::string& name, int64_t* target, int64_t def, const std::string& usage) {
  *target = def;
  flags_[name] = Flag{"int", usage, def == 0 ? "" : std::to_string(def), false,
                      [target](const std::string& v, std::string* err) {
                        int64_t x;
                        if (!ParseGoInt(v, &x, err)) return false;
                        *target = x;
                        return true;
                      }};
}

void FlagSet::Bool(const std::string& name, bool* target, bool def, const std::string& usage) {
  *target = def;
  flags_[name] =
      Flag{"", usage, def ? "true" : "", true, [target](const std::string& v, std::string* err) {
             // strconv.ParseBool
             if (v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True") {
               *target = true;
             } else if (v == "0" || v == "f" || v == "F" || v == "false" || v == "FALSE" ||
                        v == "False") {
               *target = false;
             } else {
               *err = "parse error";
               return false;
             }
             return true;
           }};
}

void FlagSet::Duration(const std::string& name, std::chrono::milliseconds* target,
                       std::chrono::milliseconds def, const std::string& usage) {
  *target = def;
  flags_[name] = Flag{"duration", usage, def.count() == 0 ? "" : FormatGoDuration(def), false,
                      [target](const std::string& v, std::string* err) {
                        std::chrono::milliseconds d;
                        if (!ParseGoDuration(v, &d)) {
                          *err = "parse error";
                          return false;
                        }
                        *target = d;
                        return true;
                      }};
}

void FlagSet::StringList(const std::string& name, std::vector<std::string>* target,
                         const std::vector<std::string>& def, ListSyntax syntax,
                         const std::string& usage) {
  *target = def;
  std::string def_text;
  for (const auto& d : def) def_text += (def_text.empty() ? "" : ",") + d;
  // `given` is shared by the setter's copies: whether this Parse has replaced the default yet.
  auto given = std::make_shared<bool>(false);
  flags_[name] = Flag{"strings", usage, def.empty() ? "" : "[" + def_text + "]", false,
                      [target, syntax, given](const std::string& v, std::string*) {
                        if (!*given) target->clear();
                        *given = true;
                        if (syntax == ListSyntax::kWhole) {
                          target->push_back(v);
                          return true;
                        }
                        std::stringstream items(v);
                        std::string item;
                        while (std::getline(items, item, ',')) {
                          if (!item.empty()) target->push_back(item);
                        }
                        return true;
                      }};
}

void FlagSet::Shorthand(const std::string& letter, const std::string& name) {
  Flag f = flags_.at(name);  // shares the setter, and with it a list's state
  f.usage = "shorthand for --" + name;
  f.shorthand_of = name;
  flags_[letter] = std::move(f);
}

FlagSet::ParseResult FlagSet::Parse(const std::vector<std::string>& args) {
  ParseResult r;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-') break;  // first non-flag argument
    size_t dashes = a[1] == '-' ? 2 : 1;
    if (dashes == 2 && a.size() == 2) {  // "--" terminates
      ++i;
      break;
    }
    std::string body = a.substr(dashes);
    if (body.empty() || body[0] == '-' || body[0] == '=') {
      r.outcome = Outcome::kError;
      r.error = "bad flag syntax: " + a;
      return r;
    }
    std::string name = body, value;
    bool has_value = false;
    size_t eq = body.find('=');
    if (eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      if (name == "help" || name == "h") {
        r.outcome = Outcome::kHelp;
        return r;
      }
      r.outcome = Outcome::kError;
      r.error = "flag provided but not defined: -" + name;
      return r;
    }
    Flag& f = it->second;
    std::string err;
    if (f.is_bool) {
      if (!f.set(has_value ? value : "true", &err)) {
        r.outcome = Outcome::kError;
        r.error = "invalid boolean value \"" + value + "\" for -" + name + ": " + err;
        return r;
      }
    } else {
      if (!has_value) {
        if (i + 1 >= args.size()) {
          r.outcome = Outcome::kError;
          r.error = "flag needs an argument: -" + name;
          return r;
        }
        value = args[++i];
      }
      if (!f.set(value, &err)) {
        r.outcome = Outcome::kError;
        r.error = "invalid value \"" + value + "\" for flag -" + name + ": " + err;
        return r;
      }
    }
    set_.insert(f.shorthand_of.empty() ? name : f.shorthand_of);
  }
  r.positional.assign(args.begin() + static_cast<long>(i), args.end());
  return r;
}

std::string FlagSet::Usage() const {
  std::ostringstream out;
  for (const auto& [name, f] : flags_) {
    std::string head = "  -" + name;
    if (!f.type.empty()) head += " " + f.type;
    out << head;
    // Go puts the usage of one-letter bool flags on the same line.
    out << (head.size() <= 4 ? "\t" : "\n    \t");
    for (char c : f.usage) {
      out << c;
      if (c == '\n') out << "    \t";
    }
    if (!f.def_text.empty()) out << " (default " << f.def_text << ")";
    out << "\n";
  }
  return out.str();
}

}  // namespace etcdw::common
