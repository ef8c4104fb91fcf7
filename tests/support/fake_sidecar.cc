#include "fake_sidecar.h"

namespace etcdw::testing {

bool FakeSidecar::Start(int port, const std::string& cert_file, const std::string& key_file) {
  common::HttpServerOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.cert_file = cert_file;
  o.key_file = key_file;
  auto s = common::HttpServer::Start(o, [this](const common::HttpRequest& r) { return Handle(r); });
  if (!s.ok()) return false;
  http_ = std::move(s).value();
  return true;
}

void FakeSidecar::Stop() {
  if (http_) http_->Stop();
  http_.reset();
}

void FakeSidecar::AddOutcome(Outcome o) {
  std::lock_guard lock(mu_);
  outcomes_.push_back(std::move(o));
}

void FakeSidecar::SetConfig(int status, std::string body) {
  std::lock_guard lock(mu_);
  config_status_ = status;
  config_body_ = std::move(body);
}

void FakeSidecar::SetStatusFailure(int http_status) {
  std::lock_guard lock(mu_);
  status_failure_ = http_status;
}

std::vector<std::string> FakeSidecar::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::vector<std::string> FakeSidecar::CollapsedCalls() const {
  std::vector<std::string> out;
  for (auto& c : calls()) {
    if (out.empty() || out.back() != c) out.push_back(c);
  }
  return out;
}

std::vector<std::string> FakeSidecar::StartModes() const {
  std::vector<std::string> out;
  for (auto& c : calls()) {
    if (c.rfind("start:", 0) == 0) out.push_back(c.substr(6));
  }
  return out;
}

common::HttpResponse FakeSidecar::Handle(const common::HttpRequest& r) {
  std::lock_guard lock(mu_);
  common::HttpResponse resp;
  if (r.path == "/initialization/status" && status_failure_ != 0) {
    resp.status = status_failure_;
    calls_.push_back("status:HTTP " + std::to_string(status_failure_));
  } else if (r.path == "/initialization/status") {
    if (state_ == "Progress" && progress_left_-- <= 0) state_ = pending_result_;
    resp.body = state_;
    calls_.push_back("status:" + state_);
    // A final state is reported once, then the sidecar is ready for a new trigger.
    if (state_ == "Successful" || state_ == "Failed") state_ = "New";
  } else if (r.path == "/initialization/start") {
    auto it = r.query.find("mode");
    calls_.push_back("start:" + (it == r.query.end() ? std::string("?") : it->second));
    if (state_ == "New") {
      Outcome o;
      if (!outcomes_.empty()) {
        o = outcomes_.front();
        outcomes_.pop_front();
      }
      state_ = "Progress";
      progress_left_ = o.progress_polls;
      pending_result_ = o.result;
    }
  } else if (r.path == "/config") {
    calls_.push_back("config");
    resp.status = config_status_;
    resp.body = config_body_;
  } else {
    calls_.push_back("other:" + r.path);
    resp.status = 404;
  }
  return resp;
}

}  // namespace etcdw::testing
