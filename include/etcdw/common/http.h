// A small HTTP/1.1 server and client (Boost.Beast), plain or TLS, for the control endpoints of
// the pod: the wrapper's /readyz and /stop, and the backup-restore sidecar's API.
//
// Both are deliberately simple: one request per connection is enough for probes and a 1 s
// polling loop, and every operation is bounded by a timeout so that a stuck peer cannot stall
// the caller.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "etcdw/common/status.h"

namespace etcdw::common {

struct HttpRequest {
  std::string method;                        // "GET", "POST", ...
  std::string target;                        // as sent: path and query
  std::string path;                          // target up to '?'
  std::map<std::string, std::string> query;  // decoded query parameters (first value wins)
  std::string body;
  std::string remote_address;         // the caller's IP address
  bool remote_is_loopback = false;    // 127.0.0.0/8 or ::1
  bool client_cert_verified = false;  // TLS only: the caller presented a certificate that
                                      // verified against HttpServerOptions::client_ca_file
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::map<std::string, std::string> headers;  // Content-Type etc.; Content-Length is set
};

struct HttpServerOptions {
  std::string host;  // address to bind; empty: all interfaces
  int port = 0;      // 0: any free port (see HttpServer::port())
  // TLS when both are set: the server's certificate chain and key (PEM).
  std::string cert_file;
  std::string key_file;
  // With TLS: when set, a client certificate is requested (not required) and verified against
  // this CA bundle; the outcome is HttpRequest::client_cert_verified.
  std::string client_ca_file;
  // A connection must deliver its request within this time, or it is closed.
  std::chrono::milliseconds read_timeout{5000};
  size_t max_body_bytes = 1 << 20;
};

// Serves requests on a background thread. Handlers run on that thread, one at a time; they
// must be quick (a handler that wants the process to stop should signal and return).
class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Binds and starts serving. Errors name the address and the problem (bind failure,
  // unreadable certificate or key).
  static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                   Handler handler);
  ~HttpServer();  // Stop()

  int port() const { return port_; }
  bool tls() const { return tls_; }
  // Closes the listener and every open connection and joins the thread. Idempotent.
  void Stop();

  class Impl;

 private:
  HttpServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  bool tls_ = false;
};

struct HttpClientOptions {
  bool tls = false;
  // TLS: the PEM bundle the server must verify against (required with tls), the name checked
  // against the server certificate and sent as SNI, and an optional client certificate.
  std::string ca_file;
  std::string server_name;
  std::string cert_file;
  std::string key_file;
  std::chrono::milliseconds timeout{60000};  // per request: connect, handshake, exchange
};

// Synchronous requests, each on its own connection. Safe to use from one thread at a time.
class HttpClient {
 public:
  // Loads the TLS material. Errors name the file and the problem; a CA bundle without any
  // certificate is an error (gardener's accepts it and then fails every handshake).
  static Result<std::unique_ptr<HttpClient>> Create(const HttpClientOptions& options);
  ~HttpClient();

  // `host_port` is "host:port"; an empty host means the local machine. `cancel`, when given and
  // set, aborts the request (checked at least every 50 ms) with a kCanceled status.
  Result<HttpResponse> Request(const std::string& method, const std::string& host_port,
                               const std::string& target,
                               const std::atomic<bool>* cancel = nullptr);
  Result<HttpResponse> Get(const std::string& host_port, const std::string& target,
                           const std::atomic<bool>* cancel = nullptr) {
    return Request("GET", host_port, target, cancel);
  }

  class Impl;

 private:
  HttpClient() = default;
  std::unique_ptr<Impl> impl_;
  HttpClientOptions options_;
};

// Splits "host:port" at the last ':' (brackets around an IPv6 host are removed). The host may
// be empty; the port must be a number in 1..65535.
Result<std::pair<std::string, int>> SplitHostPort(const std::string& host_port);

}  // namespace etcdw::common
