// etcdw_bench: etcd-wrapper against etcd 3.4.23 on this machine, same workloads, one run.
// See docs/performance.md for what each workload does and the latest figures.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "etcdw/common/flags.h"
#include "fsync_probe.h"
#include "grpc_log.h"
#include "report.h"
#include "workloads.h"

using namespace etcdw::bench;

namespace {

std::string DataRoot() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

// Runs one workload against a fresh target of `kind`.
Outcome RunOn(const Workload& w, Member::Kind kind, const BenchOptions& opts) {
  Target target(kind, w.members);
  std::string error;
  if (!target.Start(&error)) return Outcome{.error = error};
  Outcome out = w.run(target, opts);
  for (int i = 0; i < target.size(); ++i) target.member(i).Stop(std::chrono::seconds(30));
  return out;
}

std::string Summary(const Outcome& o) {
  if (!o.ok) return "FAILED: " + o.error;
  std::ostringstream s;
  if (o.has_load) {
    double ops = static_cast<double>(std::max<uint64_t>(o.load.load.ops, 1));
    s << static_cast<long>(o.load.load.ops_per_sec()) << " ops/s, server CPU "
      << static_cast<long>(o.load.CpuMicrosPerOp()) << " µs/op, client CPU "
      << static_cast<long>(o.load.client_cpu_seconds * 1e6 / ops) << " µs/op";
  } else if (!o.scalars.empty()) {
    s << o.scalars.front().name << " " << o.scalars.front().value << " " << o.scalars.front().unit;
  }
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  etcdw::cmd::DisableMutexDeadlockDetection();  // the client's gRPC costs less, as the server's
  etcdw::common::FlagSet flags("etcdw_bench");
  bool quick = false;
  std::chrono::milliseconds warmup, measure;
  int64_t memory_keys = 0, big_mib = 0;
  std::string only_list, out_path;
  flags.Bool("quick", &quick, false, "CI smoke: short windows, small data sets");
  flags.Duration("warmup", &warmup, std::chrono::seconds(1), "load before each measured window");
  flags.Duration("measure", &measure, std::chrono::seconds(5), "length of each measured window");
  flags.Int("memory-keys", &memory_keys, 1000000, "keys of 256 B loaded for the memory figure");
  flags.Int("big-data-mib", &big_mib, 1024, "MiB loaded for cold start and snapshot save");
  flags.String("only", &only_list, "", "comma-separated workloads to run (default all)");
  flags.String("out", &out_path, "", "also write the tables (Markdown) to this file");
  auto parsed = flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (parsed.outcome != etcdw::common::FlagSet::Outcome::kOk || !parsed.positional.empty() ||
      memory_keys <= 0 || big_mib <= 0 || warmup.count() < 0 || measure.count() <= 0) {
    if (parsed.outcome == etcdw::common::FlagSet::Outcome::kError) {
      std::cerr << parsed.error << "\n";
    } else if (parsed.outcome == etcdw::common::FlagSet::Outcome::kOk) {
      std::cerr << "etcdw_bench: unexpected arguments or non-positive sizes\n";
    }
    std::cerr << "Usage: etcdw_bench [flags]\n"
                 "Benchmarks etcd-wrapper against etcd 3.4 (the `etcd` in PATH): the same "
                 "workloads on loopback, data directories under $TMPDIR (default /tmp).\n"
              << flags.Usage();
    return parsed.outcome == etcdw::common::FlagSet::Outcome::kHelp ? 0 : 2;
  }
  BenchOptions opts;
  opts.quick = quick;
  opts.warmup = warmup;
  opts.measure = measure;
  opts.rss_keys = static_cast<uint64_t>(memory_keys);
  opts.big_data_bytes = static_cast<uint64_t>(big_mib) << 20;
  if (quick) {
    opts.warmup = std::chrono::milliseconds(200);
    opts.measure = std::chrono::milliseconds(500);
    opts.rss_keys = 20000;
    opts.big_data_bytes = 16ULL << 20;
  }
  std::vector<std::string> only;
  for (std::stringstream ss(only_list); ss.good();) {
    std::string name;
    std::getline(ss, name, ',');
    if (!name.empty()) only.push_back(name);
  }

  auto workloads = AllWorkloads();
  std::set<std::string> known;
  for (auto& w : workloads) known.insert(w.name);
  for (auto& name : only) {
    if (!known.count(name)) {
      std::cerr << "etcdw_bench: unknown workload '" << name << "'; known:";
      for (auto& k : known) std::cerr << " " << k;
      std::cerr << "\n";
      return 2;
    }
  }
  std::string error;
  DiskSyncRates disk;
  if (!MeasureDiskSyncRates(
          DataRoot(), quick ? std::chrono::milliseconds(300) : std::chrono::milliseconds(3000),
          &disk, &error)) {
    std::cerr << "etcdw_bench: " << error << "\n";
    return 1;
  }
  std::cerr << "disk under " << DataRoot() << ": " << static_cast<long>(disk.append)
            << " appends+fdatasync/s, " << static_cast<long>(disk.overwrite)
            << " overwrites of preallocated zeros+fdatasync/s, "
            << static_cast<long>(disk.round_trip)
            << " requests/s of one client over loopback answered after such an overwrite\n";

  std::vector<WorkloadRun> runs;
  bool all_ok = true;
  for (auto& w : workloads) {
    if (!only.empty() && std::find(only.begin(), only.end(), w.name) == only.end()) continue;
    WorkloadRun run{&w};
    run.etcd = RunOn(w, Member::Kind::kEtcd, opts);
    std::cerr << w.name << " etcd: " << Summary(run.etcd) << "\n";
    run.ours = RunOn(w, Member::Kind::kEtcdWrapper, opts);
    std::cerr << w.name << " ours: " << Summary(run.ours) << "\n";
    all_ok = all_ok && run.etcd.ok && run.ours.ok;
    runs.push_back(std::move(run));
  }
  std::string table = Report(runs, disk, quick);
  std::cout << table;
  if (!out_path.empty()) std::ofstream(out_path) << table;
  return all_ok ? 0 : 1;
}
