// TLS for the native server's client connections (OpenSSL on a non-blocking socket): the
// server certificate from client-transport-security, HTTP/2 negotiated by ALPN ("h2", which
// gRPC clients require), and with client-cert-auth every client's certificate verified against
// trusted-ca-file, as etcd's client listener does.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "etcdw/common/config.h"
#include "etcdw/common/status.h"

struct ssl_ctx_st;
struct ssl_st;

namespace etcdw::client_api {

// The certificate and verification settings every TLS connection shares, built by
// common::NewTlsContext (etcdw/common/tls_context.h) as every TLS context in the project is.
class TlsContext {
 public:
  // Errors name the setting whose file cannot be used ("client-transport-security.cert-file").
  // `http2`: HTTP/2 is chosen by ALPN when the client offers it; without, no protocol is
  // chosen and clients speak HTTP/1.1 (the metrics URLs, which serve only HTTP/1.1).
  static Result<std::shared_ptr<TlsContext>> ForServer(const common::TlsConfig& tls,
                                                       bool http2 = true);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

 private:
  friend class TlsSession;
  TlsContext() = default;
  ssl_ctx_st* ctx_ = nullptr;
};

// One connection's TLS state. Read and Write return the bytes moved (> 0), or one of the
// outcomes below; the handshake runs inside them, so a connection is driven exactly as a plain
// one: read when readable, write when there is something to send.
class TlsSession {
 public:
  static constexpr ssize_t kWouldBlock = -1;  // retry when the socket is ready again
  static constexpr ssize_t kClosed = 0;       // the peer closed, or the connection failed

  TlsSession(const std::shared_ptr<TlsContext>& ctx, int fd);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  ssize_t Read(char* buf, size_t n);
  // A write cut short by kWouldBlock must be retried with the same bytes (OpenSSL's rule).
  ssize_t Write(const char* buf, size_t n);
  // Whether the last kWouldBlock waits for the socket to take bytes (not to deliver them).
  bool wants_write() const { return wants_write_; }
  // What ended the connection, for the log ("" when the peer simply closed).
  const std::string& error() const { return error_; }
  // The Common Name of the client certificate the handshake verified (with client-cert-auth:
  // etcd takes it as the user of requests without a token); empty without one.
  const std::string& VerifiedCommonName();

 private:
  ssize_t Outcome(int ret);
  std::shared_ptr<TlsContext> ctx_;
  ssl_st* ssl_ = nullptr;
  bool wants_write_ = false;
  std::string error_;
  std::optional<std::string> common_name_;  // read once, after the handshake
};

}  // namespace etcdw::client_api
