// One builder for every TLS context (OpenSSL SSL_CTX) in the project: the HTTP server and client
// (http.h), the peer transport's listening and dialing sides, and the client API's listener
// (nghttp2 over raw OpenSSL). Asio users take ownership of the result with
// boost::asio::ssl::context(ctx.release()).
//
// Every context gets: TLS 1.2 or newer (TLS 1.3 only on request), OpenSSL's workarounds for
// broken peers (SSL_OP_ALL; none weakens TLS 1.2 or 1.3), no compression, OpenSSL's default
// ciphers, and CA bundles checked to hold at least one certificate. What legitimately differs
// between the users is in TlsContextOptions. Errors name the setting and the file, as
// `<setting_prefix>cert-file "/etc/x.pem": cannot read: No such file or directory`.
//
// Thread-safety: NewTlsContext may run on any thread; the SSL_CTX it returns is OpenSSL's
// (shared by many connections, read-only once built).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "etcdw/common/status.h"

struct ssl_ctx_st;
struct ssl_st;

namespace etcdw::common {

struct TlsContextOptions {
  enum class Side { kServer, kClient };
  // What a server does about client certificates.
  enum class ClientCerts {
    kIgnore,   // asks for none
    kRequest,  // asks for one (naming ca_file's CAs) and verifies it against ca_file, but never
               // fails the handshake over it: the verdict is SSL_get_verify_result's
    kRequire,  // requires one that verifies against ca_file (which must be set), as etcd's
               // client-cert-auth: a client without one fails the handshake
  };

  Side side = Side::kServer;
  // The certificate chain and key presented (PEM). A server needs both; a client may present
  // both (a client certificate) or neither.
  std::string cert_file;
  std::string key_file;
  // Client only: the certificate chain and key as PEM text instead of files (named `cert_pem_name`
  // and `key_pem_name` in errors); a pair of files or a pair of texts, never a mix.
  std::string cert_pem;
  std::string key_pem;
  std::string cert_pem_name = "client certificate (PEM text)";
  std::string key_pem_name = "client key (PEM text)";
  // Verification roots (a PEM bundle): a server's for client certificates, a client's for the
  // server. Loaded whenever set, so that an unusable file is an error at once.
  std::string ca_file;
  // Client only: more roots given as PEM text (named `ca_pem_name` in errors), and OpenSSL's
  // default verify paths (the system's CA store).
  std::string ca_pem;
  std::string ca_pem_name = "CA bundle (PEM text)";
  bool system_roots = false;
  // Client only: verify the server's certificate chain (the name is checked per connection, see
  // ExpectServerName). False accepts any server: for test endpoints only.
  bool verify_server = true;
  // Server only.
  ClientCerts client_certs = ClientCerts::kIgnore;
  // Server only: the protocols chosen by ALPN, in order of preference, when the client offers
  // one of them (e.g. {"h2"}); otherwise, and when empty, no protocol is chosen.
  std::vector<std::string> alpn;
  // Server only: the session ID context (sessions resumed across contexts must not skip their
  // client certificate checks).
  std::string session_id_context = "etcdw";
  bool tls13_only = false;
  // Names in errors: `setting_prefix` precedes every setting's name (e.g.
  // "peer-transport-security."), and `ca_setting` names ca_file.
  std::string setting_prefix;
  std::string ca_setting = "trusted-ca-file";
};

struct SslCtxFree {
  void operator()(ssl_ctx_st* ctx) const;
};
using SslCtxPtr = std::unique_ptr<ssl_ctx_st, SslCtxFree>;

// A context as `options` say, or InvalidArgument naming the setting and file that cannot be
// used (Internal for an OpenSSL failure unrelated to the settings).
Result<SslCtxPtr> NewTlsContext(const TlsContextOptions& options);

// Loads OpenSSL's default verify paths (the system's CA store) into a client context, for users
// that defer it (reading the store takes tens of milliseconds).
Status LoadSystemRoots(ssl_ctx_st* ctx);

// A client connection's check of the server's name, before its handshake: the certificate must
// be valid for `host` (an IP literal against its IP addresses, a name against its DNS names, with
// a wildcard only as a whole left-most label, as Go's crypto/x509 and so etcd verify), and a
// name (not an IP literal) is sent as SNI. A context that does not verify the server
// (verify_server false) enforces nothing.
Status ExpectServerName(ssl_st* ssl, const std::string& host);

// OpenSSL's oldest queued error of this thread as text ("unknown error" when none); the queue is
// cleared.
std::string TlsLibraryError();

}  // namespace etcdw::common
