#include "s3_config.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace etcdw::sidecar {

namespace {

// The settings as read, before validation; absent keys stay empty.
struct RawSettings {
  std::map<std::string, std::string> text;  // string-valued keys
  std::map<std::string, bool> flags;        // s3ForcePathStyle, insecureSkipVerify
  bool has_token = false;                   // web identity: tokenPath / a "token" file
};

constexpr const char* kStringKeys[] = {"region",
                                       "accessKeyID",
                                       "secretAccessKey",
                                       "endpoint",
                                       "trustedCaCert",
                                       "sseCustomerKey",
                                       "sseCustomerAlgorithm",
                                       "roleARN",
                                       "requestChecksumCalculation",
                                       "responseChecksumValidation"};
constexpr const char* kBoolKeys[] = {"s3ForcePathStyle", "insecureSkipVerify"};

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read \"" + path + "\": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Go's strconv.ParseBool.
std::optional<bool> ParseGoBool(std::string_view s) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (s == t) return true;
  }
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (s == f) return false;
  }
  return std::nullopt;
}

std::string TrimLineBreaks(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

Result<RawSettings> ReadJson(const std::string& path) {
  ETCDW_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(path));
  nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("\"" + path + "\": not valid JSON");
  if (!j.is_object()) return InvalidArgument("\"" + path + "\": not a JSON object");
  RawSettings raw;
  for (const char* key : kStringKeys) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_string()) {
      return InvalidArgument("\"" + path + "\": \"" + key + "\" must be a string");
    }
    raw.text[key] = it->get<std::string>();
  }
  for (const char* key : kBoolKeys) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_boolean()) {
      return InvalidArgument("\"" + path + "\": \"" + key + "\" must be true or false");
    }
    raw.flags[key] = it->get<bool>();
  }
  if (auto it = j.find("tokenPath"); it != j.end() && it->is_string() && !it->empty()) {
    raw.has_token = true;
  }
  return raw;
}

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return InvalidArgument("cannot read directory \"" + dir + "\": " + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());  // as Go's os.ReadDir: the first *.json by name wins
  return names;
}

Result<RawSettings> ReadDir(const std::string& dir, const std::vector<std::string>& names) {
  RawSettings raw;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    if (name == "token") {
      raw.has_token = true;
      continue;
    }
    bool known = false;
    for (const char* key : kStringKeys) known |= name == key;
    for (const char* key : kBoolKeys) known |= name == key;
    if (!known) continue;
    ETCDW_ASSIGN_OR_RETURN(std::string value, ReadWholeFile(path));
    if (name != "trustedCaCert") value = TrimLineBreaks(std::move(value));
    bool is_bool = false;
    for (const char* key : kBoolKeys) is_bool |= name == key;
    if (is_bool) {
      auto b = ParseGoBool(value);
      if (!b) return InvalidArgument("\"" + path + "\": \"" + value + "\" is not a boolean");
      raw.flags[name] = *b;
    } else {
      raw.text[name] = std::move(value);
    }
  }
  return raw;
}

Result<S3Credentials> Validate(RawSettings raw, const std::string& source) {
  auto fail = [&](const std::string& why) {
    return InvalidArgument("S3 credentials from \"" + source + "\": " + why);
  };
  S3Credentials c;
  c.source = source;
  c.region = raw.text["region"];
  c.access_key_id = raw.text["accessKeyID"];
  c.secret_access_key = raw.text["secretAccessKey"];
  c.endpoint = raw.text["endpoint"];
  c.trusted_ca_cert = raw.text["trustedCaCert"];
  c.sse_customer_key = raw.text["sseCustomerKey"];
  c.sse_customer_algorithm = raw.text["sseCustomerAlgorithm"];
  c.force_path_style = raw.flags["s3ForcePathStyle"];
  c.insecure_skip_verify = raw.flags["insecureSkipVerify"];
  if (c.region.empty()) return fail("region is missing");
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    if (!raw.text["roleARN"].empty() && raw.has_token) {
      return fail(
          "web identity credentials (roleARN and token) are not supported; set "
          "accessKeyID and secretAccessKey");
    }
    return fail("accessKeyID and secretAccessKey are required");
  }
  if (c.sse_customer_key.empty() != c.sse_customer_algorithm.empty()) {
    return fail(
        "both sseCustomerKey and sseCustomerAlgorithm are to be provided if customer "
        "managed SSE keys are to be used");
  }
  for (const char* key : {"requestChecksumCalculation", "responseChecksumValidation"}) {
    std::string v = raw.text[key];
    for (char& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (!v.empty() && v != "when_supported" && v != "when_required") {
      return fail("invalid value \"" + raw.text[key] + "\" for " + key +
                  ", must be when_supported/when_required");
    }
  }
  return c;
}

