// A small HTTP/1.1 server and client (Boost.Beast), plain or TLS, for the control endpoints of
// the pod: the wrapper's /readyz and /stop, and the backup-restore sidecar's API.
//
// Both are deliberately simple: one request per connection is enough for probes and a 1 s
// polling loop, and every operation is bounded by a timeout so that a stuck peer cannot stall
// the caller.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "etcdw/common/status.h"

namespace etcdw::common {

struct HttpRequest {
  std::string method;                        // "GET", "POST", ...
  std::string target;                        // as sent: path and query
  std::string path;                          // target up to '?'
  std::map<std::string, std::string> query;  // decoded query parameters (first value wins)
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case; the first of repeats wins
  std::string remote_address;                  // the caller's IP address
  bool remote_is_loopback = false;             // 127.0.0.0/8 or ::1
  bool client_cert_verified = false;           // TLS only: the caller presented a certificate that
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
  // The same bound applies to writing the response. A handler may take longer.
  std::chrono::milliseconds read_timeout{5000};
  size_t max_body_bytes = 1 << 20;
  // Threads serving connections. With one, handlers run one at a time and must be quick; with
  // more, a slow handler (a snapshot taken on request) holds only its own thread, and the
  // handler must be safe to call concurrently.
  int threads = 1;
};

// Serves requests on background threads (HttpServerOptions::threads). A handler that wants the
// process to stop should signal and return.
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
  // TLS: the roots the server must verify against (with tls, one of ca_file, ca_pem or
  // system_roots is required, unless insecure_skip_verify), the name checked against the server
  // certificate and sent as SNI (empty: the host dialed), and an optional client certificate.
  std::string ca_file;
  std::string ca_pem;         // a PEM bundle given as text (e.g. from a credentials file)
  bool system_roots = false;  // OpenSSL's default verify paths (the system's CA store)
  // Accepts any server certificate: no verification, no CA needed. For test endpoints only.
  bool insecure_skip_verify = false;
  bool min_tls13 = false;  // refuse TLS 1.2
  std::string server_name;
  std::string cert_file;
  std::string key_file;
  // The client certificate and key as PEM text (e.g. a kubeconfig's -data fields), instead of
  // cert_file and key_file.
  std::string cert_pem;
  std::string key_pem;
  std::chrono::milliseconds timeout{60000};  // per request: connect, handshake, exchange
};

// A request for HttpClient::Send: any method, extra header fields, and a body that is either
// text or a byte range of a file streamed from disk; the response body can stream to a file.
struct HttpClientRequest {
  std::string method = "GET";
  // Dialed as "host:port"; an empty host is the local machine, and so is "localhost" or any
  // name under ".localhost" (RFC 6761: such names are loopback, resolved without DNS).
  std::string host_port;
  std::string target;  // path and query, sent as given (already percent-encoded)
  // Extra header fields, in order. A "Host" field replaces the default (host_port). Do not
  // give Content-Length: it is computed from the body.
  std::vector<std::pair<std::string, std::string>> headers;
  // The body: `body`, or when body_file is set, body_length bytes of that file from
  // body_offset, read in slices while sending (the file must hold them all).
  std::string body;
  std::string body_file;
  int64_t body_offset = 0;
  int64_t body_length = 0;
  // When set, the body of a 2xx response is written to this file (created or truncated, mode
  // 0600) instead of HttpResponse::body; other responses keep their body (the error) in
  // HttpResponse::body. After a failure midway the file holds what arrived.
  std::string response_file;
  // A deadline for the whole exchange; 0: HttpClientOptions::timeout.
  std::chrono::milliseconds timeout{0};
  // When > 0, replaces the deadline: the request fails once no body byte has moved in either
  // direction for this long (connect, handshake and headers count as no progress). For
  // transfers whose size has no useful bound.
  std::chrono::milliseconds stall_timeout{0};
  // When given and set, aborts the request (checked at least every 50 ms) with kCanceled.
  const std::atomic<bool>* cancel = nullptr;
};

// Synchronous requests, each on its own connection and io_context. Thread-safe: requests may
// run from several threads at once (they share only the read-only TLS context).
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
  // The general form. A response of any status is a result. Errors: kUnavailable naming the
  // failed step (resolve, connect, TLS handshake, write, read response), kUnauthenticated for a
  // server certificate that does not verify (a TLS handshake error), kInternal for a body
  // or response file that cannot be opened, read or written, kInvalidArgument for a body range
  // beyond the end of its file, kDeadlineExceeded and kCanceled.
  Result<HttpResponse> Send(const HttpClientRequest& request);

  class Impl;

 private:
  HttpClient() = default;
  std::unique_ptr<Impl> impl_;
  HttpClientOptions options_;
};

// The value of a response header field, its name compared case-insensitively; "" if absent.
std::string HeaderValue(const HttpResponse& response, std::string_view name);

// Splits "host:port" at the last ':' (brackets around an IPv6 host are removed). The host may
// be empty; the port must be a number in 1..65535.
Result<std::pair<std::string, int>> SplitHostPort(const std::string& host_port);

}  // namespace etcdw::common
