// KubeApiServer: lifecycle, the test hooks, and what every request goes through before it
// reaches a resource (the log, the delay, authentication, injected faults). The resources are
// in kube_api_leases.cc.
#include "kube_api_server.h"

#include "kube_api_documents.h"

namespace etcdw::testing {

using nlohmann::json;

namespace {

// The lease a path names ("" when it names none): .../namespaces/<ns>/leases/<name>.
std::string LeaseNameOf(const std::string& path) {
  const std::string marker = "/leases/";
  const size_t at = path.rfind(marker);
  if (at == std::string::npos) return "";
  std::string name = path.substr(at + marker.size());
  return name.find('/') == std::string::npos ? name : "";
}

std::string Header(const common::HttpRequest& r, const std::string& lower_name) {
  auto it = r.headers.find(lower_name);
  return it == r.headers.end() ? "" : it->second;
}

}  // namespace

KubeApiServer::KubeApiServer(KubeApiServerOptions options)
    : options_(std::move(options)), port_(options_.port), token_(options_.token) {}

KubeApiServer::~KubeApiServer() { Stop(); }

Status KubeApiServer::Start() {
  std::lock_guard lifecycle(lifecycle_mu_);
  if (http_) return Status::Ok();
  common::HttpServerOptions o;
  o.host = "127.0.0.1";
  o.port = port_;
  o.cert_file = options_.cert_file;
  o.key_file = options_.key_file;
  o.client_ca_file = options_.client_ca_file;
  o.threads = 4;  // a delayed request holds only its own thread
  auto http =
      common::HttpServer::Start(o, [this](const common::HttpRequest& r) { return Handle(r); });
  if (!http.ok()) return http.status();
  http_ = std::move(http).value();
  port_ = http_->port();
  return Status::Ok();
}

void KubeApiServer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;  // delayed requests give up their wait
  }
  stopping_cv_.notify_all();
  std::lock_guard lifecycle(lifecycle_mu_);
  if (http_) http_->Stop();
  http_.reset();
  std::lock_guard lock(mu_);
  stopping_ = false;
}

int KubeApiServer::port() const {
  std::lock_guard lifecycle(lifecycle_mu_);
  return port_;
}

std::string KubeApiServer::url() const {
  const bool tls = !options_.cert_file.empty();
  return std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port());
}

void KubeApiServer::SetToken(std::string token) {
  std::lock_guard lock(mu_);
  token_ = std::move(token);
}

json KubeApiServer::Put(const std::string& ns, json lease) {
  std::lock_guard lock(mu_);
  return Store(ns, std::move(lease));
}

std::optional<json> KubeApiServer::Get(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  auto space = leases_.find(ns);
  if (space == leases_.end()) return std::nullopt;
  auto it = space->second.find(name);
  if (it == space->second.end()) return std::nullopt;
  return it->second;
}

std::vector<KubeApiRequest> KubeApiServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

void KubeApiServer::ClearRequests() {
  std::lock_guard lock(mu_);
  requests_.clear();
}

void KubeApiServer::FailNext(int count, int http_status, const std::string& method) {
  std::lock_guard lock(mu_);
  faults_.push_back({count, http_status, method});
}

void KubeApiServer::SetDelay(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  delay_ = delay;
}

std::optional<int> KubeApiServer::TakeFault(const std::string& method) {
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (!it->method.empty() && it->method != method) continue;
    const int status = it->http_status;
    if (--it->count <= 0) faults_.erase(it);
    return status;
  }
  return std::nullopt;
}

bool KubeApiServer::Authenticated(const common::HttpRequest& r) const {
  if (token_.empty() && options_.client_ca_file.empty()) return true;
  if (r.client_cert_verified) return true;
  return !token_.empty() && Header(r, "authorization") == "Bearer " + token_;
}

common::HttpResponse KubeApiServer::Handle(const common::HttpRequest& r) {
  KubeApiRequest logged;
  logged.method = r.method;
  logged.target = r.target;
  logged.content_type = Header(r, "content-type");
  logged.body = r.body;
  const std::string authorization = Header(r, "authorization");
  if (authorization.rfind("Bearer ", 0) == 0) logged.bearer_token = authorization.substr(7);

  std::unique_lock lock(mu_);
  requests_.push_back(std::move(logged));
  if (delay_.count() > 0) {
    stopping_cv_.wait_for(lock, delay_, [this] { return stopping_; });
    if (stopping_) {
      return kubeapi::Answer(503, kubeapi::InjectedFault(503, ""));
    }
  }
  if (!Authenticated(r)) return kubeapi::Answer(401, kubeapi::Unauthorized());
  if (auto fault = TakeFault(r.method)) {
    return kubeapi::Answer(*fault, kubeapi::InjectedFault(*fault, LeaseNameOf(r.path)));
  }
  return Route(r);
}

}  // namespace etcdw::testing
