// etcdbrctl: the backup-restore sidecar of the etcd pod (a drop-in for gardener's
// etcd-backup-restore).
//
//   etcdbrctl server [flags]       the sidecar: HTTP API, initialisation, snapshots, GC
//   etcdbrctl snapshot [flags]     snapshots and GC only (no HTTP API, no leader election)
//   etcdbrctl restore [flags]      restore the data directory from the latest backup
//   etcdbrctl initialize [flags]   validate (and if needed restore) the data directory once
//   etcdbrctl compact [flags]      compact the latest backup into one full snapshot
//   etcdbrctl copy [flags]         copy the backups of one store to another
//   etcdbrctl --version
//
// Exit codes: 0 after a stop signal or a finished command, 1 on an error or a second signal,
// 2 on a command-line error.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/common/flags.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/open_files.h"
#include "etcdw/common/stop.h"
#include "etcdw/common/version.h"
#include "etcdw/sidecar/compaction.h"
#include "etcdw/sidecar/copier.h"
#include "etcdw/sidecar/etcd_config.h"
#include "etcdw/sidecar/initializer.h"
#include "etcdw/sidecar/options.h"
#include "etcdw/sidecar/restorer.h"
#include "etcdw/sidecar/server_app.h"
#include "etcdw/sidecar/snapshot_leases.h"
#include "etcdw/sidecar/snapshotter.h"
#include "grpc_log.h"

namespace {

using etcdw::Status;
namespace log = etcdw::log;
namespace sidecar = etcdw::sidecar;
using Outcome = etcdw::common::FlagSet::Outcome;

constexpr char kHelp[] =
    R"(etcdbrctl is the backup-restore sidecar of the etcd pod: it validates and restores the
data directory before etcd starts, takes full and delta snapshots to an object store and
garbage-collects them. Drop-in for gardener's etcd-backup-restore (same flags, HTTP API
and object names).

Usage:
  etcdbrctl server [flags]       run the sidecar (etcdbrctl server -h lists the flags)
  etcdbrctl snapshot [flags]     take snapshots and collect garbage, without the HTTP API
  etcdbrctl restore [flags]      restore the data directory from the latest backup
  etcdbrctl initialize [flags]   validate and, if needed, restore the data directory once
  etcdbrctl compact [flags]      compact the latest full snapshot and its deltas into one
                                 full snapshot in the same store
  etcdbrctl copy [flags]         copy the backups of the --source-* store to the store
  etcdbrctl --version
)";

void PrintVersion() {
  std::printf("etcdbrctl Version: %s\nGit SHA: %s\n", etcdw::kVersion, etcdw::kGitSha);
}

// Parses the flags of `command`; returns an exit code when the process should end now.
std::optional<int> ParseFlags(sidecar::Command command, const std::string& name,
                              const std::vector<std::string>& args, sidecar::ServerOptions* o) {
  etcdw::common::FlagSet flags("etcdbrctl " + name);
  sidecar::RegisterFlags(command, flags, o);
  auto parsed = flags.Parse(args);
  if (parsed.outcome == Outcome::kHelp) {
    std::printf("Usage of etcdbrctl %s:\n%s", name.c_str(), flags.Usage().c_str());
    return 0;
  }
  if (parsed.outcome == Outcome::kError) {
    std::fprintf(stderr, "%s\nUsage of etcdbrctl %s:\n%s", parsed.error.c_str(), name.c_str(),
                 flags.Usage().c_str());
    return 2;
  }
  if (!parsed.positional.empty()) {
    std::fprintf(stderr, "etcdbrctl %s: unexpected argument \"%s\"\n", name.c_str(),
                 parsed.positional[0].c_str());
    return 2;
  }
  sidecar::FinishServerFlags(o);
  if (Status st = sidecar::ValidateServerOptions(*o); !st.ok()) {
    std::fprintf(stderr, "etcdbrctl %s: invalid flags:\n%s\n", name.c_str(), st.message().c_str());
    return 1;
  }
  log::SetLevel(sidecar::LogLevelOf(o->log_level).value());
  sidecar::WarnFlagsWithoutEffect(command, flags);
  return std::nullopt;
}

int Fail(const std::string& what, const Status& st) {
  log::Error(what, {log::F("error", st)});
  return 1;
}

int Server(const std::vector<std::string>& args) {
  sidecar::ServerOptions o;
  if (auto code = ParseFlags(sidecar::Command::kServer, "server", args, &o)) return *code;
  log::Info("etcdbrctl starting",
            {log::F("version", etcdw::kVersion), log::F("git-sha", etcdw::kGitSha)});
  etcdw::common::StopRequest stop;
  etcdw::common::SignalCatcher signals(&stop);
  Status st = sidecar::RunServer(o, *stop.cancelled());
  if (!st.ok()) return Fail("etcdbrctl server failed", st);
  log::Info("etcdbrctl stopped", {log::F("reason", stop.reason())});
  return 0;
}

