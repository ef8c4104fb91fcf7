// The sidecar's /metrics page (sidecar/metrics.h): gardener's families with its names, HELP
// texts, types and labels (its pkg/metrics), every label combination it pre-initialises written
// from the start.
#include "etcdw/sidecar/metrics.h"

#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace etcdw::sidecar {
namespace {

using common::MetricsPage;
using Type = MetricsPage::Type;

constexpr std::array<MetricKind, kMetricKinds> kKinds = {MetricKind::kChunk, MetricKind::kFull,
                                                         MetricKind::kIncr};

const char* OutcomeName(bool ok) { return ok ? "true" : "false"; }

// The two series of an outcome histogram, `labels` first (they sort before "succeeded").
void WriteDurations(MetricsPage& page, MetricsPage::Labels labels, const DurationsByOutcome& d) {
  for (bool ok : {false, true}) {
    MetricsPage::Labels l = labels;
    l.emplace_back("succeeded", OutcomeName(ok));
    page.Sample(l, ok ? d.succeeded : d.failed);
  }
}

// Bytes received (`transmit` false) or sent by the process's network namespace: the sum over the
// interfaces of /proc/self/net/dev, as gardener's network collector reads it (its first or
// ninth number after the interface's name). NaN when the file cannot be read.
double NetDevBytes(bool transmit) {
  std::ifstream in("/proc/self/net/dev");
  if (!in) return std::numeric_limits<double>::quiet_NaN();
  double total = 0;
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;  // the two header lines
    std::istringstream fields(line.substr(colon + 1));
    std::vector<std::string> numbers;
    for (std::string f; fields >> f;) numbers.push_back(f);
    const size_t i = transmit ? 8 : 0;
    if (i >= numbers.size()) return std::numeric_limits<double>::quiet_NaN();
    total += std::strtod(numbers[i].c_str(), nullptr);
  }
  return total;
}

}  // namespace

const char* MetricKindName(MetricKind k) {
  switch (k) {
    case MetricKind::kChunk:
      return "Chunk";
    case MetricKind::kFull:
      return "Full";
    case MetricKind::kIncr:
      return "Incr";
  }
  return "Full";
}

MetricKind MetricKindOf(const SnapshotInfo& s) {
  if (s.is_chunk) return MetricKind::kChunk;
  return s.kind == SnapshotKind::kFull ? MetricKind::kFull : MetricKind::kIncr;
}

SidecarMetrics::SidecarMetrics() {
  std::lock_guard<std::mutex> l(mu_);
  failures_[""] = 0;
  defrag_[""] = std::make_unique<DurationsByOutcome>();
}

void SidecarMetrics::SetLatestDeltas(const std::vector<SnapshotInfo>& deltas) {
  latest_deltas.Set(static_cast<double>(deltas.size()));
  latest_deltas_revisions.Set(deltas.empty() ? 0
                                             : static_cast<double>(deltas.back().last_revision -
                                                                   deltas.front().start_revision));
}

void SidecarMetrics::CountSnapshotterFailure(const std::string& error) {
  std::lock_guard<std::mutex> l(mu_);
  ++failures_[error];
}

std::map<std::string, uint64_t> SidecarMetrics::SnapshotterFailures() const {
  std::lock_guard<std::mutex> l(mu_);
  return failures_;
}

DurationsByOutcome& SidecarMetrics::Defragmentation(const std::string& endpoint) {
  std::lock_guard<std::mutex> l(mu_);
  auto& d = defrag_[endpoint];
  if (!d) d = std::make_unique<DurationsByOutcome>();
  return *d;
}

