#include "etcdw/sidecar/etcd_config.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace etcdw::sidecar {
namespace {

std::vector<std::string> SplitComma(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string Join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Emits `node` with map keys sorted (as Go's yaml.Marshal of a map does), recursively.
void EmitSorted(YAML::Emitter& out, const YAML::Node& node) {
  if (node.IsMap()) {
    std::map<std::string, YAML::Node> sorted;
    for (const auto& kv : node) sorted[kv.first.as<std::string>()] = kv.second;
    out << YAML::BeginMap;
    for (const auto& [k, v] : sorted) {
      out << YAML::Key << k << YAML::Value;
      EmitSorted(out, v);
    }
    out << YAML::EndMap;
  } else if (node.IsSequence()) {
    out << YAML::BeginSeq;
    for (const auto& v : node) EmitSorted(out, v);
    out << YAML::EndSeq;
  } else {
    out << node;
  }
}

}  // namespace

std::string EtcdConfigPath() {
  const char* env = std::getenv("ETCD_CONF");
  return env != nullptr && *env != '\0' ? env : "/var/etcd/config/etcd.conf.yaml";
}

Result<EtcdConfigTemplate> EtcdConfigTemplate::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("etcd config \"" + path + "\": cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return Parse(ss.str(), path);
}

Result<EtcdConfigTemplate> EtcdConfigTemplate::Parse(const std::string& yaml,
                                                     const std::string& source) {
  EtcdConfigTemplate t;
  t.source_ = source;
  try {
    t.root_ = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("etcd config \"" + source + "\": " + e.what());
  }
  if (!t.root_.IsMap()) {
    return InvalidArgument("etcd config \"" + source + "\": not a YAML mapping");
  }
  for (const auto& [name, url] : t.InitialCluster()) {
    if (name.empty() || url.empty()) {
      return InvalidArgument("etcd config \"" + source +
                             "\": initial-cluster entries must be name=URL");
    }
  }
  return t;
}

std::string EtcdConfigTemplate::MemberName() const {
  const char* pod = std::getenv("POD_NAME");
  if (pod == nullptr || *pod == '\0') {
    return root_["name"] && root_["name"].IsScalar() ? root_["name"].as<std::string>() : "default";
  }
  std::string prefix = root_["member-name-prefix"] && root_["member-name-prefix"].IsScalar()
                           ? root_["member-name-prefix"].as<std::string>()
                           : "";
  return prefix.empty() ? std::string(pod) : prefix + "-" + pod;
}

std::vector<std::pair<std::string, std::string>> EtcdConfigTemplate::InitialCluster() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (!root_["initial-cluster"] || !root_["initial-cluster"].IsScalar()) return out;
  for (const auto& entry : SplitComma(root_["initial-cluster"].as<std::string>())) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      out.emplace_back(entry, "");
    } else {
      out.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    }
  }
  return out;
}

namespace {

Result<std::vector<std::string>> UrlsOf(const YAML::Node& root, const std::string& key,
                                        const std::string& member, const std::string& source) {
  YAML::Node n = root[key];
  if (!n) return InvalidArgument("etcd config \"" + source + "\": no " + key);
  std::vector<std::string> urls;
  if (n.IsScalar()) {
    urls = SplitComma(n.as<std::string>());
  } else if (n.IsMap()) {
    YAML::Node mine = n[member];
    if (!mine) {
      return InvalidArgument("etcd config \"" + source + "\": " + key +
                             " has no entry for member " + member);
    }
    if (mine.IsScalar()) {
      urls = SplitComma(mine.as<std::string>());
    } else if (mine.IsSequence()) {
      for (const auto& u : mine) urls.push_back(u.as<std::string>());
    }
  }
  if (urls.empty()) {
    return InvalidArgument("etcd config \"" + source + "\": " + key + " lists no URL for member " +
                           member);
  }
  for (const auto& u : urls) {
    if (u.rfind("http://", 0) != 0 && u.rfind("https://", 0) != 0) {
      return InvalidArgument("etcd config \"" + source + "\": " + key + ": \"" + u +
                             "\" is not an http:// or https:// URL");
    }
  }
  return urls;
}

}  // namespace

Result<std::vector<std::string>> EtcdConfigTemplate::PeerUrls(const std::string& member) const {
  return UrlsOf(root_, "initial-advertise-peer-urls", member, source_);
}

Result<std::vector<std::string>> EtcdConfigTemplate::ClientUrls(const std::string& member) const {
  return UrlsOf(root_, "advertise-client-urls", member, source_);
}

std::string EtcdConfigTemplate::DataDir() const {
  return root_["data-dir"] && root_["data-dir"].IsScalar() ? root_["data-dir"].as<std::string>()
                                                           : "";
}

std::string EtcdConfigTemplate::InitialClusterToken() const {
  YAML::Node n = root_["initial-cluster-token"];
  return n && n.IsScalar() ? n.as<std::string>() : "";
}

Result<std::string> EtcdConfigTemplate::Render(
    const std::string& member, const std::optional<std::vector<Member>>& cluster) const {
  YAML::Node out = YAML::Clone(root_);
  out["name"] = member;
  ETCDW_ASSIGN_OR_RETURN(auto peers, PeerUrls(member));
  ETCDW_ASSIGN_OR_RETURN(auto clients, ClientUrls(member));
  out["initial-advertise-peer-urls"] = Join(peers, ",");
  out["advertise-client-urls"] = Join(clients, ",");

  // The initial cluster: with a running multi-member cluster, only its members and this one.
  auto entries = InitialCluster();
  if (cluster && cluster->size() > 1) {
    std::set<std::string> names{member};
    for (const auto& m : *cluster) names.insert(m.name);
    std::vector<std::pair<std::string, std::string>> kept;
    for (const auto& e : entries) {
      if (names.count(e.first) > 0) kept.push_back(e);
    }
    entries = kept;
  }
  std::vector<std::string> parts;
  parts.reserve(entries.size());
  for (const auto& [n, u] : entries) parts.push_back(n + "=" + u);
  if (!entries.empty()) out["initial-cluster"] = Join(parts, ",");

  // The state: "new" for one member; "existing" when the cluster has a learner (a member being
  // added: this one), "new" otherwise or when the cluster could not be asked.
  std::string state = "new";
  if (entries.size() > 1 && cluster) {
    for (const auto& m : *cluster) {
      if (m.is_learner) state = "existing";
    }
  }
  out["initial-cluster-state"] = state;

  YAML::Emitter e;
  EmitSorted(e, out);
  if (!e.good()) return Internal("rendering the etcd config: " + e.GetLastError());
  return std::string(e.c_str()) + "\n";
}

}  // namespace etcdw::sidecar
