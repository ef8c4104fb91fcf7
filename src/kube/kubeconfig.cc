// LoadKubeconfig: the current context of a kubeconfig file (YAML, or JSON which is YAML too),
// as clientcmd reads it. Only what a bearer token or a client certificate needs is supported;
// exec plugins, auth providers and basic auth are refused by name rather than ignored, so that
// a kubeconfig we cannot honour fails at once instead of answering 401 later.
#include <yaml-cpp/yaml.h>

#include <array>
#include <string>

#include "config_files.h"
#include "etcdw/kube/client.h"

namespace etcdw::kube {

namespace {

// Standard base64 (RFC 4648 §4), as Go decodes kubeconfig's -data fields. Line breaks and
// blanks are skipped; the padding may be left out. False on any other character.
bool DecodeBase64(const std::string& text, std::string* out) {
  static const std::array<int, 256> kValue = [] {
    std::array<int, 256> v{};
    v.fill(-1);
    const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < alphabet.size(); ++i) v[static_cast<unsigned char>(alphabet[i])] = i;
    return v;
  }();
  out->clear();
  uint32_t bits = 0;
  int nbits = 0;
  size_t padding = 0;
  for (char ch : text) {
    if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
    if (ch == '=') {
      ++padding;
      continue;
    }
    const int v = kValue[static_cast<unsigned char>(ch)];
    if (v < 0 || padding > 0) return false;  // a stranger, or data after the padding
    bits = (bits << 6) | static_cast<uint32_t>(v);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out->push_back(static_cast<char>((bits >> nbits) & 0xff));
    }
  }
  // Leftover bits must be fewer than a byte (6 bits alone cannot encode one) and the padding
  // at most what completes the last group.
  return nbits != 6 && padding <= 2;
}

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  Status Error(const std::string& what) const {
    return InvalidArgument("kubeconfig \"" + path_ + "\": " + what);
  }

  // The entry `name` of the list `list` ("clusters", "contexts", "users"): its `field` map.
  Result<YAML::Node> Named(const YAML::Node& root, const std::string& list,
                           const std::string& field, const std::string& name) const {
    const YAML::Node entries = root[list];
    if (entries && !entries.IsSequence()) return Error(list + " is not a list");
    if (entries) {
      for (const auto& entry : entries) {
        if (!entry.IsMap() || !entry["name"] || !entry["name"].IsScalar()) {
          return Error(list + ": an entry without a name");
        }
        if (entry["name"].as<std::string>() != name) continue;
        const YAML::Node value = entry[field];
        if (value && !value.IsMap() && !value.IsNull()) {
          return Error(list + " \"" + name + "\": " + field + " is not a map");
        }
        return value;
      }
    }
    return Error(list + ": no entry named \"" + name + "\"");
  }

  // A text field of `map` (empty when absent or null), named `where.key` in errors.
  Result<std::string> Text(const YAML::Node& map, const std::string& key,
                           const std::string& where) const {
    if (!map || !map.IsMap()) return std::string();
    const YAML::Node v = map[key];
    if (!v || v.IsNull()) return std::string();
    if (!v.IsScalar()) return Error(where + "." + key + " is not a string");
    return v.as<std::string>();
  }

  // A -data field: base64 text, decoded.
  Result<std::string> Data(const YAML::Node& map, const std::string& key,
                           const std::string& where) const {
    ETCDW_ASSIGN_OR_RETURN(std::string text, Text(map, key, where));
    std::string decoded;
    if (!DecodeBase64(text, &decoded)) return Error(where + "." + key + " is not valid base64");
    return decoded;
  }

  // A file field: the path resolved against the kubeconfig's directory.
  Result<std::string> File(const YAML::Node& map, const std::string& key,
                           const std::string& where) const {
    ETCDW_ASSIGN_OR_RETURN(std::string text, Text(map, key, where));
    return ResolveRelativeTo(path_, text);
  }

  Result<bool> Flag(const YAML::Node& map, const std::string& key, const std::string& where) const {
    ETCDW_ASSIGN_OR_RETURN(std::string text, Text(map, key, where));
    if (text.empty() || text == "false") return false;
    if (text == "true") return true;
    return Error(where + "." + key + " is not true or false: \"" + text + "\"");
  }

  Result<KubeConfig> Load() const;

 private:
  Status LoadCluster(const YAML::Node& cluster, const std::string& where, KubeConfig* c) const;
  Status LoadUser(const YAML::Node& user, const std::string& where, KubeConfig* c) const;

  std::string path_;
};

