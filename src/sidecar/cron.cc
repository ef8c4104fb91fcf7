#include "etcdw/sidecar/cron.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "local_time.h"

namespace etcdw::sidecar {
namespace {

struct Bounds {
  const char* field;
  uint32_t min, max;
  const char* const* names;  // names[i] stands for first_named + i; nullptr-terminated, or null
  uint32_t first_named;
};

constexpr const char* kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",  "jul",
                                       "aug", "sep", "oct", "nov", "dec", nullptr};
constexpr const char* kDowNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat", nullptr};

constexpr Bounds kMinute{"minute", 0, 59, nullptr, 0};
constexpr Bounds kHour{"hour", 0, 23, nullptr, 0};
constexpr Bounds kDom{"day-of-month", 1, 31, nullptr, 0};
constexpr Bounds kMonth{"month", 1, 12, kMonthNames, 1};
constexpr Bounds kDow{"day-of-week", 0, 6, kDowNames, 0};

uint64_t Bits(uint32_t lo, uint32_t hi, uint32_t step = 1) {
  uint64_t b = 0;
  for (uint32_t i = lo; i <= hi; i += step) b |= uint64_t{1} << i;
  return b;
}
uint64_t All(const Bounds& b) { return Bits(b.min, b.max); }

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? p : p - start));
    if (p == std::string_view::npos) return out;
    start = p + 1;
  }
}

std::vector<std::string_view> Fields(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (i < s.size()) {
    while (i < s.size() && space(s[i])) ++i;
    size_t start = i;
    while (i < s.size() && !space(s[i])) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

Status FieldError(const Bounds& b, const std::string& what) {
  return InvalidArgument(std::string(b.field) + ": " + what);
}

// A non-negative decimal integer as Go's strconv.Atoi reads it (optional sign, no spaces).
Result<uint32_t> ParseNumber(std::string_view s, const Bounds& b) {
  std::string_view digits = s;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty()) return FieldError(b, Quote(s) + " is not a number");
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return FieldError(b, Quote(s) + " is not a number");
    v = v * 10 + static_cast<uint64_t>(c - '0');
    if (v > 0xFFFFFFFFu) return FieldError(b, Quote(s) + " is too large");
  }
  if (negative && v != 0) return FieldError(b, Quote(s) + " is negative");
  return static_cast<uint32_t>(v);
}

Result<uint32_t> ParseValue(std::string_view s, const Bounds& b) {
  if (b.names != nullptr) {
    std::string lower(s);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (uint32_t i = 0; b.names[i] != nullptr; ++i) {
      if (lower == b.names[i]) return b.first_named + i;
    }
  }
  return ParseNumber(s, b);
}

// One comma-separated element: "*" | "?" | v | v-w, each optionally followed by "/step".
// `star` is set when the element is an unstepped (or /1) wildcard.
Result<uint64_t> ParseRange(std::string_view expr, const Bounds& b, bool* star) {
  std::vector<std::string_view> range_step = Split(expr, '/');
  if (range_step.size() > 2) return FieldError(b, "too many slashes in " + Quote(expr));
  std::vector<std::string_view> lo_hi = Split(range_step[0], '-');
  uint32_t lo, hi, step = 1;
  bool wildcard = false;
  if (lo_hi[0] == "*" || lo_hi[0] == "?") {
    if (lo_hi.size() > 1) return FieldError(b, "a wildcard cannot start a range: " + Quote(expr));
    wildcard = true;
    lo = b.min;
    hi = b.max;
  } else {
    if (lo_hi.size() > 2) return FieldError(b, "too many hyphens in " + Quote(expr));
    ETCDW_ASSIGN_OR_RETURN(lo, ParseValue(lo_hi[0], b));
    hi = lo;
    if (lo_hi.size() == 2) {
      ETCDW_ASSIGN_OR_RETURN(hi, ParseValue(lo_hi[1], b));
    }
  }
  if (range_step.size() == 2) {
    ETCDW_ASSIGN_OR_RETURN(step, ParseNumber(range_step[1], b));
    if (lo_hi.size() == 1) hi = b.max;  // "v/step" means "v-max/step"
  }
  auto range = [&b] { return std::to_string(b.min) + "-" + std::to_string(b.max); };
  if (lo < b.min) return FieldError(b, std::to_string(lo) + " out of range " + range());
  if (hi > b.max) return FieldError(b, std::to_string(hi) + " out of range " + range());
  if (lo > hi) {
    return FieldError(b, "range " + Quote(expr) + " starts (" + std::to_string(lo) +
                             ") beyond its end (" + std::to_string(hi) + ")");
  }
  if (step == 0) return FieldError(b, "step must be positive in " + Quote(expr));
  if (wildcard && step == 1) *star = true;
  return Bits(lo, hi, step);
}

