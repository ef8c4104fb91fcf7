// The member heartbeat (gardener §9.3, --enable-member-lease-renewal): every
// --k8s-heartbeat-duration (the first one period after Start, then on that cadence), the
// Kubernetes Lease named after
// this member in POD_NAMESPACE gets
//   spec.holderIdentity  "<member ID hex>:<cluster ID hex>:Leader" or ":Member", from the local
//                        member's Status (--endpoints[0])
//   spec.renewTime       now (MicroTime)
//   metadata.annotations["member.etcd.gardener.cloud/tls-enabled"]  "true" or "false"
// as one JSON merge patch, so that every other field and annotation stays as it is. The lease
// is never created (etcd-druid creates it). A renewal that fails (the member does not answer,
// the API server refuses or is away) is logged and tried again at the next period: the
// heartbeat going stale is the signal etcd-druid reads.
//
// Threads: Start() runs the renewals on a thread of the renewer's own; Stop() ends it.
// RenewOnce() may be called from any thread (tests call it directly).
#pragma once

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"
#include "etcdw/kube/client.h"
#include "etcdw/sidecar/etcd_client.h"

namespace etcdw::sidecar {

inline constexpr char kTlsEnabledAnnotation[] = "member.etcd.gardener.cloud/tls-enabled";

struct MemberLeaseOptions {
  std::string lease_namespace;  // POD_NAMESPACE
  std::string lease_name;       // the member name
  std::chrono::milliseconds period{30000};
  EtcdConnectionOptions etcd;  // endpoints[0]: the local member
  // Whether the member serves its registered https peer URLs (see peer_urls.h): the annotation
  // is "true" only when this says so and every peer URL the member has registered is https.
  std::function<bool()> serving_registered_urls = [] { return true; };
};

// "<member ID hex>:<cluster ID hex>:Leader|Member", lower-case hex without padding.
std::string MemberIdentity(uint64_t member_id, uint64_t cluster_id, bool leader);

class MemberLeaseRenewer {
 public:
  // `client` and `clock` must outlive the renewer.
  MemberLeaseRenewer(kube::KubeClient& client, MemberLeaseOptions options,
                     const common::Clock& clock = common::SystemClock::Instance());
  ~MemberLeaseRenewer();  // Stop()

  void Start();
  void Stop();
  // One renewal; the error says which step failed (the member's status, the member list, the
  // lease read, the patch).
  Status RenewOnce();

 private:
  void Loop();

  kube::KubeClient& client_;
  const MemberLeaseOptions options_;
  const common::Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // One renewal at a time; the local member's client, made by the first one.
  std::mutex renew_mu_;
  std::unique_ptr<EtcdClient> etcd_ ABSL_GUARDED_BY(renew_mu_);
  std::thread thread_;
};

}  // namespace etcdw::sidecar
