#include "tls.h"

#include <openssl/ssl.h>

#include <string>

#include "etcdw/common/logging.h"
#include "etcdw/common/tls_context.h"
#include "transport_impl.h"

namespace etcdw::peer_transport {

namespace {

// Both sides' settings from peer-transport-security; errors name its settings.
common::TlsContextOptions TlsOptions(const common::TlsConfig& tls,
                                     common::TlsContextOptions::Side side) {
  common::TlsContextOptions t;
  t.side = side;
  t.cert_file = tls.cert_file;
  t.key_file = tls.key_file;
  t.ca_file = tls.trusted_ca_file;
  t.setting_prefix = "peer-transport-security.";
  return t;
}

}  // namespace

// The dialing side presents the peer certificate (as etcd peers do) and verifies the server
// against trusted-ca-file, or without one against the system's CAs. Those are loaded at the
// first dial that uses the context: reading the system's bundle takes ~40 ms, which every start
// would pay without a single https peer.
Status ClientTls::Init(const common::TlsConfig& tls) {
  ETCDW_ASSIGN_OR_RETURN(
      common::SslCtxPtr ctx,
      common::NewTlsContext(TlsOptions(tls, common::TlsContextOptions::Side::kClient)));
  ctx_.emplace(ctx.release());  // the Asio context owns it from here
  system_cas_ = tls.trusted_ca_file.empty();
  return Status::Ok();
}

ssl::context& ClientTls::Get() {
  if (system_cas_) {
    std::call_once(system_cas_once_, [this] {
      Status st = common::LoadSystemRoots(ctx_->native_handle());
      if (!st.ok()) {
        log::Warn("cannot load the system's CA certificates", {log::F("error", st.message())});
      }
    });
  }
  return *ctx_;
}

// The listening side, for https listen URLs: the peer certificate, and with client-cert-auth
// every dialer's certificate required and verified against trusted-ca-file.
Status TransportImpl::InitTls() {
  const common::TlsConfig& tls = opts_.tls;
  for (const auto& u : opts_.listen_urls) {
    if (!u.tls()) continue;
    if (!tls.HasCertificate()) {
      return InvalidArgument("listen-peer-urls " + u.ToString() +
                             ": https requires peer-transport-security cert-file and key-file");
    }
    if (!server_tls_) {
      common::TlsContextOptions t = TlsOptions(tls, common::TlsContextOptions::Side::kServer);
      t.client_certs = tls.client_cert_auth ? common::TlsContextOptions::ClientCerts::kRequire
                                            : common::TlsContextOptions::ClientCerts::kIgnore;
      t.session_id_context = "etcdw-peer";
      ETCDW_ASSIGN_OR_RETURN(common::SslCtxPtr ctx, common::NewTlsContext(t));
      server_tls_.emplace(ctx.release());
    }
  }
  return client_tls_.Init(tls);
}

}  // namespace etcdw::peer_transport
