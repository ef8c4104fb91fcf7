#include "etcdw/sidecar/server_app.h"

#include <absl/base/thread_annotations.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "etcdw/common/http.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/metrics.h"
#include "etcdw/common/url.h"
#include "etcdw/kube/client.h"
#include "etcdw/sidecar/backup_sync.h"
#include "etcdw/sidecar/defragmenter.h"
#include "etcdw/sidecar/etcd_client.h"
#include "etcdw/sidecar/etcd_config.h"
#include "etcdw/sidecar/http_api.h"
#include "etcdw/sidecar/initializer.h"
#include "etcdw/sidecar/member_lease.h"
#include "etcdw/sidecar/metrics.h"
#include "etcdw/sidecar/peer_urls.h"
#include "etcdw/sidecar/snapshot_leases.h"
#include "etcdw/sidecar/snapshotter.h"

namespace etcdw::sidecar {
namespace {

using std::chrono::milliseconds;

// Sleeps up to `d`, waking early when `stop` is set. Returns false when stopping.
bool SleepUnlessStopped(const std::atomic<bool>& stop, milliseconds d) {
  auto until = std::chrono::steady_clock::now() + d;
  while (!stop.load()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= until) return true;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(until - now, milliseconds(50)));
  }
  return false;
}

// Until the local member answers Status (checked every 4 s, 2 s each, as gardener's); false
// when stopping first.
bool WaitForEtcd(EtcdClient& client, const std::atomic<bool>& stop) {
  bool logged = false;
  for (;;) {
    if (stop.load()) return false;
    auto st = client.EndpointStatus(milliseconds(2000));
    if (st.ok()) return true;
    if (!logged) {
      log::Info("waiting for etcd to answer", {log::F("endpoint", client.endpoint())});
      logged = true;
    }
    if (!SleepUnlessStopped(stop, milliseconds(4000))) return false;
  }
}

std::string PodNamespace() {
  const char* ns = std::getenv("POD_NAMESPACE");
  return ns != nullptr ? ns : "";
}

// Writes the rendered config to $HOME/etcd.conf.yaml (0600), as gardener's sidecar does.
// Requests are served concurrently: one writer at a time.
void KeepRenderedConfig(const std::string& yaml) {
  static std::mutex mu;  // serialises the writers of the file; guards no memory
  std::lock_guard<std::mutex> l(mu);
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return;
  std::string path = std::string(home) + "/etcd.conf.yaml";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t n = write(fd, yaml.data(), yaml.size());
  (void)n;
  close(fd);
}

// What the backup leader runs while it leads: the snapshotter (with a store), restarted with
// gardener's back-off after a failure on a thread of its own, and the defragmentation schedule.
// Start and Stop are called by the owner (the reelection loop), one at a time; the snapshotter
// thread runs Loop().
class Leadership {
 public:
  // `leases`, when given, is told of every snapshot and writes the snapshot leases while this
  // sidecar leads.
  Leadership(SnapStore* store, EtcdClient* client, SnapshotterOptions opts, HttpApi* api,
             EtcdConnectionOptions etcd, CronSchedule defrag_schedule, SnapshotLeaseUpdater* leases,
             BackupSync* secondary_sync)
      : store_(store),
        client_(client),
        opts_(WithLeaseReports(std::move(opts), leases)),
        api_(api),
        etcd_(std::move(etcd)),
        defrag_schedule_(std::move(defrag_schedule)),
        leases_(leases),
        secondary_sync_(secondary_sync) {}
  ~Leadership() { Stop(); }