int Snapshot(const std::vector<std::string>& args) {
  sidecar::ServerOptions o;
  if (auto code = ParseFlags(sidecar::Command::kSnapshot, "snapshot", args, &o)) return *code;
  if (o.store.provider.empty()) {
    std::fprintf(stderr, "etcdbrctl snapshot: --storage-provider is required\n");
    return 1;
  }
  auto store = sidecar::OpenSnapStore(o.store);
  if (!store.ok()) return Fail("opening the snapshot store failed", store.status());
  auto client = sidecar::EtcdClient::Connect(o.etcd, o.etcd.endpoints.front());
  if (!client.ok()) return Fail("connecting to etcd failed", client.status());
  auto so = sidecar::SnapshotterOptionsOf(o);
  if (!so.ok()) return Fail("invalid snapshotter settings", so.status());
  sidecar::Snapshotter snapshotter(**store, **client, *so);
  etcdw::common::StopRequest stop;
  etcdw::common::SignalCatcher signals(&stop);
  std::thread watcher([&] {
    stop.Wait();
    snapshotter.Stop();
  });
  Status st = snapshotter.Run();
  stop.Request(st.ok() ? 0 : 1, st.ok() ? "snapshotter stopped" : st.message());
  watcher.join();
  if (!st.ok()) return Fail("snapshotter failed", st);
  return 0;
}

int Restore(const std::vector<std::string>& args) {
  sidecar::ServerOptions o;
  if (auto code = ParseFlags(sidecar::Command::kRestore, "restore", args, &o)) return *code;
  if (o.store.provider.empty()) {
    std::fprintf(stderr, "etcdbrctl restore: --storage-provider is required\n");
    return 1;
  }
  std::error_code ec;
  if (std::filesystem::exists(o.restoration.data_dir + "/member", ec)) {
    std::fprintf(stderr,
                 "etcdbrctl restore: the data directory \"%s\" already holds a member; remove "
                 "it first\n",
                 o.restoration.data_dir.c_str());
    return 1;
  }
  auto store = sidecar::OpenSnapStore(o.store);
  if (!store.ok()) return Fail("opening the snapshot store failed", store.status());
  auto list = (*store)->List();
  if (!list.ok()) return Fail("listing the snapshot store failed", list.status());
  sidecar::LatestSet set = sidecar::FindLatestSet(*list);
  if (!set.full) {
    log::Info("No base snapshot found. Will do nothing.");
    return 0;
  }
  sidecar::RestoreOptions ro;
  ro.target = sidecar::RestoreTargetOf(o.restoration);
  ro.temp_dir = o.restoration.temp_dir;
  ro.skip_hash_check = o.restoration.skip_hash_check;
  Status st = sidecar::RestoreFromBackup(**store, set, o.restoration.data_dir, ro);
  if (!st.ok()) return Fail("restore failed", st);
  log::Info("restore finished",
            {log::F("data-dir", o.restoration.data_dir), log::F("revision", set.LastRevision())});
  return 0;
}

int Initialize(const std::vector<std::string>& args) {
  sidecar::ServerOptions o;
  if (auto code = ParseFlags(sidecar::Command::kInitialize, "initialize", args, &o)) return *code;
  std::unique_ptr<sidecar::SnapStore> store;
  if (!o.store.provider.empty()) {
    auto s = sidecar::OpenSnapStore(o.store);
    if (!s.ok()) return Fail("opening the snapshot store failed", s.status());
    store = std::move(s).value();
  }
  std::atomic<bool> never{false};
  sidecar::InitializerContext ctx;
  ctx.options = &o;
  ctx.store = store.get();
  ctx.member_name = o.restoration.name;
  ctx.cluster_size = 1;
  ctx.restore_target = sidecar::RestoreTargetOf(o.restoration);
  ctx.peer_urls = ctx.restore_target.initial_advertise_peer_urls;
  ctx.cancel = &never;
  Status st = sidecar::Initialize(ctx, sidecar::ParseValidationMode(o.validation_mode));
  if (!st.ok()) return Fail("initialisation failed", st);
  log::Info("initialisation finished", {log::F("data-dir", o.restoration.data_dir)});
  return 0;
}

