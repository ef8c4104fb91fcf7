#include "etcdw/sidecar/snapshot.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>

namespace etcdw::sidecar {
namespace {

using std::chrono::system_clock;

constexpr std::string_view kFinalToken = "final";

// Whole seconds since the Unix epoch, rounded towards negative infinity (Go's Time.Unix()).
int64_t UnixSeconds(system_clock::time_point t) {
  return std::chrono::floor<std::chrono::seconds>(t).time_since_epoch().count();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

// A non-negative decimal number of digits only (no sign, no spaces) that fits in int64.
bool ParseDecimal(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    int d = c - '0';
    if (v > (std::numeric_limits<int64_t>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// The largest Unix time (seconds) whose nanosecond count still fits a system_clock time_point.
constexpr int64_t kMaxUnixSeconds = std::numeric_limits<int64_t>::max() / 1000000000;

// Go's time.Time JSON encoding (RFC 3339 with nanoseconds, trailing zeros of the fraction
// trimmed, fraction omitted when zero) of a UTC time. The zero time_point stands for Go's zero
// time.Time and is rendered as Go renders that: "0001-01-01T00:00:00Z".
std::string FormatGoTime(system_clock::time_point t) {
  if (t == system_clock::time_point{}) return "0001-01-01T00:00:00Z";
  namespace chr = std::chrono;
  auto ns = chr::time_point_cast<chr::nanoseconds>(t);
  auto day = chr::floor<chr::days>(ns);
  chr::year_month_day ymd{day};
  auto in_day = ns - day;
  auto h = chr::duration_cast<chr::hours>(in_day);
  auto m = chr::duration_cast<chr::minutes>(in_day - h);
  auto s = chr::duration_cast<chr::seconds>(in_day - h - m);
  int64_t frac = (in_day - h - m - s).count();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(h.count()), static_cast<int>(m.count()),
                static_cast<int>(s.count()));
  std::string out = buf;
  if (frac != 0) {
    char fbuf[16];
    std::snprintf(fbuf, sizeof(fbuf), ".%09" PRId64, frac);
    std::string f = fbuf;
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  out += 'Z';
  return out;
}

// The length of the UTF-8 sequence at the start of `s` when it is one Go's utf8.DecodeRune
// accepts (shortest form, no surrogate, at most U+10FFFF), else 0.
size_t ValidSequenceLength(std::string_view s) {
  const auto b = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80;  // the range of the second byte
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // shorter forms are overlong
    if (c == 0xED) hi = 0x9F;  // U+D800-U+DFFF are surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  }
  return n;
}

// `s` as Go's encoding/json writes a string that is not valid UTF-8: every byte that does not
// begin a valid sequence becomes U+FFFD, one for each such byte. Object names in a store (a
// file name in a local store, a key in a bucket) are bytes, while JSON text must be UTF-8.
std::string GoValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const size_t n = ValidSequenceLength(s);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      s.remove_prefix(1);
    } else {
      out.append(s.substr(0, n));
      s.remove_prefix(n);
    }
  }
  return out;
}

Status BadKey(std::string_view key, const std::string& why) {
  return InvalidArgument("invalid snapshot key \"" + std::string(key) + "\": " + why);
}

// Parses the object name "<Kind>-<start>-<last>-<unix seconds>[.<compression>][.final]" into
// `s` (kind, revisions, creation time, suffix, final flag).
Status ParseName(std::string_view key, std::string_view name, SnapshotInfo& s) {
  std::vector<std::string_view> tokens = Split(name, '-');
  if (tokens.size() != 4) {
    return BadKey(key, "name \"" + std::string(name) +
                           "\" is not <Kind>-<start revision>-<last revision>-<unix time>");
  }
  if (tokens[0] == "Full") {
    s.kind = SnapshotKind::kFull;
  } else if (tokens[0] == "Incr") {
    s.kind = SnapshotKind::kIncr;
  } else {
    return BadKey(
        key, "unknown snapshot kind \"" + std::string(tokens[0]) + "\" (expected Full or Incr)");
  }
  if (!ParseDecimal(tokens[1], &s.start_revision)) {
    return BadKey(key, "invalid start revision \"" + std::string(tokens[1]) + "\"");
  }
  if (!ParseDecimal(tokens[2], &s.last_revision)) {
    return BadKey(key, "invalid last revision \"" + std::string(tokens[2]) + "\"");
  }
  if (s.start_revision > s.last_revision) {
    return BadKey(key, "start revision " + std::to_string(s.start_revision) +
                           " is greater than last revision " + std::to_string(s.last_revision));
  }
  std::vector<std::string_view> parts = Split(tokens[3], '.');
  int64_t unix_seconds = 0;
  if (!ParseDecimal(parts[0], &unix_seconds) || unix_seconds > kMaxUnixSeconds) {
    return BadKey(key, "invalid creation time \"" + std::string(parts[0]) + "\"");
  }
  s.created_on = system_clock::time_point{std::chrono::seconds{unix_seconds}};
  // Suffix forms: "", ".final", ".<c>", ".<c>.final".
  if (parts.size() > 3 || (parts.size() == 3 && parts[2] != kFinalToken)) {
    return BadKey(key, "unexpected suffix \"" + std::string(tokens[3].substr(parts[0].size())) +
                           "\" (expected [.<compression>][.final])");
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].empty()) return BadKey(key, "empty suffix after '.'");
  }
  if (parts.size() >= 2 && parts.back() == kFinalToken) s.is_final = true;
  if (parts.size() >= 2 && parts[1] != kFinalToken) {
    s.compression_suffix = "." + std::string(parts[1]);
  }
  return Status::Ok();
}

bool SortLess(const SnapshotInfo& a, const SnapshotInfo& b) {
  if (a.last_revision != b.last_revision) return a.last_revision < b.last_revision;
  if (a.is_chunk != b.is_chunk) return !a.is_chunk;
  if (a.is_chunk) return false;  // two chunks: equivalent, input order kept
  return UnixSeconds(a.created_on) < UnixSeconds(b.created_on);
}

}  // namespace