  void Start() {
    if (!defrag_) {
      defrag_ = std::make_unique<DefragScheduler>(etcd_, defrag_schedule_, std::chrono::minutes(1),
                                                  std::chrono::minutes(1),
                                                  common::SystemClock::Instance(), opts_.metrics);
      defrag_->Start();
    }
    if (store_ == nullptr || thread_.joinable()) return;
    if (leases_ != nullptr) {
      leases_->Start();
      leases_->Sync();
    }
    if (secondary_sync_ != nullptr) secondary_sync_->Start();
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = false;
    }
    thread_ = std::thread([this] { Loop(); });
  }

  void Stop() {
    defrag_.reset();
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
      if (current_) current_->Stop();
    }
    thread_.join();
    api_->SetSnapshotter(nullptr);
    if (leases_ != nullptr) leases_->Stop();
    if (secondary_sync_ != nullptr) secondary_sync_->Stop();
  }

 private:
  static SnapshotterOptions WithLeaseReports(SnapshotterOptions o, SnapshotLeaseUpdater* leases) {
    if (leases == nullptr) return o;
    o.on_full_snapshot = [leases](const SnapshotInfo& full) { leases->FullSnapshotTaken(full); };
    o.on_delta_period = [leases] { leases->DeltaPeriodPassed(); };
    return o;
  }

  void Loop() {
    milliseconds backoff(2000);
    while (true) {
      auto s = std::make_shared<Snapshotter>(*store_, *client_, opts_);
      {
        std::lock_guard<std::mutex> l(mu_);
        if (stopping_) return;
        current_ = s;
      }
      api_->SetSnapshotter(s);
      Status st = s->Run();
      api_->SetSnapshotter(nullptr);
      {
        std::lock_guard<std::mutex> l(mu_);
        current_.reset();
        if (stopping_) return;
      }
      log::Error("snapshotter failed; restarting",
                 {log::F("error", st), log::F("backoff-ms", backoff.count())});
      if (!SleepUnlessStopping(backoff)) return;
      backoff = std::min(backoff * 2, milliseconds(128000));
    }
  }

  bool SleepUnlessStopping(milliseconds d) {
    auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard<std::mutex> l(mu_);
        if (stopping_) return false;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    return true;
  }

  // Set at construction, read-only after (the pointees are thread-safe).
  SnapStore* const store_;
  EtcdClient* const client_;
  const SnapshotterOptions opts_;
  HttpApi* const api_;
  const EtcdConnectionOptions etcd_;
  const CronSchedule defrag_schedule_;
  SnapshotLeaseUpdater* const leases_;  // may be null
  BackupSync* const secondary_sync_;    // may be null
  // The owner's (Start/Stop) only.
  std::unique_ptr<DefragScheduler> defrag_;
  std::thread thread_;  // runs Loop()

  std::mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The snapshotter Loop() runs, so that Stop() can end its Run().
  std::shared_ptr<Snapshotter> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

namespace {

// The garbage collection policy of the snapshotter flags.
Result<GcOptions> GcOptionsOf(const ServerOptions& o) {
  GcOptions gc;
  ETCDW_ASSIGN_OR_RETURN(gc.policy, ParseGcPolicy(o.snapshotter.gc_policy));
  gc.max_backups = static_cast<int>(o.snapshotter.max_backups);
  gc.delta_retention =
      std::chrono::duration_cast<std::chrono::seconds>(o.snapshotter.delta_retention);
  return gc;
}

}  // namespace

Result<SnapshotterOptions> SnapshotterOptionsOf(const ServerOptions& o) {
  SnapshotterOptions s;
  ETCDW_ASSIGN_OR_RETURN(s.schedule, CronSchedule::Parse(o.snapshotter.schedule));
  s.delta_period = o.snapshotter.delta_period;
  s.delta_memory_limit = o.snapshotter.delta_memory_limit;
  s.gc_period = o.snapshotter.gc_period;
  ETCDW_ASSIGN_OR_RETURN(s.gc, GcOptionsOf(o));
  s.compression = o.EffectiveCompression();
  s.temp_dir = o.store.temp_dir;
  s.connection_timeout = o.etcd.connection_timeout;
  s.snapshot_timeout = o.etcd.snapshot_timeout;
  return s;
}

