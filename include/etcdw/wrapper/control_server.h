// The wrapper's own HTTP(S) server on --etcd-wrapper-port (all interfaces):
//   /readyz  any method: 200 when ready, 503 otherwise, empty body (the kubelet's probe)
//   /stop    POST: stop the process with exit code 0 and no exit-code file, so the next start
//            validates fully (the sidecar calls it after changing the member's peer URLs).
//            Only loopback callers or clients presenting a certificate of the configured CA
//            are obeyed (403 otherwise); other methods get 405.
//   else     404
// HTTPS with the etcd server certificate when the etcd config has client TLS.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "etcdw/common/http.h"
#include "etcdw/common/status.h"

namespace etcdw::wrapper {

struct ControlServerOptions {
  std::string host;  // empty: all interfaces
  int port = 9095;
  std::string cert_file;  // TLS when set (with key_file)
  std::string key_file;
  std::string client_ca_file;  // callers with a certificate of this CA may POST /stop
};

class ControlServer {
 public:
  static Result<std::unique_ptr<ControlServer>> Start(const ControlServerOptions& options,
                                                      std::function<bool()> ready,
                                                      std::function<void()> stop);
  int port() const { return http_->port(); }
  void Stop() { http_->Stop(); }

 private:
  ControlServer() = default;
  std::unique_ptr<common::HttpServer> http_;
};

// The routing above, separate from the socket for unit tests.
common::HttpResponse HandleControlRequest(const common::HttpRequest& req, bool ready,
                                          const std::function<void()>& stop);

}  // namespace etcdw::wrapper
