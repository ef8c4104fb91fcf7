// The etcd configuration template the sidecar serves on /config (gardener §3.1, §3.4).
//
// The template is an etcd YAML config file (env ETCD_CONF, default
// /var/etcd/config/etcd.conf.yaml) in which `initial-advertise-peer-urls` and
// `advertise-client-urls` may be maps from member name to a list of URLs (one file for every
// pod of a StatefulSet), with an optional `member-name-prefix`. Rendering for this member sets
// `name`, flattens the two maps to this member's comma-joined URLs, and decides
// `initial-cluster` / `initial-cluster-state` from the running cluster.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "etcdw/common/status.h"

namespace etcdw::sidecar {

// $ETCD_CONF or /var/etcd/config/etcd.conf.yaml.
std::string EtcdConfigPath();

class EtcdConfigTemplate {
 public:
  // Reads and parses the file; errors name it and what is wrong.
  static Result<EtcdConfigTemplate> Load(const std::string& path);
  static Result<EtcdConfigTemplate> Parse(const std::string& yaml, const std::string& source);

  // "<member-name-prefix>-<POD_NAME>", or POD_NAME, or (no POD_NAME) the file's `name`.
  std::string MemberName() const;
  // Entries of `initial-cluster` ("name=url,..."), in order.
  std::vector<std::pair<std::string, std::string>> InitialCluster() const;
  size_t ClusterSize() const { return InitialCluster().size(); }
  // This member's URLs from the (map or plain) keys; errors when the member has none.
  Result<std::vector<std::string>> PeerUrls(const std::string& member) const;
  Result<std::vector<std::string>> ClientUrls(const std::string& member) const;
  std::string DataDir() const;
  // `initial-cluster-token`, empty when the file has none.
  std::string InitialClusterToken() const;

  // A member of the running cluster, as MemberList reports it.
  struct Member {
    std::string name;
    bool is_learner = false;
  };
  // The config for `member`: see the header comment. `cluster` is the running cluster's member
  // list, or none when it could not be read (a fresh bootstrap).
  Result<std::string> Render(const std::string& member,
                             const std::optional<std::vector<Member>>& cluster) const;

 private:
  YAML::Node root_;
  std::string source_;
};

}  // namespace etcdw::sidecar
