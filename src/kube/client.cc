// KubeClient: one common::HttpClient (its TLS context built once) and the bearer token, shared
// by every call. Each call is one HTTP exchange on its own connection.
#include "etcdw/kube/client.h"

#include <mutex>
#include <utility>

#include "api_error.h"
#include "config_files.h"
#include "etcdw/common/http.h"
#include "etcdw/common/url.h"
#include "server_url.h"

namespace etcdw::kube {

class KubeClient::Impl {
 public:
  Impl(KubeConfig c, KubeClientOptions o)
      : config(std::move(c)),
        options(o),
        clock(o.clock ? o.clock : &common::SystemClock::Instance()) {}

  // The bearer token to send ("" for none). A token file is read when its last reading is
  // token_reread old; a failed re-reading keeps the token we have (the kubelet writes the file
  // by replacing it, so a failure is momentary) and is tried again on the next call.
  Result<std::string> Token() {
    if (!config.token.empty() || config.token_file.empty()) return config.token;
    std::lock_guard lock(mu);
    const auto now = clock->Now();
    if (!token.empty() && now - token_read_at < options.token_reread) return token;
    auto text = ReadSmallFile(config.token_file, "token file");
    std::string fresh = text.ok() ? std::string(common::Trim(*text)) : "";
    if (!fresh.empty()) {
      token = std::move(fresh);
      token_read_at = now;
    } else if (token.empty()) {
      return text.ok() ? FailedPrecondition("token file \"" + config.token_file + "\" is empty")
                       : text.status();
    }
    return token;
  }

  const KubeConfig config;
  const KubeClientOptions options;
  const common::Clock* const clock;
  ServerUrl url;
  std::unique_ptr<common::HttpClient> http;

 private:
  std::mutex mu;
  std::string token;                       // guarded by mu: the file's last good contents
  common::Clock::TimePoint token_read_at;  // guarded by mu
};

Result<std::unique_ptr<KubeClient>> KubeClient::Create(KubeConfig config,
                                                       KubeClientOptions options) {
  ETCDW_ASSIGN_OR_RETURN(ServerUrl url, ParseServerUrl(config.server));
  common::HttpClientOptions h;
  h.tls = url.tls;
  h.ca_file = config.ca_file;
  h.ca_pem = config.ca_pem;
  h.insecure_skip_verify = config.insecure_skip_tls_verify;
  // As client-go: without a CA of its own, the server must verify against the system's roots.
  h.system_roots = url.tls && !h.insecure_skip_verify && h.ca_file.empty() && h.ca_pem.empty();
  h.cert_file = config.cert_file;
  h.key_file = config.key_file;
  h.cert_pem = config.cert_pem;
  h.key_pem = config.key_pem;
  if ((!h.cert_file.empty() || !h.cert_pem.empty()) !=
      (!h.key_file.empty() || !h.key_pem.empty())) {
    return InvalidArgument(config.source +
                           ": a client certificate needs its key, and a key its "
                           "certificate");
  }
  if (!h.cert_file.empty() && !h.cert_pem.empty()) {
    return InvalidArgument(config.source +
                           ": the client certificate is given both as a file and as data");
  }
  // A file certificate with a data key (or the reverse) is rare enough to refuse.
  if ((!h.cert_file.empty() && !h.key_pem.empty()) ||
      (!h.cert_pem.empty() && !h.key_file.empty())) {
    return InvalidArgument(config.source +
                           ": the client certificate and key must both be files or both data");
  }
  h.timeout = options.timeout;
  auto http = common::HttpClient::Create(h);
  if (!http.ok()) return http.status().WithContext(config.source);

  std::unique_ptr<KubeClient> c(new KubeClient());
  c->impl_ = std::make_unique<Impl>(std::move(config), options);
  c->impl_->url = std::move(url);
  c->impl_->http = std::move(http).value();
  // The token file must be readable now: a missing one is a configuration error, not a 401.
  auto token = c->impl_->Token();
  if (!token.ok()) return token.status();
  return c;
}

KubeClient::~KubeClient() = default;

const KubeConfig& KubeClient::config() const { return impl_->config; }

Result<nlohmann::json> KubeClient::Call(const std::string& method, const std::string& path,
                                        const std::string& body, const std::string& content_type) {
  if (path.empty() || path.front() != '/') {
    return InvalidArgument("API path \"" + path + "\" does not start with '/'");
  }
  ETCDW_ASSIGN_OR_RETURN(std::string token, impl_->Token());
  common::HttpClientRequest r;
  r.method = method;
  r.host_port = impl_->url.host_port;
  r.target = impl_->url.prefix + path;
  r.headers.emplace_back("Accept", "application/json");
  if (!token.empty()) r.headers.emplace_back("Authorization", "Bearer " + token);
  if (!body.empty()) r.headers.emplace_back("Content-Type", content_type);
  r.body = body;
  auto answer = impl_->http->Send(r);
  if (!answer.ok()) {
    // No answer. A server certificate that does not verify is no answer either (the transport
    // calls it kUnauthenticated, which here would read as a rejected token).
    Code code = answer.status().code();
    if (code == Code::kUnauthenticated) code = Code::kUnavailable;
    return Status(code, method + " " + path + ": " + answer.status().message());
  }
  if (answer->status < 200 || answer->status > 299) {
    return ApiError(method, path, answer->status, answer->body);
  }
  if (common::Trim(answer->body).empty()) return nlohmann::json();
  nlohmann::json parsed = nlohmann::json::parse(answer->body, nullptr, false);
  if (parsed.is_discarded()) {
    return Internal(method + " " + path + ": the answer (HTTP " + std::to_string(answer->status) +
                    ") is not JSON");
  }
  return parsed;
}

}  // namespace etcdw::kube
