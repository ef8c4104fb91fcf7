#include "report.h"

#include <fmt/format.h>

namespace etcdw::bench {

namespace {

std::string Ratio(double ours, double etcd) {
  if (etcd <= 0 || ours <= 0) return "-";
  return fmt::format("{:.2f}", ours / etcd);
}

std::string Number(double v) {
  if (v >= 100) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

std::string LoadRow(const Workload& w, Outcome& etcd, Outcome& ours) {
  if (!etcd.ok || !ours.ok) {
    return fmt::format("| {} | failed: {} |\n", w.name,
                       !etcd.ok ? "etcd: " + etcd.error : "ours: " + ours.error);
  }
  auto& e = etcd.load;
  auto& o = ours.load;
  double e_rss = e.peak_rss_bytes / 1048576.0, o_rss = o.peak_rss_bytes / 1048576.0;
  return fmt::format(
      "| {} | {} | {} | **{}** | {} / {} | {} / {} | {} | {} | **{}** | {} | {} | {} |\n", w.name,
      Number(e.load.ops_per_sec()), Number(o.load.ops_per_sec()),
      Ratio(o.load.ops_per_sec(), e.load.ops_per_sec()), Number(e.load.latency.QuantileMs(0.5)),
      Number(e.load.latency.QuantileMs(0.99)), Number(o.load.latency.QuantileMs(0.5)),
      Number(o.load.latency.QuantileMs(0.99)), Number(e.CpuMicrosPerOp()),
      Number(o.CpuMicrosPerOp()), Ratio(o.CpuMicrosPerOp(), e.CpuMicrosPerOp()), Number(e_rss),
      Number(o_rss), Ratio(o_rss, e_rss));
}

}  // namespace

std::string Report(std::vector<WorkloadRun>& runs, const DiskSyncRates& disk, bool quick) {
  std::string out;
  out +=
      "| workload | etcd ops/s | ours ops/s | ours/etcd | etcd p50 / p99 ms | ours p50 / p99 ms "
      "| etcd CPU µs/op | ours CPU µs/op | ours/etcd | etcd peak RSS MiB | ours peak RSS MiB "
      "| ours/etcd |\n";
  out += "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (auto& r : runs) {
    if (r.etcd.has_load || r.ours.has_load) out += LoadRow(*r.workload, r.etcd, r.ours);
  }
  out += "\n| figure | unit | etcd | ours | ours/etcd |\n|---|---|--:|--:|--:|\n";
  out += fmt::format("| disk: append 256 B + fdatasync, one thread | ops/s | {} | | |\n",
                     Number(disk.append));
  out += fmt::format(
      "| disk: overwrite 256 B of preallocated zeros + fdatasync, one thread | ops/s | {} | | |\n",
      Number(disk.overwrite));
  out += fmt::format(
      "| disk + loopback: one client's requests, each answered after such an overwrite + "
      "fdatasync | ops/s | {} | | |\n",
      Number(disk.round_trip));
  for (auto& r : runs) {
    if (!r.etcd.ok || !r.ours.ok) {
      if (!r.etcd.has_load && !r.ours.has_load) {
        out += fmt::format("| {} | failed: {} | | | |\n", r.workload->name,
                           !r.etcd.ok ? "etcd: " + r.etcd.error : "ours: " + r.ours.error);
      }
      continue;
    }
    for (size_t i = 0; i < r.ours.scalars.size() && i < r.etcd.scalars.size(); ++i) {
      const Scalar& e = r.etcd.scalars[i];
      const Scalar& o = r.ours.scalars[i];
      out += fmt::format("| {} | {} | {} | {} | **{}** |\n", o.name, o.unit, Number(e.value),
                         Number(o.value), Ratio(o.value, e.value));
    }
  }
  if (quick) out += "\n(--quick: short windows and small data sets; a smoke test, not figures)\n";
  return out;
}

}  // namespace etcdw::bench
