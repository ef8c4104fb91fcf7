#include "tls.h"

#include <openssl/ssl.h>

#include <string>

#include "etcdw/common/logging.h"
#include "transport_impl.h"

namespace etcdw::peer_transport {

namespace {
constexpr auto kTlsOptions = ssl::context::default_workarounds | ssl::context::no_sslv2 |
                             ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                             ssl::context::no_tlsv1_1 | ssl::context::single_dh_use;

Status TlsFileError(const std::string& what, const std::string& file, const error_code& ec) {
  return InvalidArgument("peer-transport-security: " + what + " \"" + file +
                         "\": " + ErrorText(ec));
}

}  // namespace

// The dialing side presents the peer certificate (as etcd peers do) and verifies the server
// against trusted-ca-file, or without one against the system's CAs. Those are loaded at the
// first dial that uses the context: reading the system's bundle takes ~40 ms, which every start
// would pay without a single https peer.
Status ClientTls::Init(const common::TlsConfig& tls) {
  error_code ec;
  ctx_.emplace(ssl::context::tls_client);
  ssl::context& c = *ctx_;
  c.set_options(kTlsOptions);
  if (tls.HasCertificate()) {
    if (c.use_certificate_chain_file(tls.cert_file, ec); ec) {
      return TlsFileError("cert-file", tls.cert_file, ec);
    }
    if (c.use_private_key_file(tls.key_file, ssl::context::pem, ec); ec) {
      return TlsFileError("key-file", tls.key_file, ec);
    }
  }
  if (!tls.trusted_ca_file.empty()) {
    if (c.load_verify_file(tls.trusted_ca_file, ec); ec) {
      return TlsFileError("trusted-ca-file", tls.trusted_ca_file, ec);
    }
  }
  system_cas_ = tls.trusted_ca_file.empty();
  c.set_verify_mode(ssl::verify_peer);
  return Status::Ok();
}

ssl::context& ClientTls::Get() {
  if (system_cas_) {
    std::call_once(system_cas_once_, [this] {
      error_code ec;
      ctx_->set_default_verify_paths(ec);
      if (ec)
        log::Warn("cannot load the system's CA certificates", {log::F("error", ec.message())});
    });
  }
  return *ctx_;
}

Status TransportImpl::InitTls() {
  const common::TlsConfig& tls = opts_.tls;
  error_code ec;
  bool https_listener = false;
  for (const auto& u : opts_.listen_urls) https_listener |= u.tls();
  if (https_listener) {
    if (!tls.HasCertificate()) {
      for (const auto& u : opts_.listen_urls) {
        if (u.tls()) {
          return InvalidArgument("listen-peer-urls " + u.ToString() +
                                 ": https requires peer-transport-security cert-file and key-file");
        }
      }
    }
    server_tls_.emplace(ssl::context::tls_server);
    ssl::context& c = *server_tls_;
    c.set_options(kTlsOptions);
    if (c.use_certificate_chain_file(tls.cert_file, ec); ec)
      return TlsFileError("cert-file", tls.cert_file, ec);
    if (c.use_private_key_file(tls.key_file, ssl::context::pem, ec); ec) {
      return TlsFileError("key-file", tls.key_file, ec);
    }
    static const unsigned char kSessionContext[] = "etcdw-peer";
    SSL_CTX_set_session_id_context(c.native_handle(), kSessionContext, sizeof kSessionContext - 1);
    if (tls.client_cert_auth) {
      if (tls.trusted_ca_file.empty()) {
        return InvalidArgument(
            "peer-transport-security: client-cert-auth requires trusted-ca-file");
      }
      if (c.load_verify_file(tls.trusted_ca_file, ec); ec) {
        return TlsFileError("trusted-ca-file", tls.trusted_ca_file, ec);
      }
      if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(tls.trusted_ca_file.c_str())) {
        SSL_CTX_set_client_CA_list(c.native_handle(), names);
      }
      c.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    } else {
      c.set_verify_mode(ssl::verify_none);
    }
  }
  return client_tls_.Init(tls);
}

}  // namespace etcdw::peer_transport