// A field: comma-separated ranges. An empty field or element is an error (robfig would silently
// produce an empty set, a schedule that never fires).
Result<uint64_t> ParseField(std::string_view field, const Bounds& b, bool* star) {
  uint64_t bits = 0;
  *star = false;
  for (std::string_view expr : Split(field, ',')) {
    if (expr.empty()) return FieldError(b, "empty element in " + Quote(field));
    ETCDW_ASSIGN_OR_RETURN(uint64_t r, ParseRange(expr, b, star));
    bits |= r;
  }
  return bits;
}

// Go's time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+ or "0", in nanoseconds.
Result<int64_t> ParseGoDuration(std::string_view orig) {
  auto invalid = [&orig](const char* why) {
    return InvalidArgument(std::string(why) + " in duration " + Quote(orig));
  };
  constexpr uint64_t kLimit = uint64_t{1} << 63;
  std::string_view s = orig;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return int64_t{0};
  if (s.empty()) return invalid("no number");
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  uint64_t total = 0;
  while (!s.empty()) {
    if (s[0] != '.' && !is_digit(s[0])) return invalid("expected a number");
    uint64_t v = 0;
    size_t i = 0;
    for (; i < s.size() && is_digit(s[i]); ++i) {
      if (v > kLimit / 10) return invalid("overflow");
      v = v * 10 + static_cast<uint64_t>(s[i] - '0');
      if (v > kLimit) return invalid("overflow");
    }
    bool pre = i > 0;
    s.remove_prefix(i);
    uint64_t frac = 0;
    double scale = 1;
    bool post = false;
    if (!s.empty() && s[0] == '.') {
      s.remove_prefix(1);
      bool overflow = false;
      for (i = 0; i < s.size() && is_digit(s[i]); ++i) {
        if (overflow) continue;
        if (frac > (kLimit - 1) / 10) {
          overflow = true;
          continue;
        }
        frac = frac * 10 + static_cast<uint64_t>(s[i] - '0');
        scale *= 10;
      }
      post = i > 0;
      s.remove_prefix(i);
    }
    if (!pre && !post) return invalid("expected a number");
    for (i = 0; i < s.size() && s[i] != '.' && !is_digit(s[i]); ++i) {
    }
    if (i == 0) return invalid("missing unit");
    std::string_view u = s.substr(0, i);
    s.remove_prefix(i);
    uint64_t unit;
    if (u == "ns") {
      unit = 1;
    } else if (u == "us" || u == "\xC2\xB5s" || u == "\xCE\xBCs") {
      unit = 1000;
    } else if (u == "ms") {
      unit = 1000000;
    } else if (u == "s") {
      unit = 1000000000;
    } else if (u == "m") {
      unit = 60000000000;
    } else if (u == "h") {
      unit = 3600000000000;
    } else {
      return invalid(("unknown unit " + Quote(u)).c_str());
    }
    if (v > kLimit / unit) return invalid("overflow");
    v *= unit;
    if (frac > 0) {
      v += static_cast<uint64_t>(static_cast<double>(frac) * (static_cast<double>(unit) / scale));
      if (v > kLimit) return invalid("overflow");
    }
    total += v;
    if (total > kLimit) return invalid("overflow");
  }
  if (neg) return static_cast<int64_t>(0 - total);
  if (total > kLimit - 1) return invalid("overflow");
  return static_cast<int64_t>(total);
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

Result<CronSchedule> CronSchedule::Parse(std::string_view spec) {
  CronSchedule s;
  s.spec_ = std::string(spec);
  if (spec.empty()) return InvalidArgument("empty cron spec");
  if (spec.substr(0, 3) == "TZ=" || spec.substr(0, 8) == "CRON_TZ=") {
    return InvalidArgument("cron spec " + Quote(spec) +
                           ": time zone prefixes are not supported (local time is used)");
  }
  if (spec[0] == '@') {
    constexpr std::string_view kEvery = "@every ";
    if (spec.substr(0, kEvery.size()) == kEvery) {
      Result<int64_t> d = ParseGoDuration(spec.substr(kEvery.size()));
      if (!d.ok()) return InvalidArgument("@every: " + d.status().message());
      // robfig: at least one second, whole seconds only.
      s.every_ = std::chrono::seconds(std::max<int64_t>(*d, 1000000000) / 1000000000);
      return s;
    }
    s.minute_ = Bits(0, 0);
    s.hour_ = Bits(0, 0);
    s.dom_ = All(kDom);
    s.month_ = All(kMonth);
    s.dow_ = All(kDow);
    s.dom_star_ = s.dow_star_ = true;
    if (spec == "@yearly" || spec == "@annually") {
      s.dom_ = Bits(1, 1);
      s.dom_star_ = false;
      s.month_ = Bits(1, 1);
    } else if (spec == "@monthly") {
      s.dom_ = Bits(1, 1);
      s.dom_star_ = false;
    } else if (spec == "@weekly") {
      s.dow_ = Bits(0, 0);
      s.dow_star_ = false;
    } else if (spec == "@hourly") {
      s.hour_ = All(kHour);
    } else if (spec != "@daily" && spec != "@midnight") {
      return InvalidArgument("unrecognized cron descriptor " + Quote(spec));
    }
    return s;
  }
  std::vector<std::string_view> f = Fields(spec);
  if (f.size() != 5) {
    return InvalidArgument("cron spec " + Quote(spec) + ": expected exactly 5 fields, found " +
                           std::to_string(f.size()));
  }
  bool star;
  ETCDW_ASSIGN_OR_RETURN(s.minute_, ParseField(f[0], kMinute, &star));
  ETCDW_ASSIGN_OR_RETURN(s.hour_, ParseField(f[1], kHour, &star));
  ETCDW_ASSIGN_OR_RETURN(s.dom_, ParseField(f[2], kDom, &s.dom_star_));
  ETCDW_ASSIGN_OR_RETURN(s.month_, ParseField(f[3], kMonth, &star));
  ETCDW_ASSIGN_OR_RETURN(s.dow_, ParseField(f[4], kDow, &s.dow_star_));
  return s;
}

std::optional<std::chrono::system_clock::time_point> CronSchedule::Next(
    std::chrono::system_clock::time_point t) const {
  using std::chrono::nanoseconds;
  using std::chrono::seconds;
  using std::chrono::system_clock;
  int64_t ns = std::chrono::duration_cast<nanoseconds>(t.time_since_epoch()).count();
  int64_t sec = FloorDiv(ns, 1000000000);
  auto at = [](int64_t unix) { return std::chrono::system_clock::time_point(seconds(unix)); };
  if (every_.count() > 0) {
    // Beyond what a time_point holds (year 2262) counts as never.
    const int64_t max_sec =
        std::chrono::duration_cast<seconds>(system_clock::time_point::max().time_since_epoch())
            .count();
    if (sec > max_sec - every_.count()) return std::nullopt;
    return at(sec + every_.count());
  }

  // robfig's search, field by field from the month down, in local time. Once a field has been
  // advanced ("added"), the fields below it start from their minimum; when a field wraps around,
  // the search restarts from the month, since the fields above it have changed.
  int64_t u = sec + 1;  // the earliest candidate: the next whole second
  LocalFields c = ToLocalFields(u);
  auto set = [&](int64_t v) {
    u = v;
    c = ToLocalFields(u);
  };
  bool added = false;
  const int year_limit = c.year + 5;
  auto bit = [](uint64_t bits, int v) { return (bits >> v & 1) != 0; };
  auto day_matches = [&] {
    bool dom = bit(dom_, c.day), dow = bit(dow_, c.weekday);
    return dom_star_ || dow_star_ ? dom && dow : dom || dow;
  };
wrap:
  if (c.year > year_limit) return std::nullopt;
  while (!bit(month_, c.month)) {
    if (!added) {
      added = true;
      set(FromLocalFields(c.year, c.month, 1, 0, 0, 0));
    }
    set(FromLocalFields(c.year, c.month + 1, c.day, c.hour, c.minute, c.second));
    if (c.month == 1) goto wrap;
  }
  while (!day_matches()) {
    if (!added) {
      added = true;
      set(FromLocalFields(c.year, c.month, c.day, 0, 0, 0));
    }
    set(FromLocalFields(c.year, c.month, c.day + 1, c.hour, c.minute, c.second));
    // Where a DST change moved midnight, step back onto it.
    if (c.hour != 0) {
      set(c.hour > 12 ? u + int64_t{24 - c.hour} * 3600 : u - int64_t{c.hour} * 3600);
    }
    if (c.day == 1) goto wrap;
  }
  while (!bit(hour_, c.hour)) {
    if (!added) {
      added = true;
      set(FromLocalFields(c.year, c.month, c.day, c.hour, 0, 0));
    }
    set(u + 3600);
    if (c.hour == 0) goto wrap;
  }
  while (!bit(minute_, c.minute)) {
    if (!added) {
      added = true;
      set(FloorDiv(u, 60) * 60);
    }
    set(u + 60);
    if (c.minute == 0) goto wrap;
  }
  while (c.second != 0) {  // the standard parser's seconds field is always "0"
    added = true;
    set(u + 1);
    if (c.second == 0) goto wrap;
  }
  return at(u);
}

int CronSchedule::WindowHours() const {
  constexpr int kDefault = 24;
  std::vector<std::string_view> f = Fields(spec_);
  if (f.size() < 5) return kDefault;
  if (f[4] != "*") return kDefault * 7;
  size_t slash = f[1].find('/');
  if (f[2] == "*" && slash != std::string_view::npos) {
    std::string_view n = f[1].substr(slash + 1);
    Result<uint32_t> v = ParseNumber(n, kHour);
    if (v.ok() && *v > 0) return static_cast<int>(*v);
  }
  return kDefault;
}

}  // namespace etcdw::sidecar
