#include "etcdw/wrapper/control_server.h"

#include "etcdw/common/logging.h"

namespace etcdw::wrapper {

namespace log = etcdw::log;

common::HttpResponse HandleControlRequest(const common::HttpRequest& req, bool ready,
                                          const std::function<void()>& stop) {
  common::HttpResponse r;
  if (req.path == "/readyz") {
    r.status = ready ? 200 : 503;
    return r;
  }
  if (req.path == "/stop") {
    if (req.method != "POST") {
      r.status = 405;
      r.headers["Allow"] = "POST";
      r.headers["Content-Type"] = "text/plain; charset=utf-8";
      r.body = "method not allowed: use POST /stop\n";
      return r;
    }
    if (!req.remote_is_loopback && !req.client_cert_verified) {
      log::Warn("refused a stop request",
                {log::F("remote", req.remote_address),
                 log::F("reason", "not a loopback caller and no certificate of the CA")});
      r.status = 403;
      r.headers["Content-Type"] = "text/plain; charset=utf-8";
      r.body =
          "forbidden: /stop accepts only loopback callers and clients presenting a certificate "
          "of the etcd client CA\n";
      return r;
    }
    log::Info("received stop request, stopping etcd-wrapper",
              {log::F("remote", req.remote_address)});
    stop();
    return r;
  }
  r.status = 404;
  r.headers["Content-Type"] = "text/plain; charset=utf-8";
  r.body = "404 page not found\n";
  return r;
}

Result<std::unique_ptr<ControlServer>> ControlServer::Start(const ControlServerOptions& o,
                                                            std::function<bool()> ready,
                                                            std::function<void()> stop) {
  common::HttpServerOptions h;
  h.host = o.host;
  h.port = o.port;
  h.cert_file = o.cert_file;
  h.key_file = o.key_file;
  if (!o.cert_file.empty()) h.client_ca_file = o.client_ca_file;
  auto http = common::HttpServer::Start(
      h, [ready = std::move(ready), stop = std::move(stop)](const common::HttpRequest& req) {
        return HandleControlRequest(req, ready(), stop);
      });
  if (!http.ok()) return http.status();
  std::unique_ptr<ControlServer> s(new ControlServer());
  s->http_ = std::move(http).value();
  log::Info(s->http_->tls() ? "TLS enabled. Starting HTTPS server." : "starting HTTP server",
            {log::F("port", s->http_->port())});
  return s;
}

}  // namespace etcdw::wrapper
