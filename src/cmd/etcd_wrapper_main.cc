// etcd-wrapper: runs an embedded etcd v3-compatible member.
//
//   etcd-wrapper --config FILE [flags]   run a member from an etcd YAML config file
//   etcd-wrapper snapshot restore FILE [flags]
//                                        restore a snapshot into a new data directory
//   etcd-wrapper --help | --version
//
// Exit codes: 0 after a graceful stop, 1 on a configuration or start-up error or an
// unrecoverable runtime error (or a second stop signal), 2 on a command-line error.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/common/config.h"
#include "etcdw/common/flags.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/open_files.h"
#include "etcdw/common/stop.h"
#include "etcdw/common/version.h"
#include "etcdw/wrapper/app.h"
#include "etcdw/wrapper/options.h"
#include "grpc_log.h"
#include "snapshot_command.h"

namespace {

using etcdw::Status;
namespace log = etcdw::log;

constexpr char kHelp[] =
    R"(etcd-wrapper runs an embedded, Raft-replicated, etcd v3-compatible store: the etcd v3
gRPC API (KV, Watch, Lease, Maintenance, Cluster) on a RocksDB-backed MVCC store,
compatible with etcdctl, the etcd Go client and kube-apiserver.

Usage:
  etcd-wrapper start-etcd [flags]   in the etcd pod: bootstrap through the backup-restore
                                    sidecar, then run the store (etcd-wrapper start-etcd -h)
  etcd-wrapper --config FILE [--log-level LEVEL] [--etcd-wrapper-port PORT]
               [--exit-code-file PATH]
                                    run the store from a local etcd config file
  etcd-wrapper snapshot restore <filename> [options]
                                    restore a snapshot (etcd's or ours) into a new data
                                    directory, as `etcdctl snapshot restore` does
                                    (etcd-wrapper snapshot -h)
  etcd-wrapper --help
  etcd-wrapper --version

Flags (Go flag syntax: -flag or --flag, "--flag value" or "--flag=value"):
  --config FILE
        etcd configuration file (the YAML format of etcd's --config-file); the keys are
        listed in docs/configuration.md. Unknown keys are logged and ignored.
  --log-level LEVEL
        debug, info, warn or error; overrides the config file's log-level
  --etcd-wrapper-port PORT
        serve /readyz and /stop on this port (all interfaces); not served unless given
  --exit-code-file PATH
        when given, the first SIGTERM/SIGINT writes its name ("terminated" or
        "interrupt") to PATH
  --help, -h
        print this help
  --version
        print version information

Signals: SIGTERM or SIGINT stops the member gracefully (exit 0); a second one exits at
once with status 1.
Logs: one JSON object per line on stderr.
)";

constexpr char kStartEtcdHelp[] =
    R"(etcd-wrapper start-etcd: the etcd container's entrypoint in an etcd pod (a drop-in for
gardener's etcd-wrapper). Waits for the backup-restore sidecar to validate (and if needed
restore) the data directory, asking for "sanity" validation when the last run stopped on
SIGTERM/SIGINT and "full" otherwise; fetches the etcd config from the sidecar into
$HOME/etcd.conf.yaml; runs the store; serves /readyz (200 when a linearizable read
succeeds on this member, else 503) and POST /stop on --etcd-wrapper-port.

Exit codes: 0 after a stop (signal or /stop), 1 on a setup error or a second signal,
2 on a command-line error.
)";

void PrintVersion() {
  std::printf(
      "etcd-wrapper Version: %s\nGit SHA: %s\netcd API Version: %s\n"
      "Compatible etcd Version: %s\n",
      etcdw::kVersion, etcdw::kGitSha, etcdw::kEtcdApiVersion, etcdw::kEtcdVersion);
}

