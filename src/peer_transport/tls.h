// The peer transport's TLS set-up: the dialing side's context (ClientTls, shared by every dial of
// a transport or of FetchClusterInfo). tls.cc also holds the listening side's set-up,
// TransportImpl::InitTls, so that both contexts' settings are read in one place; both are built
// by common::NewTlsContext (etcdw/common/tls_context.h), as every TLS context in the project is.
// The server name or address a dial verifies is set per connection, in DialOp (dial.cc).
#pragma once

#include <mutex>
#include <optional>

#include "etcdw/common/config.h"
#include "etcdw/common/status.h"
#include "transport_common.h"

namespace etcdw::peer_transport {

// The TLS context of the dialing side (definitions in tls.cc, with the listening side's set-up).
class ClientTls {
 public:
  // Before the transport (or FetchClusterInfo) runs.
  Status Init(const common::TlsConfig& tls);
  // The context, with the system's CAs loaded on first use when no trusted-ca-file is set. From
  // any thread.
  ssl::context& Get();

 private:
  // Set by Init(), read-only after (no lock); the system's CAs are loaded into ctx_ once, under
  // system_cas_once_.
  std::optional<ssl::context> ctx_;
  bool system_cas_ = false;
  std::once_flag system_cas_once_;
};

}  // namespace etcdw::peer_transport
