#include "tls_session.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace etcdw::client_api {

namespace {

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

Status FileError(const std::string& setting, const std::string& file) {
  return InvalidArgument("client-transport-security." + setting + ": cannot use \"" + file +
                         "\": " + OpenSslError());
}

// Picks "h2" when the client offers it. A client that does not offer it gets no ALPN answer and
// fails at the HTTP/2 preface, as with any server that speaks only HTTP/2.
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
  static const unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kH2, sizeof kH2, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// The socket under a TLS session, as OpenSSL's own socket BIO but sending with MSG_NOSIGNAL: a
// client that went away must end its connection, not the process (SIGPIPE).
int FdOf(BIO* b) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

int SocketWrite(BIO* b, const char* data, int n) {
  BIO_clear_retry_flags(b);
  const ssize_t r = send(FdOf(b), data, static_cast<size_t>(n), MSG_NOSIGNAL);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) BIO_set_retry_write(b);
  return static_cast<int>(r);
}

int SocketRead(BIO* b, char* data, int n) {
  BIO_clear_retry_flags(b);
  const ssize_t r = recv(FdOf(b), data, static_cast<size_t>(n), 0);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) BIO_set_retry_read(b);
  return static_cast<int>(r);
}

long SocketCtrl(BIO*, int cmd, long, void*) {  // NOLINT(google-runtime-int): OpenSSL's type
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

const BIO_METHOD* SocketMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "etcdw socket");
    BIO_meth_set_write(m, SocketWrite);
    BIO_meth_set_read(m, SocketRead);
    BIO_meth_set_ctrl(m, SocketCtrl);
    return m;
  }();
  return method;
}

}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::ForServer(const common::TlsConfig& tls,
                                                          bool http2) {
  if (!tls.HasCertificate()) {
    return InvalidArgument(
        "client-transport-security: an https client URL needs cert-file and key-file");
  }
  std::shared_ptr<TlsContext> c(new TlsContext());
  c->ctx_ = SSL_CTX_new(TLS_server_method());
  if (!c->ctx_) return Internal("TLS: " + OpenSslError());
  SSL_CTX_set_min_proto_version(c->ctx_, TLS1_2_VERSION);
  SSL_CTX_set_mode(c->ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_use_certificate_chain_file(c->ctx_, tls.cert_file.c_str()) != 1) {
    return FileError("cert-file", tls.cert_file);
  }
  if (SSL_CTX_use_PrivateKey_file(c->ctx_, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return FileError("key-file", tls.key_file);
  }
  if (SSL_CTX_check_private_key(c->ctx_) != 1) return FileError("key-file", tls.key_file);
  if (!tls.trusted_ca_file.empty() &&
      SSL_CTX_load_verify_locations(c->ctx_, tls.trusted_ca_file.c_str(), nullptr) != 1) {
    return FileError("trusted-ca-file", tls.trusted_ca_file);
  }
  if (tls.client_cert_auth) {
    SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  if (http2) SSL_CTX_set_alpn_select_cb(c->ctx_, SelectAlpn, nullptr);
  return c;
}

TlsContext::~TlsContext() {
  if (ctx_) SSL_CTX_free(ctx_);
}

TlsSession::TlsSession(const std::shared_ptr<TlsContext>& ctx, int fd) : ctx_(ctx) {
  ssl_ = SSL_new(ctx_->ctx_);
  BIO* bio = BIO_new(SocketMethod());
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl_, bio, bio);  // the session owns it
  SSL_set_accept_state(ssl_);
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

ssize_t TlsSession::Read(char* buf, size_t n) {
  ERR_clear_error();
  return Outcome(SSL_read(ssl_, buf, static_cast<int>(n)));
}

ssize_t TlsSession::Write(const char* buf, size_t n) {
  ERR_clear_error();
  return Outcome(SSL_write(ssl_, buf, static_cast<int>(n)));
}

ssize_t TlsSession::Outcome(int ret) {
  if (ret > 0) return ret;
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      wants_write_ = false;
      return kWouldBlock;
    case SSL_ERROR_WANT_WRITE:
      wants_write_ = true;
      return kWouldBlock;
    case SSL_ERROR_ZERO_RETURN:
      return kClosed;
    case SSL_ERROR_SYSCALL:
      if (errno == EINTR || errno == EAGAIN) {
        wants_write_ = false;
        return kWouldBlock;
      }
      if (errno != 0) error_ = std::strerror(errno);
      return kClosed;
    default:
      error_ = OpenSslError();
      return kClosed;
  }
}

}  // namespace etcdw::client_api
