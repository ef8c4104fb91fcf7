// The etcd v3 API served by our own HTTP/2 server (libnghttp2) instead of the gRPC library.
//
// IN CONSTRUCTION (docs/design.md, "The native RPC server"): gRPC's library costs more CPU per
// call than everything else a put does, and hands each call between threads; this server reads,
// dispatches and answers on event-loop threads and writes each connection's answers with one
// send. So far it serves the KV, Lease and Cluster services, plaintext, on a loopback port; the
// member starts it only when ETCDW_NATIVE_RPC_PORT is set (the benchmark's switch), beside the gRPC
// library's server, which still serves listen-client-urls.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "etcdw/common/status.h"
#include "etcdw/server/etcd_server.h"

namespace etcdw::server {

struct NativeRpcOptions {
  int port = 0;  // on 127.0.0.1; 0 picks a free one
  // Largest request message accepted (etcd: max-request-bytes plus 512 KiB).
  size_t max_request_message_bytes = (size_t{3} << 19) + (size_t{1} << 19);
  // Event-loop threads; connections are spread over them. Each runs the calls that complete
  // at once (local reads) for its connections, so reads use as many cores as there are loops.
  int threads = 1;
};

class NativeRpcServer {
 public:
  static Result<std::unique_ptr<NativeRpcServer>> Start(EtcdServer& server,
                                                        const NativeRpcOptions& opts);
  // Shutdown(0) if it was not called.
  ~NativeRpcServer();
  NativeRpcServer(const NativeRpcServer&) = delete;
  NativeRpcServer& operator=(const NativeRpcServer&) = delete;

  // Stops accepting connections, tells every client to go away (GOAWAY) and gives calls in
  // flight up to `grace` to be answered; then closes every connection. Answers arriving later
  // are dropped.
  void Shutdown(std::chrono::milliseconds grace);
  int port() const;

  struct Impl;

 private:
  NativeRpcServer() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace etcdw::server
