#include "jsonpb_decode.h"

#include <google/protobuf/descriptor.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

#include "go_json_decode.h"

namespace etcdw::client_api {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// What encoding/json calls the JSON value `v` in its type errors.
std::string KindOf(std::string_view v) {
  switch (v.empty() ? ' ' : v[0]) {
    case '{':
      return "object";
    case '[':
      return "array";
    case '"':
      return "string";
    case 't':
    case 'f':
      return "bool";
    default:
      return "number";
  }
}

std::string TypeError(std::string_view value, std::string_view go_type) {
  return "json: cannot unmarshal " + std::string(value) + " into Go value of type " +
         std::string(go_type);
}

// The name gogo registers the enum's Go type under: "etcdserverpb.RangeRequest_SortOrder".
std::string GoEnumName(const EnumDescriptor* e) {
  const std::string& pkg = e->file()->package();
  std::string rest = e->full_name().substr(pkg.empty() ? 0 : pkg.size() + 1);
  for (char& c : rest) {
    if (c == '.') c = '_';
  }
  return pkg.empty() ? rest : pkg + "." + rest;
}

// The Go type of the field's (element) value.
std::string GoTypeName(const FieldDescriptor* fd) {
  switch (fd->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return "int32";
    case FieldDescriptor::CPPTYPE_INT64:
      return "int64";
    case FieldDescriptor::CPPTYPE_UINT32:
      return "uint32";
    case FieldDescriptor::CPPTYPE_UINT64:
      return "uint64";
    case FieldDescriptor::CPPTYPE_FLOAT:
      return "float32";
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return "float64";
    case FieldDescriptor::CPPTYPE_BOOL:
      return "bool";
    case FieldDescriptor::CPPTYPE_STRING:
      return fd->type() == FieldDescriptor::TYPE_BYTES ? "[]uint8" : "string";
    case FieldDescriptor::CPPTYPE_ENUM:
      return GoEnumName(fd->enum_type());
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return "map[string]json.RawMessage";
}

bool IsNumeric(const FieldDescriptor* fd) {
  switch (fd->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
    case FieldDescriptor::CPPTYPE_FLOAT:
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return true;
    default:
      return false;
  }
}

// Sets the singular field, or appends to the repeated one.
class Store {
 public:
  Store(Message* m, const FieldDescriptor* fd) : m_(m), fd_(fd), r_(m->GetReflection()) {}
  void Int(int64_t v) const {
    switch (fd_->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        return fd_->is_repeated() ? r_->AddInt32(m_, fd_, static_cast<int32_t>(v))
                                  : r_->SetInt32(m_, fd_, static_cast<int32_t>(v));
      case FieldDescriptor::CPPTYPE_ENUM:
        return fd_->is_repeated() ? r_->AddEnumValue(m_, fd_, static_cast<int>(v))
                                  : r_->SetEnumValue(m_, fd_, static_cast<int>(v));
      default:
        return fd_->is_repeated() ? r_->AddInt64(m_, fd_, v) : r_->SetInt64(m_, fd_, v);
    }
  }
  void Uint(uint64_t v) const {
    if (fd_->cpp_type() == FieldDescriptor::CPPTYPE_UINT32) {
      return fd_->is_repeated() ? r_->AddUInt32(m_, fd_, static_cast<uint32_t>(v))
                                : r_->SetUInt32(m_, fd_, static_cast<uint32_t>(v));
    }
    return fd_->is_repeated() ? r_->AddUInt64(m_, fd_, v) : r_->SetUInt64(m_, fd_, v);
  }
  void Double(double v) const {
    if (fd_->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
      return fd_->is_repeated() ? r_->AddFloat(m_, fd_, static_cast<float>(v))
                                : r_->SetFloat(m_, fd_, static_cast<float>(v));
    }
    return fd_->is_repeated() ? r_->AddDouble(m_, fd_, v) : r_->SetDouble(m_, fd_, v);
  }
  void Bool(bool v) const {
    return fd_->is_repeated() ? r_->AddBool(m_, fd_, v) : r_->SetBool(m_, fd_, v);
  }
  void String(std::string v) const {
    return fd_->is_repeated() ? r_->AddString(m_, fd_, std::move(v))
                              : r_->SetString(m_, fd_, std::move(v));
  }
  // A null element of a repeated field: its zero value.
  void Zero() const {
    if (!fd_->is_repeated()) return;
    switch (fd_->cpp_type()) {
      case FieldDescriptor::CPPTYPE_BOOL:
        return Bool(false);
      case FieldDescriptor::CPPTYPE_STRING:
        return String("");
      case FieldDescriptor::CPPTYPE_FLOAT:
      case FieldDescriptor::CPPTYPE_DOUBLE:
        return Double(0);
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        return Uint(0);
      default:
        return Int(0);
    }
  }

 private:
  Message* m_;
  const FieldDescriptor* fd_;
  const Reflection* r_;
};

// The integer literal `s` as strconv.ParseInt/ParseUint take it, in the field's range.
bool ParseInteger(std::string_view s, const FieldDescriptor* fd, const Store& store) {
  const char* end = s.data() + s.size();
  switch (fd->cpp_type()) {
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v = 0;
      auto [p, ec] = std::from_chars(s.data(), end, v);
      const uint64_t max = fd->cpp_type() == FieldDescriptor::CPPTYPE_UINT32
                               ? std::numeric_limits<uint32_t>::max()
                               : std::numeric_limits<uint64_t>::max();
      if (ec != std::errc() || p != end || v > max) return false;
      store.Uint(v);
      return true;
    }
    default: {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(s.data(), end, v);
      const bool narrow = fd->cpp_type() != FieldDescriptor::CPPTYPE_INT64;
      if (ec != std::errc() || p != end) return false;
      if (narrow &&
          (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())) {
        return false;
      }
      store.Int(v);
      return true;
    }
  }
}

// The number literal `s` as strconv.ParseFloat takes it, in the field's range.
bool ParseFloat(std::string_view s, const FieldDescriptor* fd, const Store& store) {
  const std::string text(s);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || std::isinf(v)) return false;
  if (fd->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT &&
      std::fabs(v) > std::numeric_limits<float>::max()) {
    return false;
  }
  store.Double(v);
  return true;
}

