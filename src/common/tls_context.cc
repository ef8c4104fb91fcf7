#include "etcdw/common/tls_context.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace etcdw::common {

namespace {

using Options = TlsContextOptions;

// Why `path` cannot be opened for reading; empty when it can.
std::string TlsFileUnreadable(const std::string& path) {
  std::ifstream in(path);
  if (in) return "";
  return std::string("cannot read: ") + std::strerror(errno);
}

std::string Setting(const Options& o, const std::string& name) { return o.setting_prefix + name; }

Status TlsFileError(const Options& o, const std::string& setting, const std::string& file,
                    const std::string& why) {
  return InvalidArgument(Setting(o, setting) + " \"" + file + "\": " + why);
}

Status LoadCertificateAndKey(SSL_CTX* ctx, const Options& o) {
  if (std::string why = TlsFileUnreadable(o.cert_file); !why.empty()) {
    return TlsFileError(o, "cert-file", o.cert_file, why);
  }
  if (std::string why = TlsFileUnreadable(o.key_file); !why.empty()) {
    return TlsFileError(o, "key-file", o.key_file, why);
  }
  const auto mismatch = [&o] {
    return InvalidArgument(Setting(o, "key-file") + " \"" + o.key_file + "\" does not match " +
                           Setting(o, "cert-file") + " \"" + o.cert_file + "\"");
  };
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1) {
    return TlsFileError(o, "cert-file", o.cert_file, TlsLibraryError());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return mismatch();
    }
    return TlsFileError(o, "key-file", o.key_file, TlsLibraryError());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return mismatch();
  }
  return Status::Ok();
}

// The client certificate chain (leaf first) and key given as PEM text.
Status LoadCertificateAndKeyPem(SSL_CTX* ctx, const Options& o) {
  ERR_clear_error();
  BIO* certs = BIO_new_mem_buf(o.cert_pem.data(), static_cast<int>(o.cert_pem.size()));
  if (certs == nullptr) return Internal(o.cert_pem_name + ": " + TlsLibraryError());
  Status st;
  X509* leaf = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
  if (leaf == nullptr) {
    st = InvalidArgument(o.cert_pem_name + ": no PEM certificate in it");
  } else if (SSL_CTX_use_certificate(ctx, leaf) != 1) {
    st = InvalidArgument(o.cert_pem_name + ": " + TlsLibraryError());
  }
  X509_free(leaf);
  // The rest of the chain; the context owns each certificate it accepts.
  while (st.ok()) {
    X509* extra = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
    if (extra == nullptr) break;
    if (SSL_CTX_add_extra_chain_cert(ctx, extra) != 1) {
      X509_free(extra);
      st = InvalidArgument(o.cert_pem_name + ": " + TlsLibraryError());
    }
  }
  BIO_free(certs);
  ERR_clear_error();  // the end of the PEM text is queued as an error
  if (!st.ok()) return st;

  BIO* key_bio = BIO_new_mem_buf(o.key_pem.data(), static_cast<int>(o.key_pem.size()));
  if (key_bio == nullptr) return Internal(o.key_pem_name + ": " + TlsLibraryError());
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(key_bio);
  if (key == nullptr) {
    ERR_clear_error();
    return InvalidArgument(o.key_pem_name + ": no PEM private key in it");
  }
  const bool used = SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(key);
  ERR_clear_error();
  if (!used) return InvalidArgument(o.key_pem_name + " does not match " + o.cert_pem_name);
  return Status::Ok();
}

// A bundle without any certificate is refused: OpenSSL would accept it, and every handshake
// would then fail with a confusing verification error.
Status LoadCaFile(SSL_CTX* ctx, const Options& o) {
  if (std::string why = TlsFileUnreadable(o.ca_file); !why.empty()) {
    return TlsFileError(o, o.ca_setting, o.ca_file, why);
  }
  int count = 0;
  if (FILE* f = std::fopen(o.ca_file.c_str(), "r")) {
    while (X509* x = PEM_read_X509(f, nullptr, nullptr, nullptr)) {
      ++count;
      X509_free(x);
    }
    std::fclose(f);
  }
  ERR_clear_error();
  if (count == 0) return TlsFileError(o, o.ca_setting, o.ca_file, "no PEM certificate in the file");
  if (SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) != 1) {
    return TlsFileError(o, o.ca_setting, o.ca_file, TlsLibraryError());
  }
  return Status::Ok();
}