// etcd-druid's compaction job (sidecar/compaction.h): the compacted snapshot uploaded, the full
// snapshot lease written when asked (a failure is logged: the snapshot is there), then a wait
// for metrics to be scraped.
int Compact(const std::vector<std::string>& args) {
  sidecar::ServerOptions o;
  if (auto code = ParseFlags(sidecar::Command::kCompact, "compact", args, &o)) return *code;
  if (o.store.provider.empty()) {
    std::fprintf(stderr, "etcdbrctl compact: --storage-provider is required\n");
    return 1;
  }
  auto store = sidecar::OpenSnapStore(o.store);
  if (!store.ok()) return Fail("opening the snapshot store failed", store.status());
  sidecar::CompactionOptions co;
  co.restore.target = sidecar::RestoreTargetOf(o.restoration);
  co.restore.temp_dir = o.restoration.temp_dir;
  co.restore.skip_hash_check = o.restoration.skip_hash_check;
  co.data_dir = o.restoration.data_dir;
  co.temp_dir = o.store.temp_dir;
  co.defragment = o.defragment;
  auto compacted = sidecar::CompactBackups(**store, co, std::chrono::system_clock::now());
  if (!compacted.ok()) return Fail("compaction failed", compacted.status());
  if (*compacted && o.leases.snapshot_lease_renewal) {
    sidecar::SnapshotLeaseOptions lo;
    const char* ns = std::getenv("POD_NAMESPACE");
    lo.lease_namespace = ns != nullptr ? ns : "";
    lo.full_lease_name = o.leases.full_lease_name;
    lo.delta_lease_name = o.leases.delta_lease_name;
    Status st = sidecar::WriteFullSnapshotLease(**store, lo, **compacted);
    if (!st.ok()) log::Warn("updating the full snapshot lease failed", {log::F("error", st)});
  }
  if (o.metrics_scrape_wait.count() > 0) {
    log::Info("waiting for metrics to be scraped",
              {log::F("seconds", std::chrono::duration<double>(o.metrics_scrape_wait).count())});
    std::this_thread::sleep_for(o.metrics_scrape_wait);
  }
  return 0;
}

// etcd-druid's copy job (sidecar/copier.h): the --source-* store's backups into the store.
// Stops early, with what was copied kept, on SIGTERM or SIGINT.
int Copy(const std::vector<std::string>& args) {
  sidecar::ServerOptions o;
  if (auto code = ParseFlags(sidecar::Command::kCopy, "copy", args, &o)) return *code;
  log::Info("etcdbrctl starting",
            {log::F("version", etcdw::kVersion), log::F("git-sha", etcdw::kGitSha)});
  if (o.store.provider.empty()) {
    std::fprintf(stderr, "etcdbrctl copy: --storage-provider is required\n");
    return 1;
  }
  auto source = sidecar::OpenSnapStore(o.copy.source);
  if (!source.ok()) return Fail("opening the source snapshot store failed", source.status());
  auto destination = sidecar::OpenSnapStore(o.store);
  if (!destination.ok()) {
    return Fail("opening the destination snapshot store failed", destination.status());
  }
  sidecar::CopyOptions co;
  co.max_backups = o.copy.max_backups;
  co.max_backup_age_days = o.copy.max_backup_age;
  co.max_parallel = o.copy.max_parallel_copy_operations;
  co.wait_for_final = o.copy.wait_for_final_snapshot;
  co.wait_timeout = o.copy.wait_for_final_snapshot_timeout;
  co.temp_dir = o.copy.source.temp_dir;
  etcdw::common::StopRequest stop;
  etcdw::common::SignalCatcher signals(&stop);
  co.cancel = stop.cancelled();
  log::Info("copying backups", {log::F("source", (*source)->Describe()),
                                log::F("destination", (*destination)->Describe())});
  auto report = sidecar::CopyBackups(**source, **destination, co, std::chrono::system_clock::now());
  if (!report.ok()) return Fail("copy failed", report.status());
  log::Info("backups copied",
            {log::F("copied", report->copied.size()), log::F("skipped", report->skipped.size())});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  etcdw::common::BlockStopSignals();
  signal(SIGPIPE, SIG_IGN);
  etcdw::common::RaiseOpenFileLimit();  // as Go raises it for etcd and gardener's sidecar
  umask(0077);
  etcdw::cmd::PollClientConnectionsPromptly();
  etcdw::cmd::RouteGrpcLogs();
  etcdw::cmd::DisableMutexDeadlockDetection();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kHelp, stderr);
    return 2;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string& cmd = args[0];
  if (cmd == "server") return Server(rest);
  if (cmd == "snapshot") return Snapshot(rest);
  if (cmd == "restore") return Restore(rest);
  if (cmd == "compact") return Compact(rest);
  if (cmd == "copy") return Copy(rest);
  if (cmd == "initialize") return Initialize(rest);
  if (cmd == "-v" || cmd == "--version" || cmd == "-version" || cmd == "version") {
    PrintVersion();
    return 0;
  }
  if (cmd == "-h" || cmd == "--help" || cmd == "-help" || cmd == "help") {
    std::fputs(kHelp, stdout);
    return 0;
  }
  std::fprintf(stderr, "etcdbrctl: unknown command \"%s\"\n%s", cmd.c_str(), kHelp);
  return 2;
}