Status RunServer(const ServerOptions& o, const std::atomic<bool>& stop) {
  std::string config_path = EtcdConfigPath();
  ETCDW_ASSIGN_OR_RETURN(EtcdConfigTemplate cfg, EtcdConfigTemplate::Load(config_path));
  const std::string member = cfg.MemberName();
  const size_t cluster_size = cfg.ClusterSize();
  ETCDW_ASSIGN_OR_RETURN(std::vector<std::string> peer_urls, cfg.PeerUrls(member));

  std::unique_ptr<SnapStore> store;
  if (!o.store.provider.empty()) {
    ETCDW_ASSIGN_OR_RETURN(store, OpenSnapStore(o.store));
    log::Info("snapshot store", {log::F("store", store->Describe())});
  }
  // The secondary store (gardener's --secondary-backup-sync-enabled), synced while leading.
  std::unique_ptr<SnapStore> secondary;
  std::unique_ptr<BackupSync> secondary_sync;
  if (store != nullptr && o.secondary.sync_enabled) {
    SnapStoreOptions so = o.secondary.store;
    if (so.provider.empty()) so.provider = o.store.provider;
    so.env_prefix = "SECONDARY_";
    auto opened = OpenSnapStore(so);
    if (!opened.ok()) return opened.status().WithContext("opening the secondary snapshot store");
    secondary = std::move(opened).value();
    log::Info("secondary snapshot store", {log::F("store", secondary->Describe())});
    BackupSyncOptions bo;
    bo.sync_period = o.secondary.sync_period;
    bo.gc_period = o.snapshotter.gc_period;
    ETCDW_ASSIGN_OR_RETURN(bo.gc, GcOptionsOf(o));
    bo.temp_dir = so.temp_dir;
    secondary_sync = std::make_unique<BackupSync>(*store, *secondary, bo);
  } else {
    log::Warn("no storage provider configured: no backups are taken or restored");
  }
  ETCDW_ASSIGN_OR_RETURN(SnapshotterOptions snap_opts, SnapshotterOptionsOf(o));
  // gardener's etcdbr_* metrics, moved by every component below, served on /metrics.
  SidecarMetrics metrics;
  snap_opts.metrics = &metrics;

  // Kubernetes leases: the client, when a lease flag asks for it.
  std::unique_ptr<kube::KubeClient> kube_client;
  std::unique_ptr<SnapshotLeaseUpdater> snapshot_leases;
  const std::string lease_namespace = PodNamespace();
  if (o.leases.member_lease_renewal || o.leases.snapshot_lease_renewal) {
    if (lease_namespace.empty()) {
      return InvalidArgument(
          "POD_NAMESPACE is not set: the Kubernetes leases (--enable-member-lease-renewal, "
          "--enable-snapshot-lease-renewal) live in the pod's namespace");
    }
    auto config = kube::DefaultConfig();
    if (!config.ok()) return config.status().WithContext("Kubernetes API configuration");
    const kube::KubeConfig& kc = *config;
    kube::KubeClientOptions ko;
    ko.timeout = milliseconds(60000);
    ETCDW_ASSIGN_OR_RETURN(kube_client, kube::KubeClient::Create(kc, ko));
    log::Info("Kubernetes API client", {log::F("server", kc.server), log::F("from", kc.source),
                                        log::F("namespace", lease_namespace)});
  }

  // The cluster a restored member belongs to: the template's, as the wrapper will start it.
  InitializerContext init;
  init.options = &o;
  init.store = store.get();
  init.member_name = member;
  init.cluster_size = cluster_size;
  init.peer_urls = peer_urls;
  init.restore_target = RestoreTargetOf(o.restoration);
  init.restore_target.name = member;
  init.restore_target.initial_advertise_peer_urls = peer_urls;
  std::string ic;
  for (const auto& [n, u] : cfg.InitialCluster()) ic += (ic.empty() ? "" : ",") + n + "=" + u;
  if (!ic.empty()) init.restore_target.initial_cluster = ic;
  if (!cfg.InitialClusterToken().empty()) {
    init.restore_target.initial_cluster_token = cfg.InitialClusterToken();
  }
  init.cancel = &stop;
  init.metrics = &metrics;
  if (kube_client != nullptr && o.leases.member_lease_renewal) {
    init.heartbeat_present = [&kube_client, &lease_namespace, &member] {
      auto lease = kube_client->GetLease(lease_namespace, member);
      if (!lease.ok()) {
        log::Warn("cannot read this member's lease", {log::F("error", lease.status())});
        return false;
      }
      return lease->holder_identity.has_value() && !lease->holder_identity->empty();
    };
  }

  HttpApi::Deps deps;
  deps.store = store.get();
  deps.metrics = &metrics;
  deps.initialize = [&init](ValidationMode mode) { return Initialize(init, mode); };
  deps.render_config = [&o, &cfg, &member]() -> Result<std::string> {
    // The running members, when a cluster answers (none when it is being created).
    std::optional<std::vector<EtcdConfigTemplate::Member>> cluster;
    if (auto c = EtcdClient::ConnectToCluster(o.etcd); c.ok()) {
      cluster.emplace();
      for (const auto& m : c->members.members()) cluster->push_back({m.name(), m.islearner()});
    }
    ETCDW_ASSIGN_OR_RETURN(std::string yaml, cfg.Render(member, cluster));
    KeepRenderedConfig(yaml);
    return yaml;
  };
  // Delegation: the leader's sidecar listens on our port at the host of the leader's first
  // client URL (gardener's rule), with TLS when ours has it, verified against --cacert.
  deps.leader_sidecar_url = [&o]() -> Result<std::string> {
    ETCDW_ASSIGN_OR_RETURN(auto c, EtcdClient::Connect(o.etcd, o.etcd.endpoints.front()));
    ETCDW_ASSIGN_OR_RETURN(auto st, c->EndpointStatus(o.etcd.connection_timeout));
    if (st.leader() == 0) return Unavailable("the etcd member knows no leader");
    ETCDW_ASSIGN_OR_RETURN(auto members, c->MemberList(o.etcd.connection_timeout));
    for (const auto& m : members.members()) {
      if (m.id() != st.leader()) continue;
      if (m.clienturls().empty()) return Unavailable("the leader has no client URL");
      ETCDW_ASSIGN_OR_RETURN(common::Url u, common::ParseUrl(m.clienturls(0)));
      u.scheme = o.http.cert_file.empty() ? "http" : "https";
      u.port = static_cast<uint16_t>(o.http.port);
      return u.ToString();
    }
    return Unavailable("the leader is not in the member list");
  };
  deps.leader_client.ca_file = o.etcd.ca_file;
  HttpApi api(std::move(deps));

  common::HttpServerOptions hs;
  hs.port = static_cast<int>(o.http.port);
  hs.cert_file = o.http.cert_file;
  hs.key_file = o.http.key_file;
  // A snapshot taken on request may take minutes: /healthz and the rest keep answering.
  hs.threads = 4;
  ETCDW_ASSIGN_OR_RETURN(auto http,
                         common::HttpServer::Start(
                             hs, [&api](const common::HttpRequest& r) { return api.Handle(r); }));
  log::Info("HTTP API serving",
            {log::F("port", http->port()), log::F("tls", http->tls()), log::F("member", member),
             log::F("cluster-size", static_cast<int64_t>(cluster_size))});

  ETCDW_ASSIGN_OR_RETURN(auto client, EtcdClient::Connect(o.etcd, o.etcd.endpoints.front()));
  ETCDW_ASSIGN_OR_RETURN(CronSchedule defrag_schedule,
                         CronSchedule::Parse(o.defragmentation_schedule));
  if (o.leases.snapshot_lease_renewal && store != nullptr) {
    SnapshotLeaseOptions so;
    so.lease_namespace = lease_namespace;
    so.full_lease_name = o.leases.full_lease_name;
    so.delta_lease_name = o.leases.delta_lease_name;
    snapshot_leases = std::make_unique<SnapshotLeaseUpdater>(*kube_client, *store, so);
  }
  Leadership leadership(store.get(), client.get(), snap_opts, &api, o.etcd, defrag_schedule,
                        snapshot_leases.get(), secondary_sync.get());

  // gardener §3.5: once etcd answers, the peer URL check, then the member heartbeat.
  if (!WaitForEtcd(*client, stop)) {
    http->Stop();
    return Status::Ok();
  }
  std::atomic<bool> serving_registered_urls{true};
  PeerUrlUpdateOptions pu;
  pu.etcd = o.etcd;
  pu.configured = peer_urls;
  pu.wrapper_port = static_cast<int>(o.etcd_wrapper_port);
  pu.cancel = &stop;
  auto peer_update = UpdatePeerUrls(pu);
  if (!peer_update.ok()) {
    log::Error("checking this member's peer URLs failed", {log::F("error", peer_update.status())});
  } else if (*peer_update == PeerUrlOutcome::kUpdated) {
    if (o.use_etcd_wrapper) {
      // gardener exits when the restart cannot be asked for: the pod restarts and tries again.
      ETCDW_RETURN_IF_ERROR(RestartEtcdThroughWrapper(pu));
    } else {
      log::Warn(
          "etcd must be restarted to listen on the new peer URLs: restart the pod, or run the "
          "sidecar with --use-etcd-wrapper");
      serving_registered_urls.store(false);
    }
  }
  std::unique_ptr<MemberLeaseRenewer> heartbeat;
  if (o.leases.member_lease_renewal) {
    MemberLeaseOptions mo;
    mo.lease_namespace = lease_namespace;
    mo.lease_name = member;
    mo.period = o.leases.heartbeat;
    mo.etcd = o.etcd;
    mo.serving_registered_urls = [&serving_registered_urls] {
      return serving_registered_urls.load();
    };
    heartbeat = std::make_unique<MemberLeaseRenewer>(*kube_client, mo);
    heartbeat->Start();
  }

  bool leading = false;
  bool first = true;
  while (SleepUnlessStopped(stop, first ? milliseconds(1000) : o.reelection_period)) {
    first = false;
    auto st = client->EndpointStatus(o.leader_election_timeout);
    if (!st.ok() || st->leader() == 0) {
      if (leading) {
        log::Warn(
            "lost contact with etcd or its leader: no longer the backup leader",
            {log::F("error", st.ok() ? Status(Code::kUnavailable, "no leader") : st.status())});
        leadership.Stop();
        leading = false;
      }
      api.SetHealthy(false);
      continue;
    }
    if (st->header().member_id() == st->leader()) {
      if (!leading) {
        log::Info("became the backup leader", {log::Hex("member-id", st->leader())});
        leading = true;
        leadership.Start();
      }
      api.SetHealthy(true);
      continue;
    }
    if (leading) {
      log::Info("no longer the backup leader", {log::Hex("leader", st->leader())});
      leadership.Stop();
      leading = false;
    }
    api.SetHealthy(false);
    if (st->islearner() && cluster_size > 1) {
      // A learner's own sidecar promotes it once it has caught up (refused until then),
      // through a voting member: a learner refuses the call.
      metrics.is_learner.Set(1);
      auto cluster = EtcdClient::ConnectToCluster(o.etcd);
      const auto started = std::chrono::steady_clock::now();
      Status p = cluster.ok()
                     ? cluster->client->MemberPromote(st->header().member_id(), milliseconds(30000))
                     : cluster.status();
      const bool not_learner = p.message().find("not a learner") != std::string::npos;
      // gardener times the promote call (a refusal too), not a member that is no learner.
      if (cluster.ok() && !not_learner) {
        metrics.member_promote.Observe(p.ok(), common::SecondsSince(started));
      }
      if (p.ok()) metrics.is_learner.Set(0);
      if (p.ok() || not_learner) {
        log::Info("promoted this member to a voting member");
      } else {
        log::Info("learner not promoted yet", {log::F("reason", p)});
      }
    }
  }
  leadership.Stop();
  if (heartbeat) heartbeat->Stop();
  http->Stop();
  return Status::Ok();
}

}  // namespace etcdw::sidecar