Status LoadCaPem(SSL_CTX* ctx, const Options& o) {
  BIO* bio = BIO_new_mem_buf(o.ca_pem.data(), static_cast<int>(o.ca_pem.size()));
  if (bio == nullptr) return Internal(o.ca_pem_name + ": " + TlsLibraryError());
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int count = 0;
  Status st;
  while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    // A certificate already in the store (a bundle listing one twice) is not an error.
    if (X509_STORE_add_cert(store, x) != 1 &&
        ERR_GET_REASON(ERR_peek_last_error()) != X509_R_CERT_ALREADY_IN_HASH_TABLE) {
      st = InvalidArgument(o.ca_pem_name + ": " + TlsLibraryError());
    }
    ++count;
    X509_free(x);
  }
  BIO_free(bio);
  ERR_clear_error();
  if (!st.ok()) return st;
  if (count == 0) return InvalidArgument(o.ca_pem_name + ": no PEM certificate in it");
  return Status::Ok();
}

// ClientCerts::kRequest: the chain is verified (the verdict is kept for SSL_get_verify_result)
// but the handshake goes on whatever it is.
int AcceptAnyClientCertificate(int /*preverified*/, X509_STORE_CTX* /*ctx*/) { return 1; }

// The ALPN protocols a server chooses from, in wire format (length-prefixed), owned by its
// SSL_CTX through this ex_data index and freed with it.
void FreeAlpnList(void* /*parent*/, void* ptr, CRYPTO_EX_DATA* /*ad*/, int /*idx*/,
                  long /*argl*/,  // NOLINT(google-runtime-int): OpenSSL's type
                  void* /*argp*/) {
  delete static_cast<std::string*>(ptr);
}

int AlpnListIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, FreeAlpnList);
  return index;
}

// The first of the server's protocols that the client offers; no answer when there is none (a
// client then speaks what it would without ALPN).
int SelectAlpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
               const unsigned char* in, unsigned int inlen, void* arg) {
  const auto* ours = static_cast<const std::string*>(arg);
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, reinterpret_cast<const unsigned char*>(ours->data()),
                            static_cast<unsigned int>(ours->size()), in,
                            inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

Status SetAlpn(SSL_CTX* ctx, const std::vector<std::string>& protocols) {
  auto wire = std::make_unique<std::string>();
  for (const auto& p : protocols) {
    if (p.empty() || p.size() > 255) return InvalidArgument("TLS: bad ALPN protocol \"" + p + "\"");
    wire->push_back(static_cast<char>(p.size()));
    *wire += p;
  }
  if (SSL_CTX_set_ex_data(ctx, AlpnListIndex(), wire.get()) != 1) {
    return Internal("TLS: " + TlsLibraryError());
  }
  SSL_CTX_set_alpn_select_cb(ctx, SelectAlpn, wire.release());  // freed with the context
  return Status::Ok();
}

Status SetUpServer(SSL_CTX* ctx, const Options& o) {
  const auto& sid = o.session_id_context;
  if (SSL_CTX_set_session_id_context(ctx, reinterpret_cast<const unsigned char*>(sid.data()),
                                     static_cast<unsigned int>(sid.size())) != 1) {
    return Internal("TLS: session ID context: " + TlsLibraryError());
  }
  if (o.client_certs != Options::ClientCerts::kIgnore) {
    if (o.ca_file.empty()) {
      return InvalidArgument(Setting(o, "client-cert-auth") + " needs " + Setting(o, o.ca_setting) +
                             " to verify client certificates");
    }
    // The CAs named in the certificate request, as Go's servers (and so etcd's) name them.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(ctx, names);
    }
    ERR_clear_error();
  }
  switch (o.client_certs) {
    case Options::ClientCerts::kIgnore:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
      break;
    case Options::ClientCerts::kRequest:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, AcceptAnyClientCertificate);
      break;
    case Options::ClientCerts::kRequire:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      break;
  }
  if (!o.alpn.empty()) return SetAlpn(ctx, o.alpn);
  return Status::Ok();
}

}  // namespace

