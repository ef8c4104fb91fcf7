#include "tls_session.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "etcdw/common/tls_context.h"

namespace etcdw::client_api {

namespace {

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
  common::TlsContextOptions t;
  t.side = common::TlsContextOptions::Side::kServer;
  t.cert_file = tls.cert_file;
  t.key_file = tls.key_file;
  t.ca_file = tls.trusted_ca_file;
  t.client_certs = tls.client_cert_auth ? common::TlsContextOptions::ClientCerts::kRequire
                                        : common::TlsContextOptions::ClientCerts::kIgnore;
  // "h2" when the client offers it. A client that does not offer it gets no ALPN answer and
  // fails at the HTTP/2 preface, as with any server that speaks only HTTP/2.
  if (http2) t.alpn = {"h2"};
  t.session_id_context = "etcdw-client";
  t.setting_prefix = "client-transport-security.";
  ETCDW_ASSIGN_OR_RETURN(common::SslCtxPtr ctx, common::NewTlsContext(t));
  // The sessions are driven by hand on non-blocking sockets (TlsSession).
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
  std::shared_ptr<TlsContext> c(new TlsContext());
  c->ctx_ = ctx.release();
  return c;
}

TlsContext::~TlsContext() {
  if (ctx_) SSL_CTX_free(ctx_);
}

TlsSession::TlsSession(const std::shared_ptr<TlsContext>& ctx, int fd) : ctx_(ctx) {
  ssl_ = SSL_new(ctx_->ctx_);
  BIO* bio = BIO_new(SocketMethod());
  // The BIO's data is the socket itself (read back by SocketMethod), not a pointer to anything.
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl_, bio, bio);  // the session owns it
  SSL_set_accept_state(ssl_);
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

const std::string& TlsSession::VerifiedCommonName() {
  if (common_name_) return *common_name_;
  std::string cn;
  const X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert != nullptr && SSL_get_verify_result(ssl_) == X509_V_OK) {
    char buf[256];
    const int n =
        X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof buf);
    if (n > 0) cn.assign(buf, static_cast<size_t>(n));
  }
  // Asked for only once requests arrive, after the handshake: the answer no longer changes.
  common_name_ = std::move(cn);
  return *common_name_;
}

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
      error_ = common::TlsLibraryError();
      return kClosed;
  }
}

}  // namespace etcdw::client_api