const char* KindName(SnapshotKind k) { return k == SnapshotKind::kFull ? "Full" : "Incr"; }

std::string MakeSnapshotName(SnapshotKind kind, int64_t start_revision, int64_t last_revision,
                             system_clock::time_point created_on,
                             std::string_view compression_suffix, bool is_final) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s-%08" PRId64 "-%08" PRId64 "-%" PRId64, KindName(kind),
                start_revision, last_revision, UnixSeconds(created_on));
  std::string name = buf;
  name += compression_suffix;
  if (is_final) name += ".final";
  return name;
}

SnapshotInfo NewSnapshot(SnapshotKind kind, int64_t start_revision, int64_t last_revision,
                         system_clock::time_point created_on, std::string_view compression_suffix,
                         bool is_final) {
  SnapshotInfo s;
  s.kind = kind;
  s.start_revision = start_revision;
  s.last_revision = last_revision;
  s.created_on = created_on;
  s.compression_suffix = std::string(compression_suffix);
  s.is_final = is_final;
  s.snap_name = MakeSnapshotName(kind, start_revision, last_revision, created_on,
                                 compression_suffix, is_final);
  return s;
}

Result<SnapshotInfo> ParseSnapshotKey(std::string_view key) {
  SnapshotInfo s;
  bool v1 = true;
  size_t pos = key.rfind("v1/");
  if (pos == std::string_view::npos) {
    v1 = false;
    pos = key.rfind("v2/");
  }
  if (pos == std::string_view::npos) {
    return BadKey(key, "no backup version directory (v1/ or v2/) in it");
  }
  s.prefix = std::string(key.substr(0, pos + 3));
  std::string_view rest = key.substr(pos + 3);
  std::vector<std::string_view> tokens = Split(rest, '/');
  std::string_view name;
  std::string_view part;
  if (v1) {
    // <snap dir>/<name>[/<part>]
    if (tokens.size() < 2 || tokens.size() > 3) {
      return BadKey(key, "a v1 key is " + s.prefix + "<snap dir>/<name>[/<part>]");
    }
    if (tokens[0].empty()) return BadKey(key, "empty snapshot directory");
    s.snap_dir = std::string(tokens[0]);
    name = tokens[1];
    if (tokens.size() == 3) part = tokens[2];
    s.is_chunk = tokens.size() == 3;
  } else {
    // <name>[/<part>]
    if (tokens.size() > 2) {
      return BadKey(key, "a v2 key is " + s.prefix + "<name>[/<part>]");
    }
    name = tokens[0];
    if (tokens.size() == 2) part = tokens[1];
    s.is_chunk = tokens.size() == 2;
  }
  if (s.is_chunk) {
    int64_t part_number = 0;
    if (!ParseDecimal(part, &part_number)) {
      return BadKey(key, "invalid chunk part number \"" + std::string(part) + "\"");
    }
  }
  ETCDW_RETURN_IF_ERROR(ParseName(key, name, s));
  s.snap_name = std::string(name);
  if (s.is_chunk) s.snap_name += "/" + std::string(part);
  return s;
}

