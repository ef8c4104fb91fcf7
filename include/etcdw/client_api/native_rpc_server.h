// The client API: the etcd v3 API (KV, Watch, Lease, Maintenance, Cluster, gRPC health) on
// listen-client-urls, with etcd's HTTP/1.1 endpoints (/health, /version, /metrics) beside it,
// served by our own HTTP/2 server (libnghttp2) rather than the gRPC library's (docs/design.md,
// "The client API server"): gRPC's library costs more CPU per call than everything else a put
// does and hands each call between threads; this server reads, dispatches and answers on
// event-loop threads and writes each connection's answers with one send.
//
// The library (src/client_api/, include/etcdw/client_api/) owns the wire: HTTP/2 and gRPC's
// framing, TLS sessions, request parsing and the mapping of errors to gRPC status codes. It
// calls the member core (member/etcd_server.h) and uses common and proto; it does not link the
// gRPC library. The allowed graph: scripts/include-rules.txt.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "etcdw/common/config.h"
#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/member/etcd_server.h"

namespace etcdw::client_api {

struct NativeRpcOptions {
  // Where clients connect: etcd's listen-client-urls, http or https (port 0 picks a free one).
  std::vector<common::Url> urls;
  // listen-metrics-urls: HTTP/1.1 listeners serving /metrics and /health only (http, or https
  // with the client certificate settings, as etcd's).
  std::vector<common::Url> metrics_urls;
  // The certificate (and client verification) for the https URLs.
  common::TlsConfig tls;
  // Largest request message accepted (etcd: max-request-bytes plus 512 KiB).
  size_t max_request_message_bytes = (size_t{3} << 19) + (size_t{1} << 19);
  // Whether the gRPC gateway (etcd's JSON API under /v3/) answers on the client URLs.
  bool enable_grpc_gateway = true;
  // Event-loop threads; connections are spread over them. Each runs the calls that complete
  // at once (local reads) for its connections, so reads use as many cores as there are loops.
  int threads = 1;
  // etcd's keepalive settings (grpc-keepalive-interval, -timeout, -min-time): a connection
  // that sent nothing for `keepalive_time` is pinged and closed if it still sends nothing
  // within `keepalive_timeout`; a client may ping every `keepalive_min_time` while it has calls
  // open (every 2 h otherwise), and is sent away with GOAWAY "too_many_pings" when it pings
  // more often three times in a row.
  std::chrono::milliseconds keepalive_time = std::chrono::hours(2);
  std::chrono::milliseconds keepalive_timeout = std::chrono::seconds(20);
  std::chrono::milliseconds keepalive_min_time = std::chrono::seconds(5);
  // Slow clients (etcd has no such limit): a connection must show its protocol (the TLS
  // handshake included) and each HTTP/1.x request its whole head within `request_read_timeout`
  // of its first byte, and a request body may pause no longer. Otherwise an HTTP/1.x client is
  // answered "408 Request Timeout" and the connection closes; one that has not shown its
  // protocol (for HTTP/2: its preface and its first frame's header) is closed. HTTP/2
  // connections after that, and HTTP/1.x connections idle between requests, are the keepalive's.
  std::chrono::milliseconds request_read_timeout = std::chrono::seconds(30);
  // Client connections (every URL's together) open at once. At the limit, and while the
  // process is out of file descriptors, nothing more is accepted: new clients wait in the
  // listen backlog until a connection closes. 0: the open-file limit less a reserve for the
  // store, the peers and snapshots (an eighth of it, at least 512; ConnectionLimit).
  size_t max_connections = 0;
  // max_connections, or what it stands for when it is 0.
  size_t ConnectionLimit() const;

  // What a member's configuration asks for, one event loop per core.
  static NativeRpcOptions FromConfig(const common::EtcdConfig& cfg);
};

class NativeRpcServer {
 public:
  // Binds every URL and starts serving. Errors name the URL or the TLS file that failed.
  static Result<std::unique_ptr<NativeRpcServer>> Start(member::EtcdServer& server,
                                                        const NativeRpcOptions& opts);
  // Shutdown(0) if it was not called.
  ~NativeRpcServer();
  NativeRpcServer(const NativeRpcServer&) = delete;
  NativeRpcServer& operator=(const NativeRpcServer&) = delete;

  // Stops accepting connections, tells every client to go away (GOAWAY) and gives calls in
  // flight up to `grace` to be answered; then closes every connection. Answers arriving later
  // are dropped.
  void Shutdown(std::chrono::milliseconds grace);
  // The ports bound: `urls`, then `metrics_urls`, in order.
  const std::vector<int>& ports() const;

  struct Impl;

 private:
  NativeRpcServer() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace etcdw::client_api
