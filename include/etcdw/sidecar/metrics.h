// The sidecar's Prometheus metrics, gardener's etcdbr_* families (its pkg/metrics), and the page
// its /metrics serves (docs/operations.md, "Sidecar metrics").
//
// One SidecarMetrics lives as long as the server (RunServer owns it) and every component that
// moves a metric is given a pointer to it (null: it counts nothing): the snapshotter, which is
// made anew for every term of leadership, the initializer, the defragmentation schedule, the
// learner promotion and the HTTP API. Everything is an atomic or guarded by the object's own
// lock: any thread may move a metric while another writes the page.
#pragma once

#include <absl/base/thread_annotations.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "etcdw/common/metrics.h"
#include "etcdw/sidecar/snapshot.h"

namespace etcdw::sidecar {

// The values of gardener's `kind` label, in the order the page lists them.
enum class MetricKind { kChunk, kFull, kIncr };
inline constexpr size_t kMetricKinds = 3;
const char* MetricKindName(MetricKind k);  // "Chunk" | "Full" | "Incr"
// The kind of a snapshot object: a chunk of an upload is a Chunk whatever its name says.
MetricKind MetricKindOf(const SnapshotInfo& s);

// A duration histogram per outcome (gardener's `succeeded` label), default buckets.
struct DurationsByOutcome {
  common::Histogram failed{common::DefaultBuckets()};
  common::Histogram succeeded{common::DefaultBuckets()};
  void Observe(bool ok, double seconds) { (ok ? succeeded : failed).Observe(seconds); }
};

// A count per outcome.
struct CountsByOutcome {
  common::Counter failed;
  common::Counter succeeded;
  void Add(bool ok) { (ok ? succeeded : failed).Add(); }
};

class SidecarMetrics {
 public:
  SidecarMetrics();

  // Per kind (index by MetricKind): how long saving a snapshot to the store took (from the
  // start of the snapshot to the end of the upload; an upload that fails counts as failed), the
  // snapshots garbage-collected, and the latest snapshot's revision and unix time. Chunk's
  // series stay at zero but for gc (uploads are not chunked here).
  std::array<DurationsByOutcome, kMetricKinds> snapshot_duration;
  std::array<CountsByOutcome, kMetricKinds> gc;
  std::array<common::Gauge, kMetricKinds> latest_revision;
  std::array<common::Gauge, kMetricKinds> latest_timestamp;
  // 1 while the member holds writes no snapshot of that kind covers yet (gardener's
  // etcdbr_snapshot_required; Full and Incr only).
  std::array<common::Gauge, kMetricKinds> snapshot_required;
  DurationsByOutcome& SnapshotDuration(MetricKind k) { return snapshot_duration[Index(k)]; }
  CountsByOutcome& Gc(MetricKind k) { return gc[Index(k)]; }
  common::Gauge& LatestRevision(MetricKind k) { return latest_revision[Index(k)]; }
  common::Gauge& LatestTimestamp(MetricKind k) { return latest_timestamp[Index(k)]; }
  common::Gauge& SnapshotRequired(MetricKind k) { return snapshot_required[Index(k)]; }

  // The deltas of the latest set, and the revisions they span (gardener's
  // latest_deltas_revisions_total: last delta's last revision - first delta's start revision,
  // then each new delta's last - start added).
  common::Gauge latest_deltas;
  common::Gauge latest_deltas_revisions;
  // Set from a listing of the store: the latest set's deltas.
  void SetLatestDeltas(const std::vector<SnapshotInfo>& deltas);

  // Errors that ended the snapshotter (or a GC listing or deletion), by their text.
  void CountSnapshotterFailure(const std::string& error) ABSL_LOCKS_EXCLUDED(mu_);
  std::map<std::string, uint64_t> SnapshotterFailures() const ABSL_LOCKS_EXCLUDED(mu_);

  DurationsByOutcome validation;
  DurationsByOutcome restoration_single_node;
  DurationsByOutcome restoration_single_member;
  // Defragmentation of one member, by its client URL ("" is pre-initialised, as gardener does).
  DurationsByOutcome& Defragmentation(const std::string& endpoint) ABSL_LOCKS_EXCLUDED(mu_);

  common::Gauge cluster_size;
  common::Gauge is_learner;
  CountsByOutcome learner_adds;  // etcdbr_is_learner_count_total
  DurationsByOutcome add_learner;
  DurationsByOutcome member_remove;
  DurationsByOutcome member_promote;

  // Requests of /metrics (promhttp's own families): being answered, and answered by status.
  common::Gauge scrapes_in_flight;
  common::Counter scrapes_ok;

  // The whole page: the etcdbr_* families, Go's process collector's, promhttp's, and gardener's
  // network counters (from /proc/self/net/dev).
  std::string Text() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  static size_t Index(MetricKind k) { return static_cast<size_t>(k); }

  mutable std::mutex mu_;
  std::map<std::string, uint64_t> failures_ ABSL_GUARDED_BY(mu_);
  // The map only: a histogram, once made, is used without mu_.
  std::map<std::string, std::unique_ptr<DurationsByOutcome>> defrag_ ABSL_GUARDED_BY(mu_);
};

}  // namespace etcdw::sidecar
