#include "etcdw/sidecar/server_app.h"

#include <absl/base/thread_annotations.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "etcdw/common/http.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/url.h"
#include "etcdw/sidecar/defragmenter.h"
#include "etcdw/sidecar/etcd_client.h"
#include "etcdw/sidecar/etcd_config.h"
#include "etcdw/sidecar/http_api.h"
#include "etcdw/sidecar/initializer.h"
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
  Leadership(SnapStore* store, EtcdClient* client, SnapshotterOptions opts, HttpApi* api,
             EtcdConnectionOptions etcd, CronSchedule defrag_schedule)
      : store_(store),
        client_(client),
        opts_(std::move(opts)),
        api_(api),
        etcd_(std::move(etcd)),
        defrag_schedule_(std::move(defrag_schedule)) {}
  ~Leadership() { Stop(); }

  void Start() {
    if (!defrag_) {
      defrag_ = std::make_unique<DefragScheduler>(etcd_, defrag_schedule_);
      defrag_->Start();
    }
    if (store_ == nullptr || thread_.joinable()) return;
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
  }

 private:
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
  // The owner's (Start/Stop) only.
  std::unique_ptr<DefragScheduler> defrag_;
  std::thread thread_;  // runs Loop()

  std::mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The snapshotter Loop() runs, so that Stop() can end its Run().
  std::shared_ptr<Snapshotter> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

Result<SnapshotterOptions> SnapshotterOptionsOf(const ServerOptions& o) {
  SnapshotterOptions s;
  ETCDW_ASSIGN_OR_RETURN(s.schedule, CronSchedule::Parse(o.snapshotter.schedule));
  s.delta_period = o.snapshotter.delta_period;
  s.delta_memory_limit = o.snapshotter.delta_memory_limit;
  s.gc_period = o.snapshotter.gc_period;
  ETCDW_ASSIGN_OR_RETURN(s.gc.policy, ParseGcPolicy(o.snapshotter.gc_policy));
  s.gc.max_backups = static_cast<int>(o.snapshotter.max_backups);
  s.gc.delta_retention =
      std::chrono::duration_cast<std::chrono::seconds>(o.snapshotter.delta_retention);
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
  } else {
    log::Warn("no storage provider configured: no backups are taken or restored");
  }
  ETCDW_ASSIGN_OR_RETURN(SnapshotterOptions snap_opts, SnapshotterOptionsOf(o));

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

  HttpApi::Deps deps;
  deps.store = store.get();
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
  Leadership leadership(store.get(), client.get(), snap_opts, &api, o.etcd, defrag_schedule);
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
      auto cluster = EtcdClient::ConnectToCluster(o.etcd);
      Status p = cluster.ok()
                     ? cluster->client->MemberPromote(st->header().member_id(), milliseconds(30000))
                     : cluster.status();
      if (p.ok() || p.message().find("not a learner") != std::string::npos) {
        log::Info("promoted this member to a voting member");
      } else {
        log::Info("learner not promoted yet", {log::F("reason", p)});
      }
    }
  }
  leadership.Stop();
  http->Stop();
  return Status::Ok();
}

}  // namespace etcdw::sidecar
