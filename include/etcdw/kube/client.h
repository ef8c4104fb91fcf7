// A small Kubernetes API client of our own, for the objects the sidecar reads and writes:
// coordination.k8s.io/v1 Leases (the member heartbeat and the snapshot revisions that
// etcd-druid reads). It speaks HTTPS to the API server through common::HttpClient (Beast and
// OpenSSL) and JSON through nlohmann_json; no kubectl, no client-go.
//
// Configuration, as client-go finds it:
//   - in a pod: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT, the service account's
//     ca.crt, token and namespace (the token file is re-read at least every
//     KubeClientOptions::token_reread, because the kubelet rotates it);
//   - else a kubeconfig ($KUBECONFIG, else ~/.kube/config): the current context's cluster
//     (server, certificate-authority or -data, insecure-skip-tls-verify) and user (token or
//     tokenFile, client-certificate(-data) and client-key(-data)).
//
// Errors carry the API's own words: the `message` of the Status object the server answers
// with, the method, the path and the HTTP status, e.g.
//   PUT /apis/coordination.k8s.io/v1/namespaces/ns/leases/l: Operation cannot be fulfilled on
//   leases.coordination.k8s.io "l": the object has been modified; please apply your changes to
//   the latest version and try again (HTTP 409)
// Codes: 400/422 kInvalidArgument, 401 kUnauthenticated, 403 kPermissionDenied, 404 kNotFound,
// 409 kAborted (a conflict: read again and retry; but kAlreadyExists when the Status's reason is
// AlreadyExists, a create of an object that exists), 429 and 5xx kUnavailable, other 4xx
// kInvalidArgument, no answer (connect, TLS including a server certificate that does not verify,
// read) kUnavailable, past KubeClientOptions::timeout kDeadlineExceeded. A configuration that
// cannot be read is kFailedPrecondition (a missing variable or file) or kInvalidArgument (a
// malformed file or setting).
//
// Thread-safety: a KubeClient may be used from several threads at once.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"

namespace etcdw::kube {

// Where the API server is and how to prove who we are.
struct KubeConfig {
  std::string server;  // "https://host:port" (http:// is accepted for local test servers)
  // Server verification: one of these, or insecure_skip_tls_verify.
  std::string ca_file;
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;
  // Bearer token: fixed, or read from a file (re-read periodically; a failed re-reading keeps
  // the token read before). `token` wins when both are set. Both empty: none sent.
  std::string token;
  std::string token_file;
  // Client certificate and key: files or PEM text (kubeconfig's -data fields, decoded).
  std::string cert_file;
  std::string cert_pem;
  std::string key_file;
  std::string key_pem;
  // The namespace of the context or of the service account; empty when neither says.
  std::string default_namespace;
  // Where this came from, for messages: "in-cluster" or the kubeconfig's path.
  std::string source;
};

// The in-cluster configuration: KUBERNETES_SERVICE_HOST/_PORT and the files of
// `service_account_dir`. Errors name the missing variable or unreadable file.
inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";
Result<KubeConfig> InClusterConfig(const std::string& service_account_dir = kServiceAccountDir);
// A kubeconfig file, its current context. Relative file paths in it are relative to the file.
// Errors name the file and the missing or malformed entry.
Result<KubeConfig> LoadKubeconfig(const std::string& path);
// In-cluster when KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG (its first path), else
// $HOME/.kube/config.
Result<KubeConfig> DefaultConfig();

struct KubeClientOptions {
  std::chrono::milliseconds timeout{60000};       // per request
  std::chrono::milliseconds token_reread{60000};  // KubeConfig::token_file's refresh period
  const common::Clock* clock = nullptr;           // for token_reread; null: the system clock
};

// A coordination.k8s.io/v1 Lease as the server returned it.
struct Lease {
  std::string namespace_name;
  std::string name;
  std::string resource_version;
  std::optional<std::string> holder_identity;  // spec.holderIdentity; none when absent or null
  std::optional<std::string> renew_time;       // spec.renewTime (MicroTime text)
  std::map<std::string, std::string> annotations;
  nlohmann::json object;  // the whole object, for fields not named above
};

class KubeClient {
 public:
  // Loads the TLS material and the token. Errors name the file and the problem.
  static Result<std::unique_ptr<KubeClient>> Create(KubeConfig config,
                                                    KubeClientOptions options = {});
  ~KubeClient();

  const KubeConfig& config() const;

  Result<Lease> GetLease(const std::string& ns, const std::string& name);
  // PUT of lease.object (its metadata.resourceVersion makes it conditional: kAborted when the
  // lease changed since it was read).
  Result<Lease> UpdateLease(const Lease& lease);
  // A JSON merge patch (RFC 7386, application/merge-patch+json). A patch that carries
  // metadata.resourceVersion is conditional like UpdateLease.
  Result<Lease> MergePatchLease(const std::string& ns, const std::string& name,
                                const nlohmann::json& patch);
  // Read, change, write: reads the lease, calls `change` (which may return false to leave it
  // as it is: then no write, and the lease read is returned), PUTs it; on a conflict reads
  // again and retries, up to `attempts` times (then kAborted). `change` may edit the named
  // fields (holder_identity, renew_time, annotations) or `object`: named fields it changed are
  // written into the object before the PUT. It may run once per attempt.
  Result<Lease> ModifyLease(const std::string& ns, const std::string& name,
                            const std::function<bool(Lease&)>& change, int attempts = 5);

  // Any request: `path` with query, `body` sent with `content_type` when not empty. Returns
  // the parsed JSON answer of a 2xx, else the error described above.
  Result<nlohmann::json> Call(const std::string& method, const std::string& path,
                              const std::string& body = "",
                              const std::string& content_type = "application/json");

  class Impl;

 private:
  KubeClient() = default;
  std::unique_ptr<Impl> impl_;
};

// The Lease fields of a JSON object (for tests and the test server too).
Result<Lease> LeaseFromJson(const nlohmann::json& object);

// Kubernetes MicroTime: RFC 3339 in UTC with microseconds, "2026-11-27T17:44:36.123456Z".
std::string MicroTime(std::chrono::system_clock::time_point t);

// The lease path: /apis/coordination.k8s.io/v1/namespaces/<ns>/leases[/<name>].
std::string LeasePath(const std::string& ns, const std::string& name = "");

}  // namespace etcdw::kube
