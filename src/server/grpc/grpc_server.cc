#include "etcdw/server/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

#include <climits>
#include <fstream>
#include <sstream>

#include "etcdw/common/logging.h"
#include "grpc_util.h"

namespace etcdw::server {

namespace {

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(what + ": cannot read \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::shared_ptr<grpc::ServerCredentials>> Credentials(const common::Url& url,
                                                             const common::TlsConfig& tls) {
  if (!url.tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions opts;
  ETCDW_ASSIGN_OR_RETURN(std::string cert,
                         ReadFile(tls.cert_file, "client-transport-security.cert-file"));
  ETCDW_ASSIGN_OR_RETURN(std::string key,
                         ReadFile(tls.key_file, "client-transport-security.key-file"));
  opts.pem_key_cert_pairs.push_back({key, cert});
  if (!tls.trusted_ca_file.empty()) {
    ETCDW_ASSIGN_OR_RETURN(
        opts.pem_root_certs,
        ReadFile(tls.trusted_ca_file, "client-transport-security.trusted-ca-file"));
  }
  opts.client_certificate_request = tls.client_cert_auth
                                        ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                        : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  return grpc::SslServerCredentials(opts);
}

}  // namespace

Result<std::unique_ptr<GrpcServer>> GrpcServer::Start(EtcdServer& server) {
  const common::EtcdConfig& cfg = server.config();
  std::unique_ptr<GrpcServer> g(new GrpcServer());
  grpc::ServerBuilder b;
  // etcd: requests up to max-request-bytes plus 512 KiB of gRPC overhead; responses unbounded.
  b.SetMaxReceiveMessageSize(static_cast<int>(cfg.max_request_bytes + 512 * 1024));
  b.SetMaxSendMessageSize(INT_MAX);
  // Refuse to share a port with another process (gRPC enables SO_REUSEPORT by default).
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // etcd's keepalive policy: clients may ping every 5 s, even without calls in flight.
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 2 * 60 * 60 * 1000);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20 * 1000);

  g->ports_.assign(cfg.listen_client_urls.size(), 0);
  for (size_t i = 0; i < cfg.listen_client_urls.size(); ++i) {
    const common::Url& url = cfg.listen_client_urls[i];
    ETCDW_ASSIGN_OR_RETURN(auto creds, Credentials(url, cfg.client_tls));
    b.AddListeningPort(url.HostPort(), creds, &g->ports_[i]);
  }
  g->calls_ = std::make_unique<grpcapi::CallTracker>();
  g->services_.push_back(grpcapi::NewKvService(server, *g->calls_));
  g->services_.push_back(grpcapi::NewWatchService(server));
  g->services_.push_back(grpcapi::NewLeaseService(server, *g->calls_));
  g->services_.push_back(grpcapi::NewMaintenanceService(server, *g->calls_));
  g->services_.push_back(grpcapi::NewClusterService(server, *g->calls_));
  for (auto& s : g->services_) b.RegisterService(s.get());

  g->server_ = b.BuildAndStart();
  for (size_t i = 0; i < cfg.listen_client_urls.size(); ++i) {
    if (!g->server_ || g->ports_[i] == 0) {
      if (g->server_) g->server_->Shutdown();
      return Unavailable("listen-client-urls: cannot listen on " +
                         cfg.listen_client_urls[i].ToString() +
                         " (address in use, not local, or not permitted)");
    }
  }
  for (size_t i = 0; i < cfg.listen_client_urls.size(); ++i) {
    log::Info("serving client requests", {log::F("address", cfg.listen_client_urls[i].ToString()),
                                          log::F("port", g->ports_[i])});
  }
  return g;
}

void GrpcServer::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_ || !server_) return;
  shut_down_ = true;
  // Let calls being answered finish (bounded by `grace`), then stop at once: streams are
  // cancelled and idle client connections do not hold the stop up.
  if (!calls_->WaitIdle(grace)) log::Warn("stopping with client calls still in flight");
  server_->Shutdown(std::chrono::system_clock::now());
}

GrpcServer::GrpcServer() = default;

GrpcServer::~GrpcServer() { Shutdown(std::chrono::milliseconds(0)); }

}  // namespace etcdw::server