// []byte from a JSON array: encoding/json decodes each element as a uint8.
std::string BytesFromArray(std::string_view raw, const Store& store) {
  std::string bytes;
  std::string first_error;
  for (std::string_view e : gojson::ArrayElements(raw)) {
    std::string err;
    uint64_t v = 0;
    if (e[0] == 'n') {
      v = 0;
    } else if (KindOf(e) != "number") {
      err = TypeError(KindOf(e), "uint8");
    } else {
      auto [p, ec] = std::from_chars(e.data(), e.data() + e.size(), v);
      if (ec != std::errc() || p != e.data() + e.size() || v > 255) {
        err = TypeError("number " + std::string(e), "uint8");
      }
    }
    if (!err.empty() && first_error.empty()) first_error = err;
    bytes.push_back(static_cast<char>(v));
  }
  if (!first_error.empty()) return first_error;
  store.String(std::move(bytes));
  return "";
}

// json.Unmarshal(in, &x) for the Go type of the (scalar) field.
std::string UnmarshalScalar(std::string_view in, Message* m, const FieldDescriptor* fd) {
  if (std::string err = gojson::CheckValid(in); !err.empty()) return err;
  const gojson::FirstValue first = gojson::ReadFirstValue(in);
  const std::string_view v = first.value;
  const Store store(m, fd);
  const std::string type = GoTypeName(fd);
  const bool is_bytes = fd->type() == FieldDescriptor::TYPE_BYTES;
  switch (v[0]) {
    case 'n':
      store.Zero();
      return "";
    case 't':
    case 'f':
      if (fd->cpp_type() != FieldDescriptor::CPPTYPE_BOOL) return TypeError("bool", type);
      store.Bool(v[0] == 't');
      return "";
    case '{':
      return TypeError("object", type);
    case '[':
      if (!is_bytes) return TypeError("array", type);
      return BytesFromArray(v, store);
    case '"': {
      if (fd->cpp_type() != FieldDescriptor::CPPTYPE_STRING) return TypeError("string", type);
      std::string s = gojson::Unquote(v);
      if (!is_bytes) {
        store.String(std::move(s));
        return "";
      }
      std::string err;
      std::string bytes = gojson::Base64Decode(s, &err);
      if (!err.empty()) return err;
      store.String(std::move(bytes));
      return "";
    }
    default:
      break;
  }
  switch (fd->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
    case FieldDescriptor::CPPTYPE_STRING:
      return TypeError("number", type);
    case FieldDescriptor::CPPTYPE_FLOAT:
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return ParseFloat(v, fd, store) ? "" : TypeError("number " + std::string(v), type);
    default:
      return ParseInteger(v, fd, store) ? "" : TypeError("number " + std::string(v), type);
  }
}

