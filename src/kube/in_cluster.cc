// InClusterConfig and DefaultConfig: where a pod finds the API server, as client-go's
// rest.InClusterConfig and clientcmd's default loading rules do.
#include <cstdlib>
#include <string>

#include "config_files.h"
#include "etcdw/common/url.h"
#include "etcdw/kube/client.h"

namespace etcdw::kube {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

Result<KubeConfig> InClusterConfig(const std::string& service_account_dir) {
  const std::string host = Env("KUBERNETES_SERVICE_HOST");
  const std::string port = Env("KUBERNETES_SERVICE_PORT");
  if (host.empty()) {
    return FailedPrecondition("in-cluster configuration: KUBERNETES_SERVICE_HOST is not set");
  }
  if (port.empty()) {
    return FailedPrecondition("in-cluster configuration: KUBERNETES_SERVICE_PORT is not set");
  }
  KubeConfig c;
  c.source = "in-cluster";
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  c.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  // The files are read here so that a pod without its service account fails now, by name; the
  // client reads the CA bundle and the token again (the token periodically).
  c.ca_file = service_account_dir + "/ca.crt";
  ETCDW_ASSIGN_OR_RETURN(std::string ca, ReadSmallFile(c.ca_file, "service account CA bundle"));
  c.token_file = service_account_dir + "/token";
  ETCDW_ASSIGN_OR_RETURN(std::string token, ReadSmallFile(c.token_file, "service account token"));
  if (common::Trim(token).empty()) {
    return FailedPrecondition("service account token \"" + c.token_file + "\" is empty");
  }
  // The namespace file is optional (client-go falls back to "default"; we leave it empty).
  auto ns = ReadSmallFile(service_account_dir + "/namespace", "service account namespace");
  if (ns.ok()) c.default_namespace = std::string(common::Trim(*ns));
  return c;
}

Result<KubeConfig> DefaultConfig() {
  if (!Env("KUBERNETES_SERVICE_HOST").empty()) return InClusterConfig();
  // $KUBECONFIG is a list like $PATH; its first non-empty entry is the file we read.
  for (const auto& path : common::Split(Env("KUBECONFIG"), ':')) {
    if (!path.empty()) return LoadKubeconfig(path);
  }
  const std::string home = Env("HOME");
  if (home.empty()) {
    return FailedPrecondition(
        "no Kubernetes configuration: not in a cluster, and neither KUBECONFIG nor HOME is set");
  }
  return LoadKubeconfig(home + "/.kube/config");
}

}  // namespace etcdw::kube
