#include "etcdw/wrapper/sidecar_client.h"

namespace etcdw::wrapper {

InitState ParseInitState(const std::string& body) {
  if (body == "New") return InitState::kNew;
  if (body == "Successful") return InitState::kSuccessful;
  if (body == "Failed") return InitState::kFailed;
  return InitState::kInProgress;
}

const char* InitStateName(InitState s) {
  switch (s) {
    case InitState::kNew:
      return "New";
    case InitState::kInProgress:
      return "InProgress";
    case InitState::kSuccessful:
      return "Successful";
    case InitState::kFailed:
      return "Failed";
  }
  return "?";
}

Result<std::unique_ptr<SidecarClient>> SidecarClient::Create(const StartEtcdOptions& options) {
  std::unique_ptr<SidecarClient> c(new SidecarClient());
  c->host_port_ = options.sidecar_host_port;
  c->base_url_ = options.SidecarBaseUrl();
  common::HttpClientOptions o;
  o.tls = options.sidecar_tls;
  o.ca_file = options.sidecar_ca_file;
  o.server_name = options.SidecarServerName();
  o.timeout = std::chrono::seconds(10);
  auto quick = common::HttpClient::Create(o);
  if (!quick.ok()) return quick.status().WithContext("--backup-restore-ca-cert-bundle-path");
  o.timeout = std::chrono::seconds(60);
  auto slow = common::HttpClient::Create(o);
  if (!slow.ok()) return slow.status().WithContext("--backup-restore-ca-cert-bundle-path");
  c->quick_ = std::move(quick).value();
  c->slow_ = std::move(slow).value();
  return c;
}

Result<std::string> SidecarClient::Get(common::HttpClient& client, const std::string& target,
                                       const std::atomic<bool>* cancel) {
  const std::string what = "GET " + base_url_ + target;
  auto r = client.Get(host_port_, target, cancel);
  if (!r.ok()) return Status(r.status().code(), what + ": " + r.status().message());
  if (r->status != 200 && r->status != 201 && r->status != 202) {
    std::string body = r->body.substr(0, 200);
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
    return Unavailable(what + ": HTTP status " + std::to_string(r->status) +
                       (body.empty() ? "" : ": " + body));
  }
  return std::move(r->body);
}

Result<InitState> SidecarClient::InitializationStatus(const std::atomic<bool>* cancel) {
  auto body = Get(*quick_, "/initialization/status", cancel);
  if (!body.ok()) return body.status();
  return ParseInitState(*body);
}

Status SidecarClient::StartInitialization(ValidationMode mode, const std::atomic<bool>* cancel) {
  auto body =
      Get(*quick_, std::string("/initialization/start?mode=") + ValidationModeName(mode), cancel);
  return body.status();
}

Result<std::string> SidecarClient::Config(const std::atomic<bool>* cancel) {
  return Get(*slow_, "/config", cancel);
}

}  // namespace etcdw::wrapper