std::string UnmarshalObject(std::string_view raw, Message* m);

// One value of the field (the field's own, or an element of a repeated one).
std::string UnmarshalSingular(std::string_view raw, Message* m, const FieldDescriptor* fd) {
  const Reflection* r = m->GetReflection();
  if (fd->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    if (raw == "null") {
      if (fd->is_repeated()) r->AddMessage(m, fd);
      return "";
    }
    Message* sub = fd->is_repeated() ? r->AddMessage(m, fd) : r->MutableMessage(m, fd);
    return UnmarshalObject(raw, sub);
  }
  if (fd->cpp_type() == FieldDescriptor::CPPTYPE_ENUM && raw[0] == '"') {
    // By name, the quotes stripped without unquoting (names need no escapes).
    const std::string_view name = raw.substr(1, raw.size() - 2);
    const EnumValueDescriptor* v = fd->enum_type()->FindValueByName(std::string(name));
    if (!v) {
      return "unknown value " + gojson::Quote(name) + " for enum " + GoEnumName(fd->enum_type());
    }
    Store(m, fd).Int(v->number());
    return "";
  }
  if (IsNumeric(fd)) {
    const bool is_float = fd->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT ||
                          fd->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE;
    if (is_float && (raw == "\"NaN\"" || raw == "\"Infinity\"" || raw == "\"-Infinity\"")) {
      const double inf = std::numeric_limits<double>::infinity();
      Store(m, fd).Double(raw == "\"NaN\"" ? std::nan("") : raw[1] == '-' ? -inf : inf);
      return "";
    }
    // Numbers may be quoted: the quotes are dropped and the rest read as JSON.
    if (raw[0] == '"') raw = raw.substr(1, raw.size() - 2);
  }
  return UnmarshalScalar(raw, m, fd);
}

std::string UnmarshalField(std::string_view raw, Message* m, const FieldDescriptor* fd) {
  if (fd->is_map()) return "";  // etcd's requests have none
  if (!fd->is_repeated()) return UnmarshalSingular(raw, m, fd);
  if (raw == "null") return "";
  if (raw[0] != '[') return TypeError(KindOf(raw), "[]json.RawMessage");
  for (std::string_view e : gojson::ArrayElements(raw)) {
    if (std::string err = UnmarshalSingular(e, m, fd); !err.empty()) return err;
  }
  return "";
}

// A message from the JSON object `raw`: its fields in declaration order, then those of its
// oneofs, as jsonpb walks the Go struct.
std::string UnmarshalObject(std::string_view raw, Message* m) {
  if (raw == "null") return "";
  if (raw[0] != '{') return TypeError(KindOf(raw), "map[string]json.RawMessage");
  std::map<std::string, std::string_view, std::less<>> members;
  for (auto& [key, value] : gojson::ObjectMembers(raw)) members[key] = value;  // the last wins
  const Descriptor* d = m->GetDescriptor();
  for (const bool oneofs : {false, true}) {
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* fd = d->field(i);
      if ((fd->containing_oneof() != nullptr) != oneofs) continue;
      std::optional<std::string_view> value;
      for (const std::string* name : {&fd->name(), &fd->json_name()}) {
        if (auto it = members.find(*name); it != members.end()) {
          value = it->second;
          members.erase(it);
        }
      }
      if (!value) continue;
      if (std::string err = UnmarshalField(*value, m, fd); !err.empty()) return err;
    }
  }
  return "";
}

}  // namespace

std::string UnmarshalJsonPb(std::string_view raw, google::protobuf::Message* m) {
  return UnmarshalObject(raw, m);
}

}  // namespace etcdw::client_api
