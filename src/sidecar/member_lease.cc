#include "etcdw/sidecar/member_lease.h"

#include <cstdio>

#include "etcdw/common/logging.h"
#include "etcdw/sidecar/peer_urls.h"

namespace etcdw::sidecar {

std::string MemberIdentity(uint64_t member_id, uint64_t cluster_id, bool leader) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%llx:%llx:", static_cast<unsigned long long>(member_id),
                static_cast<unsigned long long>(cluster_id));
  return std::string(buf) + (leader ? "Leader" : "Member");
}

MemberLeaseRenewer::MemberLeaseRenewer(kube::KubeClient& client, MemberLeaseOptions options,
                                       const common::Clock& clock)
    : client_(client), options_(std::move(options)), clock_(clock) {}

MemberLeaseRenewer::~MemberLeaseRenewer() { Stop(); }

void MemberLeaseRenewer::Start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = false;
  }
  log::Info("started member lease renewal",
            {log::F("lease", options_.lease_namespace + "/" + options_.lease_name),
             log::F("period-ms", static_cast<int64_t>(options_.period.count()))});
  thread_ = std::thread([this] { Loop(); });
}

void MemberLeaseRenewer::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  log::Info("stopped member lease renewal");
}

void MemberLeaseRenewer::Loop() {
  // One renewal per period on a fixed cadence (the time a renewal takes does not push the next
  // one back), unless a renewal outlasts the period: then the next is one period after it.
  auto due = clock_.Now() + options_.period;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (clock_.WaitUntil(l, cv_, due, [&] { return stop_; })) return;
    }
    Status st = RenewOnce();
    if (!st.ok()) log::Warn("member lease not renewed", {log::F("error", st)});
    due += options_.period;
    if (due < clock_.Now()) due = clock_.Now() + options_.period;
  }
}

Status MemberLeaseRenewer::RenewOnce() {
  const std::string& endpoint = options_.etcd.endpoints.front();
  std::lock_guard<std::mutex> renewing(renew_mu_);
  // One client for every renewal: its channel reconnects by itself when etcd comes back.
  if (etcd_ == nullptr) {
    ETCDW_ASSIGN_OR_RETURN(etcd_, EtcdClient::Connect(options_.etcd, endpoint));
  }
  EtcdClient* const etcd = etcd_.get();
  auto status = etcd->EndpointStatus(options_.etcd.connection_timeout);
  if (!status.ok()) return status.status().WithContext("status of etcd endpoint " + endpoint);
  const uint64_t id = status->header().member_id();
  // A learner refuses MemberList (as etcd 3.4's do): then any member that answers.
  auto members = etcd->MemberList(options_.etcd.connection_timeout);
  if (!members.ok()) {
    auto cluster = EtcdClient::ConnectToCluster(options_.etcd);
    if (!cluster.ok()) return cluster.status().WithContext("member list");
    members = std::move(cluster->members);
  }
  std::vector<std::string> registered;
  for (const auto& m : members->members()) {
    if (m.id() == id) registered.assign(m.peerurls().begin(), m.peerurls().end());
  }
  const bool tls = AllHttps(registered) && options_.serving_registered_urls();
  const std::string identity =
      MemberIdentity(id, status->header().cluster_id(), status->leader() == id);

  // Read first, as gardener's does: a missing lease is reported as such, not created.
  ETCDW_RETURN_IF_ERROR(client_.GetLease(options_.lease_namespace, options_.lease_name)
                            .status()
                            .WithContext("could not fetch member lease"));
  nlohmann::json patch = {
      {"metadata", {{"annotations", {{kTlsEnabledAnnotation, tls ? "true" : "false"}}}}},
      {"spec", {{"holderIdentity", identity}, {"renewTime", kube::MicroTime(clock_.WallNow())}}}};
  ETCDW_RETURN_IF_ERROR(
      client_.MergePatchLease(options_.lease_namespace, options_.lease_name, patch)
          .status()
          .WithContext("failed to renew member lease"));
  log::Debug("renewed member lease", {log::F("holder", identity), log::F("tls-enabled", tls)});
  return Status::Ok();
}

}  // namespace etcdw::sidecar
