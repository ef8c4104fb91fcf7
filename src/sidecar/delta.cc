#include "etcdw/sidecar/delta.h"

#include <time.h>

#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "etcdw/common/hash.h"

namespace etcdw::sidecar {
namespace {

constexpr size_t kHashSize = 32;
// Go's time.RFC3339Nano for a local time: fraction without trailing zeros (none when zero),
// "Z" for a zero UTC offset, else "+hh:mm".
std::string FormatRfc3339Nano(std::chrono::system_clock::time_point tp) {
  using std::chrono::duration_cast;
  using std::chrono::nanoseconds;
  int64_t ns = duration_cast<nanoseconds>(tp.time_since_epoch()).count();
  int64_t secs = ns / 1000000000;
  int64_t frac = ns % 1000000000;
  if (frac < 0) {
    frac += 1000000000;
    --secs;
  }
  time_t tt = static_cast<time_t>(secs);
  struct tm tm {};
  localtime_r(&tt, &tm);
  char buf[64];
  int n = std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  std::string out(buf, static_cast<size_t>(n));
  if (frac != 0) {
    std::snprintf(buf, sizeof(buf), ".%09lld", static_cast<long long>(frac));
    std::string f(buf);
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  long off = tm.tm_gmtoff;
  if (off == 0) {
    out += 'Z';
  } else {
    char sign = off < 0 ? '-' : '+';
    long a = off < 0 ? -off : off;
    std::snprintf(buf, sizeof(buf), "%c%02ld:%02ld", sign, a / 3600, (a / 60) % 60);
    out += buf;
  }
  return out;
}

// The shape Go's time.Time accepts from JSON: YYYY-MM-DDTHH:MM:SS[.digits](Z|±hh:mm).
bool IsRfc3339(std::string_view s) {
  auto digits = [&s](size_t pos, size_t n) {
    if (pos + n > s.size()) return false;
    for (size_t k = pos; k < pos + n; ++k) {
      if (s[k] < '0' || s[k] > '9') return false;
    }
    return true;
  };
  if (!digits(0, 4) || s.size() < 20 || s[4] != '-' || !digits(5, 2) || s[7] != '-' ||
      !digits(8, 2) || (s[10] != 'T' && s[10] != 't') || !digits(11, 2) || s[13] != ':' ||
      !digits(14, 2) || s[16] != ':' || !digits(17, 2)) {
    return false;
  }
  size_t i = 19;
  if (s[i] == '.') {
    size_t start = ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == start) return false;
  }
  std::string_view zone = s.substr(i);
  if (zone == "Z" || zone == "z") return true;
  return zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && digits(i + 1, 2) &&
         zone[3] == ':' && digits(i + 4, 2);
}

void AppendField(std::string* out, bool* first, const char* name) {
  if (!*first) out->push_back(',');
  *first = false;
  out->push_back('"');
  out->append(name);
  out->append("\":");
}

// mvccpb.KeyValue as Go's encoding/json writes it: struct field order, zero values omitted.
void AppendKeyValue(const mvccpb::KeyValue& kv, std::string* out) {
  out->push_back('{');
  bool first = true;
  if (!kv.key().empty()) {
    AppendField(out, &first, "key");
    out->push_back('"');
    *out += common::Base64Encode(kv.key());  // Go's JSON of []byte
    out->push_back('"');
  }
  auto number = [&](const char* name, int64_t v) {
    if (v == 0) return;
    AppendField(out, &first, name);
    out->append(std::to_string(v));
  };
  number("create_revision", kv.create_revision());
  number("mod_revision", kv.mod_revision());
  number("version", kv.version());
  if (!kv.value().empty()) {
    AppendField(out, &first, "value");
    out->push_back('"');
    *out += common::Base64Encode(kv.value());
    out->push_back('"');
  }
  number("lease", kv.lease());
  out->push_back('}');
}

using Json = nlohmann::json;

Status Malformed(size_t index, const std::string& what) {
  return DataLoss("malformed delta snapshot: event " + std::to_string(index) + ": " + what);
}

// An int64 field: an integer JSON number, or null (Go leaves the field zero).
Status ReadInt(const Json& obj, const char* name, size_t index, const std::string& where,
               int64_t* v) {
  auto it = obj.find(name);
  *v = 0;
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (it->is_number_integer() && !it->is_number_unsigned()) {
    *v = it->get<int64_t>();
    return Status::Ok();
  }
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *v = static_cast<int64_t>(it->get<uint64_t>());
    return Status::Ok();
  }
  return Malformed(index, where + name + " is not a 64-bit integer: " + it->dump());
}

// A []byte field: a base64 string, or null.
Status ReadBytes(const Json& obj, const char* name, size_t index, const std::string& where,
                 std::string* v) {
  auto it = obj.find(name);
  v->clear();
  if (it == obj.end() || it->is_null()) return Status::Ok();
  // Go's JSON of []byte: standard padded base64; CR and LF are skipped as Go's decoder does.
  std::optional<std::string> bytes;
  if (it->is_string()) bytes = common::Base64Decode(it->get_ref<const std::string&>());
  if (!bytes) return Malformed(index, where + name + " is not base64 text: " + it->dump());
  *v = std::move(*bytes);
  return Status::Ok();
}

Status ReadKeyValue(const Json& j, size_t index, const std::string& name, mvccpb::KeyValue* kv) {
  if (!j.is_object()) return Malformed(index, name + " is not an object");
  std::string where = name + ".";
  int64_t n;
  ETCDW_RETURN_IF_ERROR(ReadBytes(j, "key", index, where, kv->mutable_key()));
  ETCDW_RETURN_IF_ERROR(ReadInt(j, "create_revision", index, where, &n));
  kv->set_create_revision(n);
  ETCDW_RETURN_IF_ERROR(ReadInt(j, "mod_revision", index, where, &n));
  kv->set_mod_revision(n);
  ETCDW_RETURN_IF_ERROR(ReadInt(j, "version", index, where, &n));
  kv->set_version(n);
  ETCDW_RETURN_IF_ERROR(ReadBytes(j, "value", index, where, kv->mutable_value()));
  ETCDW_RETURN_IF_ERROR(ReadInt(j, "lease", index, where, &n));
  kv->set_lease(n);
  return Status::Ok();
}

Result<DeltaEvent> ReadEvent(const Json& j, size_t index) {
  if (!j.is_object()) return Malformed(index, "not an object");
  DeltaEvent out;
  auto t = j.find("time");
  if (t != j.end() && !t->is_null()) {
    if (!t->is_string() || !IsRfc3339(t->get_ref<const std::string&>())) {
      return Malformed(index, "time is not an RFC 3339 time: " + t->dump());
    }
    out.time = t->get<std::string>();
  }
  auto e = j.find("etcdEvent");
  if (e == j.end() || e->is_null()) return Malformed(index, "no etcdEvent");
  if (!e->is_object()) return Malformed(index, "etcdEvent is not an object");
  int64_t type;
  ETCDW_RETURN_IF_ERROR(ReadInt(*e, "type", index, "etcdEvent.", &type));
  if (type != mvccpb::Event::PUT && type != mvccpb::Event::DELETE) {
    return Malformed(index, "unknown event type " + std::to_string(type));
  }
  out.event.set_type(static_cast<mvccpb::Event::EventType>(type));
  auto kv = e->find("kv");
  if (kv == e->end() || kv->is_null()) return Malformed(index, "etcdEvent has no kv");
  ETCDW_RETURN_IF_ERROR(ReadKeyValue(*kv, index, "kv", out.event.mutable_kv()));
  auto prev = e->find("prev_kv");
  if (prev != e->end() && !prev->is_null()) {
    ETCDW_RETURN_IF_ERROR(ReadKeyValue(*prev, index, "prev_kv", out.event.mutable_prev_kv()));
  }
  return out;
}

}  // namespace