int StartEtcd(const std::vector<std::string>& args) {
  etcdw::common::FlagSet flags("start-etcd");
  etcdw::wrapper::StartEtcdOptions o;
  etcdw::wrapper::RegisterStartEtcdFlags(flags, &o);
  auto parsed = flags.Parse(args);
  if (parsed.outcome == etcdw::common::FlagSet::Outcome::kHelp) {
    std::printf("%s\nUsage of etcd-wrapper start-etcd:\n%s", kStartEtcdHelp, flags.Usage().c_str());
    return 0;
  }
  if (parsed.outcome == etcdw::common::FlagSet::Outcome::kError) {
    std::fprintf(stderr, "%s\nUsage of etcd-wrapper start-etcd:\n%s", parsed.error.c_str(),
                 flags.Usage().c_str());
    return 2;
  }
  // As Go's flag package (gardener's wrapper), arguments after the flags are ignored; say so.
  for (const auto& p : parsed.positional) {
    std::fprintf(stderr, "etcd-wrapper: ignoring argument \"%s\" after the flags\n", p.c_str());
  }
  if (!o.log_level.empty() && !log::ParseLevel(o.log_level).ok()) {
    std::fprintf(stderr, "invalid value \"%s\" for flag -log-level: unknown level\n",
                 o.log_level.c_str());
    return 2;
  }
  if (Status st = etcdw::wrapper::ValidateStartEtcdOptions(o); !st.ok()) {
    std::fprintf(stderr, "etcd-wrapper: invalid start-etcd flags:\n%s\n", st.message().c_str());
    return 1;
  }
  return etcdw::wrapper::RunStartEtcd(o);
}

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals before any thread starts, so only the signal thread receives them.
  etcdw::common::BlockStopSignals();
  signal(SIGPIPE, SIG_IGN);
  etcdw::common::RaiseOpenFileLimit();  // as Go raises it for etcd and gardener's sidecar
  etcdw::cmd::PollClientConnectionsPromptly();
  etcdw::cmd::RouteGrpcLogs();
  etcdw::cmd::DisableMutexDeadlockDetection();

  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "start-etcd") {
    return StartEtcd(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (!args.empty() && args[0] == "snapshot") {
    return etcdw::cmd::RunSnapshotCommand(std::vector<std::string>(args.begin() + 1, args.end()));
  }

  etcdw::common::FlagSet flags("etcd-wrapper");
  std::string config, log_level, exit_code_file;
  int64_t wrapper_port = 9095;
  bool version = false;
  flags.String("config", &config, "", "etcd configuration file (YAML)");
  flags.String("log-level", &log_level, "", "log level: debug, info, warn or error");
  flags.Int("etcd-wrapper-port", &wrapper_port, 9095, "port of the wrapper's readiness endpoint");
  flags.String("exit-code-file", &exit_code_file, "/var/etcd/data/exit_code",
               "file recording the signal that stopped the process");
  flags.Bool("version", &version, false, "print version information");
  auto parsed = flags.Parse(args);
  if (parsed.outcome == etcdw::common::FlagSet::Outcome::kHelp) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (parsed.outcome == etcdw::common::FlagSet::Outcome::kError) {
    std::fprintf(stderr, "%s\nUsage of etcd-wrapper:\n%s", parsed.error.c_str(),
                 flags.Usage().c_str());
    return 2;
  }
  if (version) {
    PrintVersion();
    return 0;
  }
  if (!parsed.positional.empty()) {
    std::fprintf(stderr, "etcd-wrapper: unexpected argument \"%s\"\nRun etcd-wrapper --help.\n",
                 parsed.positional[0].c_str());
    return 2;
  }
  if (wrapper_port < 1 || wrapper_port > 65535) {
    std::fprintf(stderr, "etcd-wrapper: --etcd-wrapper-port: %lld is not a port (1-65535)\n",
                 static_cast<long long>(wrapper_port));
    return 2;
  }
  if (config.empty()) {
    std::fprintf(stderr, "etcd-wrapper: --config FILE is required\nRun etcd-wrapper --help.\n");
    return 2;
  }
  if (!log_level.empty() && !log::ParseLevel(log_level).ok()) {
    std::fprintf(stderr, "etcd-wrapper: --log-level: unknown level \"%s\"\n", log_level.c_str());
    return 2;
  }
  etcdw::wrapper::LocalOptions local;
  local.config_file = config;
  local.log_level = log_level;
  local.exit_code_file = flags.IsSet("exit-code-file") ? exit_code_file : "";
  // In --config mode /readyz is served only when asked for (several local members would
  // otherwise compete for the default port).
  local.wrapper_port = flags.IsSet("etcd-wrapper-port") ? static_cast<int>(wrapper_port) : 0;
  return etcdw::wrapper::RunLocal(local);
}
