// Peer TLS enablement (gardener §10, seed 002): at every start of `etcdbrctl server`, once the
// local member answers, the peer URLs the etcd config template gives this member are compared
// with the ones the cluster has registered for it. When the template names a URL the cluster
// does not know (http → https), the member's registration is updated (MemberUpdate), the
// sidecar waits until the member is healthy again, and with --use-etcd-wrapper it asks the
// wrapper to restart etcd (POST /stop on the host of the first --endpoints URL, port
// --etcd-wrapper-port) so that etcd listens on the new URLs, then waits for it to answer
// again. A member already registered with the configured URLs is left alone.
//
// PeerUrlState is what the member lease reports as `member.etcd.gardener.cloud/tls-enabled`:
// true only when every peer URL the member has registered is https and the member serves
// there (nothing was updated in this run, or the restart after the update has happened).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/sidecar/etcd_client.h"

namespace etcdw::sidecar {

struct PeerUrlUpdateOptions {
  EtcdConnectionOptions etcd;           // --endpoints[0] is the local member
  std::vector<std::string> configured;  // this member's peer URLs from the config template
  int wrapper_port = 9095;              // --etcd-wrapper-port
  // How long to wait for the member to be healthy after the update, and to come back after
  // the restart.
  std::chrono::milliseconds health_timeout{std::chrono::minutes(5)};
  const std::atomic<bool>* cancel = nullptr;  // ends the waits with kCanceled
};

enum class PeerUrlOutcome {
  kUnchanged,  // the cluster already has the configured URLs
  kUpdated,    // the registration was updated and the member is healthy: etcd must now be
               // restarted to listen on the new URLs (RestartEtcdThroughWrapper)
};

// The registration step described above. Errors: the member list or the update failed (after
// retries), or the member did not become healthy.
Result<PeerUrlOutcome> UpdatePeerUrls(const PeerUrlUpdateOptions& options);

// POST /stop to the wrapper (https when the etcd connection uses TLS, verified against
// --cacert), then waits until etcd has gone and answers again. gardener's sidecar exits when
// this fails; so does ours.
Status RestartEtcdThroughWrapper(const PeerUrlUpdateOptions& options);

// True when `urls` is not empty and every one is an https:// URL.
bool AllHttps(const std::vector<std::string>& urls);

// The configured URLs the cluster has not registered (set difference, in the configured order).
std::vector<std::string> UnregisteredUrls(const std::vector<std::string>& configured,
                                          const std::vector<std::string>& registered);

// The wrapper's /stop URL for an etcd endpoint: "<scheme>://<host>:<port>/stop", https when
// `tls`.
Result<std::string> WrapperStopUrl(const std::string& etcd_endpoint, int port, bool tls);

}  // namespace etcdw::sidecar