bool IsIpLiteral(const std::string& host) {
  if (host.find(':') != std::string::npos) return true;  // IPv6
  int dots = 0;
  for (char ch : host) {
    if (ch == '.') {
      ++dots;
    } else if (ch < '0' || ch > '9') {
      return false;
    }
  }
  return dots == 3;
}

}  // namespace

Result<S3Credentials> LoadS3Credentials(const std::string& env_prefix) {
  const std::string json_env = env_prefix + kAwsCredentialsJsonEnv;
  const std::string dir_env = env_prefix + kAwsCredentialsDirEnv;
  if (const char* file = std::getenv(json_env.c_str()); file != nullptr) {
    ETCDW_ASSIGN_OR_RETURN(RawSettings raw, ReadJson(file));
    return Validate(std::move(raw), file);
  }
  if (const char* dir = std::getenv(dir_env.c_str()); dir != nullptr) {
    ETCDW_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
    for (const std::string& name : names) {
      if (name.ends_with(".json")) {
        const std::string path = std::string(dir) + "/" + name;
        ETCDW_ASSIGN_OR_RETURN(RawSettings raw, ReadJson(path));
        return Validate(std::move(raw), path);
      }
    }
    ETCDW_ASSIGN_OR_RETURN(RawSettings raw, ReadDir(dir, names));
    return Validate(std::move(raw), dir);
  }
  return InvalidArgument("S3 snapshot store: no credentials: set " + json_env +
                         " (a JSON file) or " + dir_env + " (a directory with one file per key)");
}

std::string S3Endpoint::HostPort() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

std::string S3Endpoint::HostHeader() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port == (tls ? 443 : 80)) return h;
  return h + ":" + std::to_string(port);
}

std::string S3Endpoint::ToString() const {
  return std::string(tls ? "https://" : "http://") + HostHeader() + base_path;
}

Result<S3Endpoint> ParseS3Endpoint(std::string_view url) {
  const std::string text(url);
  auto fail = [&](const std::string& why) {
    return InvalidArgument("S3 endpoint \"" + text + "\": " + why);
  };
  S3Endpoint e;
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    e.tls = false;
    e.port = 80;
    rest.remove_prefix(7);
  } else {
    return fail("want http://host[:port] or https://host[:port]");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) return fail("no query or fragment");
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  e.base_path = std::string(path);
  if (authority.find('@') != std::string_view::npos) return fail("no user information");
  std::string_view port_text;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return fail("unterminated IPv6 address");
    e.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return fail("junk after the IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return fail("empty port");
    }
  } else {
    size_t colon = authority.rfind(':');
    e.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return fail("empty port");
    }
  }
  if (e.host.empty()) return fail("no host");
  if (!port_text.empty()) {
    int port = 0;
    for (char ch : port_text) {
      if (ch < '0' || ch > '9' || port > 65535) return fail("invalid port");
      port = port * 10 + (ch - '0');
    }
    if (port < 1 || port > 65535) return fail("invalid port");
    e.port = port;
  }
  e.host_is_ip = IsIpLiteral(e.host);
  return e;
}

}  // namespace etcdw::sidecar
