// The sidecar's HTTP API, gardener's routes (§2):
//   /initialization/start?mode=full|sanity   starts initialisation when the state is New; 200
//   /initialization/status                   New | Progress | Successful | Failed; a final state
//                                            is reported once, then the state is New again
//   /config                                  the etcd config rendered for this member (YAML)
//   /snapshot/full[?final=true]              an out-of-schedule full snapshot (JSON descriptor)
//   /snapshot/delta                          an out-of-schedule delta snapshot (JSON or null)
//   /snapshot/latest                         {"fullSnapshot": ..., "deltaSnapshots": [...]}
//   /healthz                                 200 {"health":true} / 503 {"health":false}
//   /metrics                                 Prometheus text format 0.0.4 (sidecar/metrics.h);
//                                            404 without Deps::metrics
// Snapshot routes answer 405 when no store is configured. On a sidecar that is not the backup
// leader, /snapshot/full and /snapshot/delta are proxied to the leader's sidecar (gardener's
// delegation: its /healthz must say {"health":true} first; any failure -> 405), and
// /snapshot/latest is answered from the store, which every member's sidecar shares.
#pragma once

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "etcdw/common/http.h"
#include "etcdw/sidecar/metrics.h"
#include "etcdw/sidecar/snap_store.h"
#include "etcdw/sidecar/snapshot_triggers.h"
#include "etcdw/sidecar/validator.h"

namespace etcdw::sidecar {

enum class InitState { kNew, kProgress, kSuccessful, kFailed };
const char* InitStateName(InitState s);

class HttpApi {
 public:
  struct Deps {
    // Runs initialisation (blocking; called on a thread of the API's own).
    std::function<Status(ValidationMode)> initialize;
    // The rendered config, or an error (-> 500).
    std::function<Result<std::string>()> render_config;
    SnapStore* store = nullptr;  // null: no backups
    // The backup leader's sidecar, "http(s)://host:port", for delegation; null: none (405).
    std::function<Result<std::string>()> leader_sidecar_url;
    // How to reach it: TLS roots (ca_file) for https; `tls` is set from the URL.
    common::HttpClientOptions leader_client;
    // What /metrics writes, and where /snapshot/latest records the latest deltas; null: 404.
    SidecarMetrics* metrics = nullptr;
  };
  explicit HttpApi(Deps deps);
  ~HttpApi();  // waits for a running initialisation

  // Called concurrently by the HTTP server's threads. A snapshot route blocks its thread until
  // the snapshot is taken (or delegated); the others answer at once.
  common::HttpResponse Handle(const common::HttpRequest& req);

  // The backup leader's snapshotter (a Snapshotter) while it leads, null otherwise. A request
  // holds its own reference, so the leader loop may drop the snapshotter at any time.
  void SetSnapshotter(std::shared_ptr<SnapshotTriggers> s);
  void SetHealthy(bool healthy) { healthy_.store(healthy); }
  bool healthy() const { return healthy_.load(); }
  InitState state() const;

 private:
  common::HttpResponse Start(const common::HttpRequest& req);
  common::HttpResponse StatusRoute();
  common::HttpResponse Snapshot(const common::HttpRequest& req);
  common::HttpResponse Delegate(const common::HttpRequest& req);
  common::HttpResponse Metrics();

  const Deps deps_;  // set at construction, read-only after
  mutable std::mutex mu_;
  InitState state_ ABSL_GUARDED_BY(mu_) = InitState::kNew;
  // The initialisation thread: started by Start() (while the state is New, so the previous one
  // has ended) and joined there or by the destructor.
  std::thread worker_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<SnapshotTriggers> snapshotter_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> healthy_{false};  // set by the leader loop, read by /healthz
};

}  // namespace etcdw::sidecar