std::string SidecarMetrics::Text() const {
  MetricsPage page;
  auto by_kind = [&page](const std::array<common::Gauge, kMetricKinds>& g) {
    for (MetricKind k : kKinds) {
      page.Sample({{"kind", MetricKindName(k)}}, g[static_cast<size_t>(k)].Value());
    }
  };
  auto outcome_counts = [&page](const CountsByOutcome& c, MetricsPage::Labels labels) {
    for (bool ok : {false, true}) {
      MetricsPage::Labels l = labels;
      l.emplace_back("succeeded", OutcomeName(ok));
      page.Sample(l, static_cast<double>((ok ? c.succeeded : c.failed).Value()));
    }
  };

  page.Family("etcdbr_snapshot_duration_seconds",
              "Total latency distribution of saving snapshot to object store.", Type::kHistogram);
  for (MetricKind k : kKinds) {
    WriteDurations(page, {{"kind", MetricKindName(k)}}, snapshot_duration[Index(k)]);
  }
  page.Family("etcdbr_snapshot_gc_total", "Total number of garbage collected snapshots.",
              Type::kCounter);
  for (MetricKind k : kKinds) outcome_counts(gc[Index(k)], {{"kind", MetricKindName(k)}});
  page.Family("etcdbr_snapshot_latest_revision", "Revision number of latest snapshot taken.",
              Type::kGauge);
  by_kind(latest_revision);
  page.Family("etcdbr_snapshot_latest_timestamp", "Timestamp of latest snapshot taken.",
              Type::kGauge);
  by_kind(latest_timestamp);
  page.Family("etcdbr_snapshot_required", "Indicates whether a snapshot is required to be taken.",
              Type::kGauge);
  by_kind(snapshot_required);

  page.Family("etcdbr_validation_duration_seconds",
              "Total latency distribution of validating data directory.", Type::kHistogram);
  WriteDurations(page, {}, validation);
  page.Family("etcdbr_restoration_duration_seconds",
              "Total latency distribution required to restore the etcd member.", Type::kHistogram);
  WriteDurations(page, {{"restore", "single_member"}}, restoration_single_member);
  WriteDurations(page, {{"restore", "single_node"}}, restoration_single_node);

  page.Gauge("etcdbr_snapstore_latest_deltas_total",
             "Total number of delta snapshots taken since the latest full snapshot.",
             latest_deltas.Value());
  page.Gauge("etcdbr_snapstore_latest_deltas_revisions_total",
             "Total number of revisions stored in delta snapshots taken since the latest full "
             "snapshot.",
             latest_deltas_revisions.Value());

  page.Gauge("etcdbr_cluster_size", "Current Etcd cluster size.", cluster_size.Value());
  page.Gauge("etcdbr_is_learner", "Whether or not this member is a learner. 1 if is, 0 otherwise",
             is_learner.Value());
  page.Family("etcdbr_is_learner_count_total", "Total count when etcd member added as a learner.",
              Type::kCounter);
  outcome_counts(learner_adds, {});
  page.Family("etcdbr_add_learner_duration_seconds",
              "Total latency to add the etcd member as a learner to the cluster.",
              Type::kHistogram);
  WriteDurations(page, {}, add_learner);
  page.Family("etcdbr_member_remove_duration_seconds",
              "Total latency to remove the etcd member from the cluster.", Type::kHistogram);
  WriteDurations(page, {}, member_remove);
  page.Family("etcdbr_member_promote_duration_seconds",
              "Total latency to promote the learner to the voting member.", Type::kHistogram);
  WriteDurations(page, {}, member_promote);

  page.Counter("etcdbr_network_transmitted_bytes", "Number of bytes transmitted over network.",
               NetDevBytes(true));
  page.Counter("etcdbr_network_received_bytes", "Number of bytes received over network.",
               NetDevBytes(false));

  {
    std::lock_guard<std::mutex> l(mu_);
    page.Family("etcdbr_snapshotter_failure", "Total number of snapshotter errors.",
                Type::kCounter);
    for (const auto& [error, n] : failures_) {
      page.Sample({{"error", error}}, static_cast<double>(n));
    }
    page.Family("etcdbr_defragmentation_duration_seconds",
                "Total latency distribution of defragmentation of each etcd cluster member.",
                Type::kHistogram);
    for (const auto& [endpoint, d] : defrag_) WriteDurations(page, {{"endpoint", endpoint}}, *d);
  }

  common::WriteGoProcessMetrics(page);
  page.Gauge("promhttp_metric_handler_requests_in_flight",
             "Current number of scrapes being served.", scrapes_in_flight.Value());
  page.Family("promhttp_metric_handler_requests_total",
              "Total number of scrapes by HTTP status code.", Type::kCounter);
  page.Sample({{"code", "200"}}, static_cast<double>(scrapes_ok.Value()));
  page.Sample({{"code", "500"}}, 0);
  page.Sample({{"code", "503"}}, 0);
  return page.Text();
}

}  // namespace etcdw::sidecar