std::string EventJson(const mvccpb::Event& event, std::chrono::system_clock::time_point received) {
  std::string out = "{\"etcdEvent\":{";
  bool first = true;
  if (event.type() != mvccpb::Event::PUT) {
    AppendField(&out, &first, "type");
    out.append(std::to_string(static_cast<int>(event.type())));
  }
  if (event.has_kv()) {
    AppendField(&out, &first, "kv");
    AppendKeyValue(event.kv(), &out);
  }
  if (event.has_prev_kv()) {
    AppendField(&out, &first, "prev_kv");
    AppendKeyValue(event.prev_kv(), &out);
  }
  out.append("},\"time\":\"");
  out.append(FormatRfc3339Nano(received));
  out.append("\"}");
  return out;
}

void DeltaWriter::Add(const mvccpb::Event& event, std::chrono::system_clock::time_point received) {
  json_.push_back(events_ == 0 ? '[' : ',');
  json_.append(EventJson(event, received));
  if (events_ == 0) first_rev_ = event.kv().mod_revision();
  last_rev_ = event.kv().mod_revision();
  ++events_;
}

std::string DeltaWriter::Finish() {
  std::string payload = std::move(json_);
  if (payload.empty()) payload.push_back('[');
  payload.push_back(']');
  common::Sha256 sha;
  sha.Update(payload);
  auto digest = sha.Final();
  payload.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  json_.clear();
  events_ = 0;
  first_rev_ = 0;
  last_rev_ = 0;
  return payload;
}

Result<std::vector<DeltaEvent>> ParseDelta(std::string_view payload) {
  if (payload.size() <= kHashSize) {
    return DataLoss("delta snapshot is missing hash (" + std::to_string(payload.size()) +
                    " bytes)");
  }
  std::string_view data = payload.substr(0, payload.size() - kHashSize);
  std::string_view stored = payload.substr(payload.size() - kHashSize);
  common::Sha256 sha;
  sha.Update(data);
  auto digest = sha.Final();
  std::string_view computed(reinterpret_cast<const char*>(digest.data()), digest.size());
  if (computed != stored) {
    return DataLoss("delta snapshot hash mismatch: stored sha256 " + common::ToHex(stored) +
                    ", computed " + common::ToHex(computed));
  }
  Json doc;
  try {
    doc = Json::parse(data.begin(), data.end());
  } catch (const Json::exception& e) {
    return DataLoss(std::string("malformed delta snapshot JSON: ") + e.what());
  }
  if (!doc.is_array()) return DataLoss("malformed delta snapshot: not a JSON array");
  std::vector<DeltaEvent> events;
  events.reserve(doc.size());
  for (size_t i = 0; i < doc.size(); ++i) {
    ETCDW_ASSIGN_OR_RETURN(DeltaEvent ev, ReadEvent(doc[i], i));
    events.push_back(std::move(ev));
  }
  return events;
}

}  // namespace etcdw::sidecar
