#include "etcdw/common/flags.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "etcdw/common/config.h"

namespace etcdw::common {

bool ParseGoDuration(const std::string& text, std::chrono::milliseconds* out) {
  if (text == "0") {
    *out = std::chrono::milliseconds(0);
    return true;
  }
  if (text.empty() || text.find_first_not_of("0123456789") == std::string::npos) return false;
  std::string s = text;
  bool neg = false;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    s = s.substr(1);
  }
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
bool ParseGoInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  std::string t;
  for (char c : s) {
    if (c != '_') t.push_back(c);
  }
  size_t i = 0;
  bool neg = false;
  if (t[0] == '-' || t[0] == '+') {
    neg = t[0] == '-';
    i = 1;
  }
  int base = 10;
  if (t.size() > i + 1 && t[i] == '0' && (t[i + 1] == 'x' || t[i + 1] == 'X')) base = 16, i += 2;
  else if (t.size() > i + 1 && t[i] == '0' && (t[i + 1] == 'b' || t[i + 1] == 'B')) base = 2, i += 2;
  else if (t.size() > i + 1 && t[i] == '0' && (t[i + 1] == 'o' || t[i + 1] == 'O')) base = 8, i += 2;
  else if (t.size() > i + 1 && t[i] == '0') base = 8, i += 1;
  if (i >= t.size()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str() + i, &end, base);
  if (errno != 0 || *end != '\0' || t[i] == '-' || t[i] == '+') return false;
  *out = neg ? -v : v;
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
                        if (!ParseGoInt(v, &x)) {
                          *err = "parse error";
                          return false;
                        }
                        *target = x;
                        return true;
                      }};
}

void FlagSet::Bool(const std::string& name, bool* target, bool def, const std::string& usage) {
  *target = def;
  flags_[name] = Flag{"", usage, def ? "true" : "", true,
                      [target](const std::string& v, std::string* err) {
                        // strconv.ParseBool
                        if (v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True") {
                          *target = true;
                        } else if (v == "0" || v == "f" || v == "F" || v == "false" ||
                                   v == "FALSE" || v == "False") {
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
    set_.insert(name);
  }
  r.positional.assign(args.begin() + static_cast<long>(i), args.end());
  return r;
}

std::string FlagSet::Usage() const {
  std::ostringstream out;
  for (const auto& [name, f] : flags_) {
    out << "  -" << name;
    if (!f.type.empty()) out << " " << f.type;
    out << "\n    \t" << f.usage;
    if (!f.def_text.empty()) out << " (default " << f.def_text << ")";
    out << "\n";
  }
  return out.str();
}

}  // namespace etcdw::common