std::string SnapshotKey(const SnapshotInfo& s) {
  std::string key = s.prefix;
  if (!s.snap_dir.empty()) key += s.snap_dir + "/";
  key += s.snap_name;
  return key;
}

nlohmann::json ToJson(const SnapshotInfo& s) {
  nlohmann::json j = nlohmann::json::object();
  j["createdOn"] = FormatGoTime(s.created_on);
  j["immutabilityExpriyTime"] = FormatGoTime(s.immutability_expiry_time);
  j["versionID"] =
      s.version_id ? nlohmann::json(GoValidUtf8(*s.version_id)) : nlohmann::json(nullptr);
  j["kind"] = KindName(s.kind);
  j["snapDir"] = GoValidUtf8(s.snap_dir);
  j["snapName"] = GoValidUtf8(s.snap_name);
  j["prefix"] = GoValidUtf8(s.prefix);
  j["compressionSuffix"] = GoValidUtf8(s.compression_suffix);
  j["startRevision"] = s.start_revision;
  j["lastRevision"] = s.last_revision;
  j["isChunk"] = s.is_chunk;
  j["isFinal"] = s.is_final;
  return j;
}

void SortSnapshots(std::vector<SnapshotInfo>& list) {
  std::stable_sort(list.begin(), list.end(), SortLess);
}

int64_t LatestSet::LastRevision() const {
  if (!deltas.empty()) return deltas.back().last_revision;
  if (full) return full->last_revision;
  return 0;
}

LatestSet FindLatestSet(const std::vector<SnapshotInfo>& sorted) {
  LatestSet set;
  for (auto it = sorted.rbegin(); it != sorted.rend(); ++it) {
    if (it->is_chunk) continue;
    if (it->kind == SnapshotKind::kFull) {
      set.full = *it;
      break;
    }
    set.deltas.push_back(*it);
  }
  std::reverse(set.deltas.begin(), set.deltas.end());
  SortSnapshots(set.deltas);
  return set;
}

nlohmann::json LatestSetJson(const LatestSet& set) {
  nlohmann::json j = nlohmann::json::object();
  j["fullSnapshot"] = set.full ? ToJson(*set.full) : nlohmann::json(nullptr);
  if (set.deltas.empty()) {
    j["deltaSnapshots"] = nullptr;
  } else {
    nlohmann::json arr = nlohmann::json::array();
    for (const SnapshotInfo& d : set.deltas) arr.push_back(ToJson(d));
    j["deltaSnapshots"] = std::move(arr);
  }
  return j;
}

}  // namespace etcdw::sidecar
