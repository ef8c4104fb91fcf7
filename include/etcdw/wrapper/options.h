// The flags of `etcd-wrapper start-etcd`: gardener's etcd-wrapper flags with their defaults,
// plus ours (--exit-code-file, --bootstrap-timeout, --log-level).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "etcdw/common/flags.h"
#include "etcdw/common/status.h"

namespace etcdw::wrapper {

struct StartEtcdOptions {
  int64_t wrapper_port = 9095;                              // --etcd-wrapper-port
  bool sidecar_tls = false;                                 // --backup-restore-tls-enabled
  std::string sidecar_host_port = ":8080";                  // --backup-restore-host-port
  std::string sidecar_ca_file;                              // --backup-restore-ca-cert-bundle-path
  std::string etcd_server_name;                             // --etcd-server-name
  int64_t etcd_client_port = 2379;                          // --etcd-client-port
  std::string etcd_client_cert;                             // --etcd-client-cert-path
  std::string etcd_client_key;                              // --etcd-client-key-path
  std::chrono::milliseconds ready_timeout{0};               // --etcd-ready-timeout (0: no limit)
  std::string exit_code_file = "/var/etcd/data/exit_code";  // --exit-code-file
  std::chrono::milliseconds bootstrap_timeout{0};           // --bootstrap-timeout (0: none)
  std::string log_level;                                    // --log-level (default info)

  // The sidecar's host for TLS verification: the host part of the host-port, or "localhost".
  std::string SidecarServerName() const;
  // "http://:8080" / "https://host:8080", for log lines.
  std::string SidecarBaseUrl() const;
};

void RegisterStartEtcdFlags(common::FlagSet& flags, StartEtcdOptions* o);

// Checks the combination of values; every problem is named, one per line (gardener reports
// them together too): a scheme in the host-port, a host-port without a port, TLS without a CA
// bundle, ports out of range.
Status ValidateStartEtcdOptions(const StartEtcdOptions& o);

}  // namespace etcdw::wrapper
