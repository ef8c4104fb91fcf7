#include "abs_config.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "credential_files.h"
#include "etcdw/common/hash.h"
#include "etcdw/common/logging.h"
#include "object_xml.h"

namespace etcdw::sidecar {

namespace {

constexpr const char* kAbsTextKeys[] = {"storageAccount", "storageKey", "domain"};
constexpr char kAbsEmulatorKey[] = "emulatorEnabled";

// The settings as read, before validation; absent keys are absent from the maps.
struct AbsRawSettings {
  std::map<std::string, std::string> text;
  std::optional<bool> emulator_enabled;
};

Result<AbsRawSettings> ReadAbsJson(const std::string& path) {
  ETCDW_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(path));
  nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("\"" + path + "\": not valid JSON");
  if (!j.is_object()) return InvalidArgument("\"" + path + "\": not a JSON object");
  AbsRawSettings raw;
  for (const char* key : kAbsTextKeys) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_string()) {
      return InvalidArgument("\"" + path + "\": \"" + key + "\" must be a string");
    }
    raw.text[key] = it->get<std::string>();
  }
  if (auto it = j.find(kAbsEmulatorKey); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return InvalidArgument("\"" + path + "\": \"" + kAbsEmulatorKey + "\" must be true or false");
    }
    raw.emulator_enabled = it->get<bool>();
  }
  return raw;
}

Result<AbsRawSettings> ReadAbsDir(const std::string& dir, const std::vector<std::string>& names) {
  AbsRawSettings raw;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    bool text_key = false;
    for (const char* key : kAbsTextKeys) text_key |= name == key;
    if (!text_key && name != kAbsEmulatorKey) continue;
    ETCDW_ASSIGN_OR_RETURN(std::string value, ReadWholeFile(path));
    value = TrimLineBreaks(std::move(value));
    if (text_key) {
      raw.text[name] = std::move(value);
      continue;
    }
    std::optional<bool> b = ParseGoBool(value);
    if (!b) return InvalidArgument("\"" + path + "\": \"" + value + "\" is not a boolean");
    raw.emulator_enabled = b;
  }
  return raw;
}

Result<AbsCredentials> ValidateAbs(AbsRawSettings raw, const std::string& source) {
  auto fail = [&](const std::string& why) {
    return InvalidArgument("ABS credentials from \"" + source + "\": " + why);
  };
  AbsCredentials c;
  c.source = source;
  c.storage_account = raw.text["storageAccount"];
  c.storage_key = raw.text["storageKey"];
  if (auto it = raw.text.find("domain"); it != raw.text.end()) c.domain = it->second;
  c.emulator_enabled = raw.emulator_enabled.value_or(false);
  if (c.storage_account.empty()) return fail("storageAccount is missing or empty");
  if (c.storage_key.empty()) return fail("storageKey is missing or empty");
  std::optional<std::string> key = common::Base64Decode(c.storage_key);
  if (!key || key->empty()) return fail("storageKey is not valid base64");
  c.key = std::move(*key);
  if (c.emulator_enabled && (!c.domain || c.domain->empty())) {
    return fail("emulatorEnabled is set but domain (the emulator's host:port) is not");
  }
  return c;
}

}  // namespace

Result<AbsCredentials> LoadAbsCredentials(std::string_view env_prefix) {
  ETCDW_ASSIGN_OR_RETURN(CredentialSource source,
                         FindCredentialSource(env_prefix, kAzureCredentialsJsonEnv,
                                              kAzureCredentialsDirEnv, "ABS snapshot store"));
  AbsRawSettings raw;
  if (source.json) {
    ETCDW_ASSIGN_OR_RETURN(raw, ReadAbsJson(source.path));
  } else {
    ETCDW_ASSIGN_OR_RETURN(raw, ReadAbsDir(source.path, source.files));
  }
  return ValidateAbs(std::move(raw), source.path);
}

Result<StoreEndpoint> AbsServiceEndpoint(const AbsCredentials& creds,
                                         std::string_view endpoint_override) {
  if (!endpoint_override.empty()) {
    return ParseStoreEndpoint(endpoint_override, "ABS endpoint (--store-endpoint-override)");
  }
  if (creds.domain) {
    log::Warn(
        "passing the domain through the credential file is deprecated; use "
        "--store-endpoint-override",
        {log::F("source", creds.source)});
  }
  const std::string domain = creds.domain.value_or(kAzureDefaultDomain);
  if (creds.emulator_enabled) {
    return ParseStoreEndpoint("http://" + domain + "/" + creds.storage_account,
                              "ABS emulator endpoint (domain)");
  }
  return ParseStoreEndpoint("https://" + creds.storage_account + "." + domain,
                            "ABS endpoint (storageAccount and domain)");
}

std::string AbsBlockId(int64_t part_number) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%010lld", static_cast<long long>(part_number));
  return common::Base64Encode(digits);
}

AbsBlobListPage ParseAbsBlobList(std::string_view xml) {
  AbsBlobListPage page;
  for (std::string_view blob : objxml::Elements(xml, "Blob")) {
    std::optional<std::string> name = objxml::FirstText(blob, "Name");
    if (name) page.names.push_back(std::move(*name));
  }
  page.next_marker = objxml::FirstText(xml, "NextMarker").value_or("");
  return page;
}

}  // namespace etcdw::sidecar
