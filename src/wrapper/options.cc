#include "etcdw/wrapper/options.h"

#include "etcdw/common/http.h"
#include "etcdw/common/url.h"

namespace etcdw::wrapper {

namespace {

bool HasPrefix(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

std::string StartEtcdOptions::SidecarServerName() const {
  auto hp = common::SplitHostPort(sidecar_host_port);
  std::string host = hp.ok() ? hp->first : sidecar_host_port.substr(0, sidecar_host_port.find(':'));
  return common::Trim(host).empty() ? "localhost" : host;
}

std::string StartEtcdOptions::SidecarBaseUrl() const {
  return std::string(sidecar_tls ? "https://" : "http://") + sidecar_host_port;
}

void RegisterStartEtcdFlags(common::FlagSet& f, StartEtcdOptions* o) {
  f.Int("etcd-wrapper-port", &o->wrapper_port, 9095,
        "port of the wrapper's HTTP(S) server (/readyz, /stop)");
  f.Bool("backup-restore-tls-enabled", &o->sidecar_tls, false,
         "talk HTTPS to the backup-restore sidecar");
  f.String("backup-restore-host-port", &o->sidecar_host_port, ":8080",
           "host:port of the backup-restore sidecar (no scheme)");
  f.String("backup-restore-ca-cert-bundle-path", &o->sidecar_ca_file, "",
           "CA bundle verifying the sidecar's certificate (required with TLS)");
  f.String("etcd-server-name", &o->etcd_server_name, "",
           "host the readiness client dials, and the name checked against the etcd server "
           "certificate");
  f.Int("etcd-client-port", &o->etcd_client_port, 2379, "etcd client port");
  f.String("etcd-client-cert-path", &o->etcd_client_cert, "",
           "client certificate the readiness client presents to etcd");
  f.String("etcd-client-key-path", &o->etcd_client_key, "", "key of --etcd-client-cert-path");
  f.Duration("etcd-ready-timeout", &o->ready_timeout, std::chrono::milliseconds(0),
             "log an error when the store is not serving clients after this long (0: never); "
             "the wrapper keeps waiting either way");
  f.String("exit-code-file", &o->exit_code_file, "/var/etcd/data/exit_code",
           "file recording the signal that stopped the process");
  f.Duration("bootstrap-timeout", &o->bootstrap_timeout, std::chrono::milliseconds(0),
             "give up (exit 1) when the sidecar has not initialised the data directory within "
             "this time (0: wait without limit)");
  f.String("log-level", &o->log_level, "", "debug, info, warn or error (default info)");
}

Status ValidateStartEtcdOptions(const StartEtcdOptions& o) {
  std::string problems;
  auto add = [&](const std::string& p) { problems += (problems.empty() ? "" : "\n") + p; };
  const std::string& hp = o.sidecar_host_port;
  if (HasPrefix(hp, "http:") || HasPrefix(hp, "https:")) {
    add("--backup-restore-host-port \"" + hp + "\" must not contain a scheme (want host:port)");
  } else if (auto split = common::SplitHostPort(hp); !split.ok()) {
    add("--backup-restore-host-port " + split.status().message());
  }
  if (o.sidecar_tls && common::Trim(o.sidecar_ca_file).empty()) {
    add("--backup-restore-ca-cert-bundle-path is required with --backup-restore-tls-enabled");
  }
  if (o.wrapper_port < 1 || o.wrapper_port > 65535) {
    add("--etcd-wrapper-port " + std::to_string(o.wrapper_port) + " is not a port (1-65535)");
  }
  if (o.etcd_client_port < 1 || o.etcd_client_port > 65535) {
    add("--etcd-client-port " + std::to_string(o.etcd_client_port) + " is not a port (1-65535)");
  }
  if (o.etcd_client_cert.empty() != o.etcd_client_key.empty()) {
    add("--etcd-client-cert-path and --etcd-client-key-path must be given together");
  }
  if (o.exit_code_file.empty()) add("--exit-code-file must not be empty");
  if (problems.empty()) return Status::Ok();
  return InvalidArgument(problems);
}

}  // namespace etcdw::wrapper
