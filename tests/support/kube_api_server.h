// An in-process Kubernetes API server for tests: coordination.k8s.io/v1 Leases in memory, served
// over HTTPS (or plain HTTP) on 127.0.0.1 with the API's own answers, enough for our client and
// for kubectl (discovery documents, Status objects with the API's messages, the three PATCH
// types). It is no apiserver: no watch, no field selectors, no admission, no managedFields.
//
// Behaviour, as kube-apiserver's for Leases:
//   - every write (create, replace, patch, delete, and the Put hook) takes the next
//     resourceVersion of one counter (a PATCH that changes nothing writes nothing); a create
//     sets metadata.uid and creationTimestamp;
//   - PUT needs metadata.resourceVersion (422 without, as for Leases), and PUT and a PATCH whose
//   result carries metadata.resourceVersion, are conditional: another
//     resourceVersion than the stored one answers 409 Conflict;
//   - POST of an existing name answers 409 AlreadyExists, a missing lease 404 NotFound;
//   - ?fieldValidation=Strict (kubectl's default, announced in the OpenAPI v3 document) refuses
//     fields a Lease does not have; without it they are stored as sent;
//   - every namespace exists (GET /api/v1/namespaces/<ns> answers an Active Namespace);
//   - with a token configured, a request without "Authorization: Bearer <token>" (or a verified
//     client certificate, when client_ca_file is set) answers 401 Unauthorized.
// Test hooks: the leases themselves (Put, Get), the log of requests, faults for the next
// requests, a delay before every answer, and Stop/Start on the same port.
//
// Thread-safety: every method may be called from any thread, also while requests are served.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "etcdw/common/http.h"
#include "etcdw/common/status.h"

namespace etcdw::testing {

struct KubeApiServerOptions {
  // HTTPS with this certificate and key; both empty: plain HTTP.
  std::string cert_file;
  std::string key_file;
  // HTTPS: client certificates verified against this bundle authenticate a request.
  std::string client_ca_file;
  // The bearer token accepted; empty (and no client_ca_file): every request is accepted.
  std::string token;
  int port = 0;  // 0: any free port, kept by later Start()s
};

// One request as the server received it.
struct KubeApiRequest {
  std::string method;
  std::string target;  // path and query
  std::string content_type;
  std::string body;
  std::string bearer_token;  // after "Bearer "; empty when none was sent
};

class KubeApiServer {
 public:
  explicit KubeApiServer(KubeApiServerOptions options);
  ~KubeApiServer();  // Stop()
  KubeApiServer(const KubeApiServer&) = delete;
  KubeApiServer& operator=(const KubeApiServer&) = delete;

  // Listens on 127.0.0.1; after a Stop, on the same port again. The leases survive.
  Status Start();
  // Closes the listener and every connection (a request in its delay is answered 503 at once).
  void Stop();
  int port() const;
  // "https://127.0.0.1:<port>" (http:// without a certificate).
  std::string url() const;

  // The accepted token from now on.
  void SetToken(std::string token);

  // Writes `lease` (a Lease object; its metadata.name is required) into namespace `ns`, as
  // another client would: a new resourceVersion, uid and creationTimestamp kept or set.
  // Returns the stored object.
  nlohmann::json Put(const std::string& ns, nlohmann::json lease);
  std::optional<nlohmann::json> Get(const std::string& ns, const std::string& name) const;

  std::vector<KubeApiRequest> requests() const;
  void ClearRequests();

  // The next `count` requests whose method is `method` (any when empty) answer `http_status`
  // with a Status object (reason and message as the API's for that code; 409 is the lease
  // update conflict). Faults queue in order; the first one that matches is used.
  void FailNext(int count, int http_status, const std::string& method = "");
  // Every request waits this long before it is handled (0: none).
  void SetDelay(std::chrono::milliseconds delay);

 private:
  struct Fault {
    int count;
    int http_status;
    std::string method;
  };
  common::HttpResponse Handle(const common::HttpRequest& r);
  // Under mu_: the answer to an authenticated request.
  common::HttpResponse Route(const common::HttpRequest& r);
  common::HttpResponse LeaseCollection(const common::HttpRequest& r, const std::string& ns);
  common::HttpResponse LeaseItem(const common::HttpRequest& r, const std::string& ns,
                                 const std::string& name);
  common::HttpResponse Create(const common::HttpRequest& r, const std::string& ns);
  common::HttpResponse Replace(const common::HttpRequest& r, const std::string& ns,
                               const std::string& name);
  common::HttpResponse Patch(const common::HttpRequest& r, const std::string& ns,
                             const std::string& name);
  // Stores `lease` under a new resourceVersion (and uid, creationTimestamp when new).
  nlohmann::json Store(const std::string& ns, nlohmann::json lease);
  bool Authenticated(const common::HttpRequest& r) const;
  std::optional<int> TakeFault(const std::string& method);

  const KubeApiServerOptions options_;
  // Start and Stop, one at a time; never taken by a handler.
  mutable std::mutex lifecycle_mu_;
  std::unique_ptr<common::HttpServer> http_;  // guarded by lifecycle_mu_
  int port_;                                  // guarded by lifecycle_mu_
  // Everything else, and stopping_ which cuts delays short.
  mutable std::mutex mu_;
  std::condition_variable stopping_cv_;
  bool stopping_ = false;
  std::string token_;
  // namespace -> name -> object
  std::map<std::string, std::map<std::string, nlohmann::json>> leases_;
  int64_t resource_version_ = 1000;
  int64_t uids_ = 0;
  std::vector<KubeApiRequest> requests_;
  std::deque<Fault> faults_;
  std::chrono::milliseconds delay_{0};
};

}  // namespace etcdw::testing
