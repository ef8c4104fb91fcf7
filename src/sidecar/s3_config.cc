#include "s3_config.h"

#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "credential_files.h"

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

}  // namespace

Result<S3Credentials> LoadS3Credentials(std::string_view env_prefix) {
  ETCDW_ASSIGN_OR_RETURN(CredentialSource source,
                         FindCredentialSource(env_prefix, kAwsCredentialsJsonEnv,
                                              kAwsCredentialsDirEnv, "S3 snapshot store"));
  if (source.json) {
    ETCDW_ASSIGN_OR_RETURN(RawSettings raw, ReadJson(source.path));
    return Validate(std::move(raw), source.path);
  }
  ETCDW_ASSIGN_OR_RETURN(RawSettings raw, ReadDir(source.path, source.files));
  return Validate(std::move(raw), source.path);
}

}  // namespace etcdw::sidecar