void SslCtxFree::operator()(ssl_ctx_st* ctx) const { SSL_CTX_free(ctx); }

Result<SslCtxPtr> NewTlsContext(const TlsContextOptions& o) {
  const bool server = o.side == Options::Side::kServer;
  ERR_clear_error();
  SslCtxPtr ctx(SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()));
  if (!ctx) return Internal("TLS: " + TlsLibraryError());
  SSL_CTX_set_options(ctx.get(), SSL_OP_ALL | SSL_OP_NO_COMPRESSION);
  const int min_version = o.tls13_only ? TLS1_3_VERSION : TLS1_2_VERSION;
  if (SSL_CTX_set_min_proto_version(ctx.get(), min_version) != 1) {
    return Internal("TLS: cannot set the minimum protocol version: " + TlsLibraryError());
  }

  if (o.cert_file.empty() != o.key_file.empty()) {
    return InvalidArgument(Setting(o, "cert-file") + " and " + Setting(o, "key-file") +
                           " go together: set both or neither");
  }
  if (server && o.cert_file.empty()) {
    return InvalidArgument(Setting(o, "cert-file") + " and " + Setting(o, "key-file") +
                           " are needed to serve TLS");
  }
  if (!o.cert_file.empty()) ETCDW_RETURN_IF_ERROR(LoadCertificateAndKey(ctx.get(), o));
  if (o.cert_pem.empty() != o.key_pem.empty()) {
    return InvalidArgument(o.cert_pem_name + " and " + o.key_pem_name +
                           " go together: set both or neither");
  }
  if (!o.cert_pem.empty()) {
    if (server || !o.cert_file.empty()) {
      return InvalidArgument(o.cert_pem_name + ": only for a client without " +
                             Setting(o, "cert-file"));
    }
    ETCDW_RETURN_IF_ERROR(LoadCertificateAndKeyPem(ctx.get(), o));
  }
  if (!o.ca_file.empty()) ETCDW_RETURN_IF_ERROR(LoadCaFile(ctx.get(), o));

  if (server) {
    ETCDW_RETURN_IF_ERROR(SetUpServer(ctx.get(), o));
    return ctx;
  }
  if (!o.ca_pem.empty()) ETCDW_RETURN_IF_ERROR(LoadCaPem(ctx.get(), o));
  if (o.system_roots) ETCDW_RETURN_IF_ERROR(LoadSystemRoots(ctx.get()));
  SSL_CTX_set_verify(ctx.get(), o.verify_server ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  return ctx;
}

Status LoadSystemRoots(ssl_ctx_st* ctx) {
  ERR_clear_error();
  if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return Internal("TLS: cannot load the system's CA store: " + TlsLibraryError());
  }
  return Status::Ok();
}

Status ExpectServerName(ssl_st* ssl, const std::string& host) {
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  in6_addr addr;
  if (inet_pton(AF_INET, host.c_str(), &addr) == 1 ||
      inet_pton(AF_INET6, host.c_str(), &addr) == 1) {
    // An IP literal: checked against the certificate's IP addresses, never sent as SNI.
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      ERR_clear_error();
      return InvalidArgument("TLS: cannot verify the server's address " + host);
    }
    return Status::Ok();
  }
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (SSL_set_tlsext_host_name(ssl, host.c_str()) != 1 ||
      X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) != 1) {
    ERR_clear_error();
    return InvalidArgument("TLS: cannot verify the server's name " + host);
  }
  return Status::Ok();
}

std::string TlsLibraryError() {
  const unsigned long e = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

}  // namespace etcdw::common