Status Reader::LoadCluster(const YAML::Node& cluster, const std::string& where,
                           KubeConfig* c) const {
  ETCDW_ASSIGN_OR_RETURN(c->server, Text(cluster, "server", where));
  if (c->server.empty()) return Error(where + " has no server");
  ETCDW_ASSIGN_OR_RETURN(c->ca_file, File(cluster, "certificate-authority", where));
  ETCDW_ASSIGN_OR_RETURN(c->ca_pem, Data(cluster, "certificate-authority-data", where));
  ETCDW_ASSIGN_OR_RETURN(c->insecure_skip_tls_verify,
                         Flag(cluster, "insecure-skip-tls-verify", where));
  return Status::Ok();
}

Status Reader::LoadUser(const YAML::Node& user, const std::string& where, KubeConfig* c) const {
  for (const char* unsupported : {"exec", "auth-provider", "username", "password"}) {
    if (user && user.IsMap() && user[unsupported] && !user[unsupported].IsNull()) {
      return Error(where + " uses " + unsupported + ", which is not supported");
    }
  }
  ETCDW_ASSIGN_OR_RETURN(c->token, Text(user, "token", where));
  ETCDW_ASSIGN_OR_RETURN(c->token_file, File(user, "tokenFile", where));
  ETCDW_ASSIGN_OR_RETURN(c->cert_file, File(user, "client-certificate", where));
  ETCDW_ASSIGN_OR_RETURN(c->cert_pem, Data(user, "client-certificate-data", where));
  ETCDW_ASSIGN_OR_RETURN(c->key_file, File(user, "client-key", where));
  ETCDW_ASSIGN_OR_RETURN(c->key_pem, Data(user, "client-key-data", where));
  return Status::Ok();
}

Result<KubeConfig> Reader::Load() const {
  ETCDW_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path_, "kubeconfig"));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error(std::string("not valid YAML: ") + e.what());
  }
  if (!root.IsMap()) return Error("not a map of settings");

  KubeConfig c;
  c.source = path_;
  ETCDW_ASSIGN_OR_RETURN(std::string context_name, Text(root, "current-context", "config"));
  if (context_name.empty()) return Error("current-context is not set");
  const std::string context_where = "context \"" + context_name + "\"";
  ETCDW_ASSIGN_OR_RETURN(YAML::Node context, Named(root, "contexts", "context", context_name));
  ETCDW_ASSIGN_OR_RETURN(std::string cluster_name, Text(context, "cluster", context_where));
  ETCDW_ASSIGN_OR_RETURN(std::string user_name, Text(context, "user", context_where));
  ETCDW_ASSIGN_OR_RETURN(c.default_namespace, Text(context, "namespace", context_where));
  if (cluster_name.empty()) return Error(context_where + " names no cluster");

  ETCDW_ASSIGN_OR_RETURN(YAML::Node cluster, Named(root, "clusters", "cluster", cluster_name));
  ETCDW_RETURN_IF_ERROR(LoadCluster(cluster, "cluster \"" + cluster_name + "\"", &c));
  // A context without a user is anonymous.
  if (!user_name.empty()) {
    ETCDW_ASSIGN_OR_RETURN(YAML::Node user, Named(root, "users", "user", user_name));
    ETCDW_RETURN_IF_ERROR(LoadUser(user, "user \"" + user_name + "\"", &c));
  }
  return c;
}

}  // namespace

Result<KubeConfig> LoadKubeconfig(const std::string& path) {
  // yaml-cpp throws on conversions too (a map where a string was expected): every throw is
  // the file's fault.
  try {
    return Reader(path).Load();
  } catch (const YAML::Exception& e) {
    return InvalidArgument("kubeconfig \"" + path + "\": " + e.what());
  }
}

}  // namespace etcdw::kube
