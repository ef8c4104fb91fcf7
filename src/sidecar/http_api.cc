#include "etcdw/sidecar/http_api.h"

#include "etcdw/common/logging.h"
#include "etcdw/common/url.h"

namespace etcdw::sidecar {
namespace {

common::HttpResponse Text(int status, std::string body) {
  common::HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers["Content-Type"] = "text/plain; charset=utf-8";
  return r;
}

common::HttpResponse Json(int status, const nlohmann::json& j) {
  common::HttpResponse r;
  r.status = status;
  r.body = j.dump();
  r.headers["Content-Type"] = "application/json";
  return r;
}

// Go's strconv.ParseBool.
std::optional<bool> ParseGoBool(const std::string& s) {
  if (s == "1" || s == "t" || s == "T" || s == "true" || s == "TRUE" || s == "True") return true;
  if (s == "0" || s == "f" || s == "F" || s == "false" || s == "FALSE" || s == "False") {
    return false;
  }
  return std::nullopt;
}

}  // namespace

const char* InitStateName(InitState s) {
  switch (s) {
    case InitState::kNew:
      return "New";
    case InitState::kProgress:
      return "Progress";
    case InitState::kSuccessful:
      return "Successful";
    case InitState::kFailed:
      return "Failed";
  }
  return "New";
}

HttpApi::HttpApi(Deps deps) : deps_(std::move(deps)) {}

HttpApi::~HttpApi() {
  if (worker_.joinable()) worker_.join();
}

InitState HttpApi::state() const {
  std::lock_guard<std::mutex> l(mu_);
  return state_;
}

void HttpApi::SetSnapshotter(std::shared_ptr<SnapshotTriggers> s) {
  std::lock_guard<std::mutex> l(mu_);
  snapshotter_ = std::move(s);
}

common::HttpResponse HttpApi::Handle(const common::HttpRequest& req) {
  if (req.path == "/initialization/start") return Start(req);
  if (req.path == "/initialization/status") return StatusRoute();
  if (req.path == "/healthz") {
    bool h = healthy_.load();
    return Json(h ? 200 : 503, {{"health", h}});
  }
  if (req.path == "/metrics" && deps_.metrics != nullptr) return Metrics();
  if (req.path == "/config") {
    auto cfg = deps_.render_config();
    if (!cfg.ok()) {
      log::Error("rendering the etcd config failed", {log::F("error", cfg.status())});
      return Text(500, cfg.status().message() + "\n");
    }
    common::HttpResponse r = Text(200, *cfg);
    r.headers["Content-Type"] = "application/yaml";
    return r;
  }
  if (req.path == "/snapshot/full" || req.path == "/snapshot/delta" ||
      req.path == "/snapshot/latest") {
    return Snapshot(req);
  }
  return Text(404, "404 page not found\n");
}

common::HttpResponse HttpApi::Start(const common::HttpRequest& req) {
  auto it = req.query.find("mode");
  ValidationMode mode = ParseValidationMode(it == req.query.end() ? "" : it->second);
  std::lock_guard<std::mutex> l(mu_);
  if (state_ != InitState::kNew) return Text(200, "");
  state_ = InitState::kProgress;
  healthy_.store(false);
  if (worker_.joinable()) worker_.join();  // the previous run has finished (state was New)
  worker_ = std::thread([this, mode] {
    log::Info("initialisation started",
              {log::F("mode", mode == ValidationMode::kFull ? "full" : "sanity")});
    etcdw::Status st = deps_.initialize(mode);
    if (st.ok()) {
      log::Info("initialisation successful");
    } else {
      log::Error("initialisation failed", {log::F("error", st)});
    }
    std::lock_guard<std::mutex> l(mu_);
    state_ = st.ok() ? InitState::kSuccessful : InitState::kFailed;
  });
  return Text(200, "");
}

common::HttpResponse HttpApi::StatusRoute() {
  std::lock_guard<std::mutex> l(mu_);
  InitState s = state_;
  if (s == InitState::kSuccessful || s == InitState::kFailed) state_ = InitState::kNew;
  return Text(200, InitStateName(s));
}

common::HttpResponse HttpApi::Snapshot(const common::HttpRequest& req) {
  if (deps_.store == nullptr) return Text(405, "");
  if (req.path == "/snapshot/latest") {
    auto list = deps_.store->List();
    if (!list.ok()) return Text(500, list.status().message() + "\n");
    LatestSet latest = FindLatestSet(*list);
    if (deps_.metrics != nullptr) deps_.metrics->SetLatestDeltas(latest.deltas);
    return Json(200, LatestSetJson(latest));
  }
  std::shared_ptr<SnapshotTriggers> s;
  {
    std::lock_guard<std::mutex> l(mu_);
    s = snapshotter_;
  }
  if (s == nullptr) return Delegate(req);  // not the backup leader
  if (req.path == "/snapshot/full") {
    bool final = false;
    if (auto it = req.query.find("final"); it != req.query.end()) {
      auto b = ParseGoBool(it->second);
      if (!b) return Text(400, "invalid value for final: \"" + it->second + "\"\n");
      final = *b;
    }
    auto r = s->TriggerFull(final);
    if (!r.ok()) return Text(500, r.status().message() + "\n");
    return Json(200, ToJson(*r));
  }
  auto r = s->TriggerDelta();
  if (!r.ok()) return Text(500, r.status().message() + "\n");
  if (!r->has_value()) return Json(200, nullptr);
  return Json(200, ToJson(**r));
}

common::HttpResponse HttpApi::Metrics() {
  // promhttp's accounting: this scrape is in flight while the page is written, and counted
  // once answered.
  SidecarMetrics& m = *deps_.metrics;
  m.scrapes_in_flight.Add(1);
  common::HttpResponse r;
  r.status = 200;
  r.body = m.Text();
  r.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8";
  m.scrapes_in_flight.Add(-1);
  m.scrapes_ok.Add();
  return r;
}

// A request proxied once carries this header and is never proxied again: a sidecar that is
// about to lead (its member is the leader, its snapshotter not yet attached) would otherwise
// pass the request to itself.
constexpr const char* kDelegatedHeader = "x-etcdw-delegated";

common::HttpResponse HttpApi::Delegate(const common::HttpRequest& req) {
  if (!deps_.leader_sidecar_url || req.headers.count(kDelegatedHeader) > 0) return Text(405, "");
  auto refuse = [&](const std::string& why) {
    log::Warn("cannot delegate the request to the backup leader",
              {log::F("path", req.path), log::F("error", why)});
    return Text(405, "");
  };
  auto base = deps_.leader_sidecar_url();
  if (!base.ok()) return refuse(base.status().ToString());
  auto url = common::ParseUrl(*base);
  if (!url.ok()) return refuse(url.status().ToString());
  common::HttpClientOptions o = deps_.leader_client;
  o.tls = url->tls();
  o.timeout = std::chrono::seconds(10);
  auto health_client = common::HttpClient::Create(o);
  if (!health_client.ok()) return refuse(health_client.status().ToString());
  auto health = (*health_client)->Get(url->HostPort(), "/healthz");
  if (!health.ok()) return refuse(health.status().ToString());
  if (health->status != 200 || health->body != R"({"health":true})") {
    return refuse(*base + "/healthz answered " + std::to_string(health->status));
  }
  // A snapshot taken on request may take long: the leader's own timeouts bound it.
  o.timeout = std::chrono::hours(1);
  auto client = common::HttpClient::Create(o);
  if (!client.ok()) return refuse(client.status().ToString());
  common::HttpClientRequest forward;
  forward.host_port = url->HostPort();
  forward.target = req.target;
  forward.headers = {{kDelegatedHeader, "1"}};
  auto r = (*client)->Send(forward);
  if (!r.ok()) return refuse(r.status().ToString());
  common::HttpResponse out;
  out.status = r->status;
  out.body = std::move(r->body);
  if (auto ct = r->headers.find("Content-Type"); ct != r->headers.end()) {
    out.headers["Content-Type"] = ct->second;
  }
  return out;
}

}  // namespace etcdw::sidecar
