// The etcd v3 gRPC API served on listen-client-urls: KV, Watch, Lease, Maintenance and
// Cluster, with etcd's message size limits and keepalive policy, plain or TLS per URL.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/server/etcd_server.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace etcdw::server {

namespace grpcapi {
class CallTracker;
}

class GrpcServer {
 public:
  // Binds every listen-client-url and starts serving. Errors name the URL that failed.
  static Result<std::unique_ptr<GrpcServer>> Start(EtcdServer& server);
  ~GrpcServer();

  // Stops accepting calls; in-flight calls get `grace` to finish before they are cancelled.
  void Shutdown(std::chrono::milliseconds grace);
  // The ports actually bound, in listen-client-urls order (useful with port 0).
  const std::vector<int>& ports() const { return ports_; }

 private:
  GrpcServer();
  std::unique_ptr<grpcapi::CallTracker> calls_;
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<int> ports_;
  bool shut_down_ = false;
};

}  // namespace etcdw::server
