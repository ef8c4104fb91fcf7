// etcd-wrapper: runs an embedded etcd v3-compatible member.
//
//   etcd-wrapper --config FILE [flags]   run a member from an etcd YAML config file
//   etcd-wrapper --help | --version
//
// Exit codes: 0 after a graceful stop, 1 on a configuration or start-up error or an
// unrecoverable runtime error (or a second stop signal), 2 on a command-line error.
#include <grpc/support/log.h>
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
#include "etcdw/common/version.h"
#include "etcdw/server/etcd_server.h"
#include "etcdw/server/grpc_server.h"

namespace {

using etcdw::Status;
namespace log = etcdw::log;

constexpr char kHelp[] =
    R"(etcd-wrapper runs an embedded, etcd v3-compatible store: the etcd v3 gRPC API
(KV, Watch, Lease, Maintenance, Cluster) on a RocksDB-backed MVCC store, compatible with
etcdctl, the etcd Go client and kube-apiserver.

Usage:
  etcd-wrapper --config FILE [--log-level LEVEL] [--etcd-wrapper-port PORT]
               [--exit-code-file PATH]
  etcd-wrapper --help
  etcd-wrapper --version

Flags (Go flag syntax: -flag or --flag, "--flag value" or "--flag=value"):
  --config FILE
        etcd configuration file (the YAML format of etcd's --config-file). Keys used:
        name, data-dir, listen-client-urls, advertise-client-urls, listen-peer-urls,
        initial-advertise-peer-urls, initial-cluster, initial-cluster-state,
        initial-cluster-token, snapshot-count, heartbeat-interval, election-timeout,
        quota-backend-bytes, max-request-bytes, max-txn-ops, auto-compaction-mode,
        auto-compaction-retention, experimental-watch-progress-notify-interval,
        client-transport-security (cert-file, key-file, trusted-ca-file,
        client-cert-auth), log-level. Other etcd keys are accepted without effect;
        unknown keys are logged and ignored.
  --log-level LEVEL
        debug, info, warn or error; overrides the config file's log-level
  --etcd-wrapper-port PORT
        port of the wrapper's readiness endpoint (default 9095); reserved for the
        start-etcd command and not served in --config mode
  --exit-code-file PATH
        when given, the first SIGTERM/SIGINT writes its name ("terminated" or
        "interrupt") to PATH (default used by start-etcd: /var/etcd/data/exit_code)
  --help, -h
        print this help
  --version
        print version information

Signals: SIGTERM or SIGINT stops the member gracefully (exit 0); a second one exits at
once with status 1.
Logs: one JSON object per line on stderr.
)";

void PrintVersion() {
  std::printf(
      "etcd-wrapper Version: %s\nGit SHA: %s\netcd API Version: %s\n"
      "Compatible etcd Version: %s\n",
      etcdw::kVersion, etcdw::kGitSha, etcdw::kEtcdApiVersion, etcdw::kEtcdVersion);
}

// The shutdown request shared by the signal thread, the fatal-error handler and main.
struct StopRequest {
  std::mutex mu;
  std::condition_variable cv;
  bool requested = false;
  int exit_code = 0;
  std::string reason;

  void Request(int code, std::string why) {
    std::lock_guard lock(mu);
    if (requested) return;
    requested = true;
    exit_code = code;
    reason = std::move(why);
    cv.notify_all();
  }
  void Wait() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return requested; });
  }
  // Whether a stop is requested within `d`.
  bool WaitFor(std::chrono::milliseconds d) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, d, [&] { return requested; });
  }
};

// gRPC's own log lines (e.g. a failed bind) go through our logger, so that everything on stderr
// stays one JSON object per line.
void GrpcLog(gpr_log_func_args* args) {
  std::string_view file = args->file ? args->file : "";
  if (size_t slash = file.rfind('/'); slash != std::string_view::npos)
    file.remove_prefix(slash + 1);
  std::string where = std::string(file) + ":" + std::to_string(args->line);
  const char* msg = args->message ? args->message : "";
  switch (args->severity) {
    case GPR_LOG_SEVERITY_DEBUG:
      log::Debug("grpc", {log::F("grpc-caller", where), log::F("detail", msg)});
      break;
    case GPR_LOG_SEVERITY_INFO:
      log::Info("grpc", {log::F("grpc-caller", where), log::F("detail", msg)});
      break;
    default:
      // gRPC reports problems it also returns to us (a failed bind becomes a start-up error);
      // keep them visible, but as warnings.
      log::Warn("grpc", {log::F("grpc-caller", where), log::F("detail", msg)});
      break;
  }
}

// A configuration error: exactly one plain line on stderr naming the file or setting and the
// problem (nothing has been logged yet); exit status 1.
int ConfigError(const std::string& error) {
  std::fprintf(stderr, "etcd-wrapper: %s\n", error.c_str());
  return 1;
}

// A failure once the member is starting (and logging): one JSON error line; exit status 1.
int StartupError(std::string_view what, const std::string& error) {
  log::Error(what, {log::F("error", error)});
  return 1;
}

void WriteExitCodeFile(const std::string& path, const char* name) {
  std::ofstream out(path, std::ios::trunc);
  if (out) out << name;
  if (!out) {
    log::Error("cannot write exit code file",
               {log::F("path", path), log::F("error", std::strerror(errno))});
    return;
  }
  out.close();
  ::chmod(path.c_str(), 0600);
}

int RunConfigMode(const std::string& config_path, const std::string& log_level_flag,
                  const std::string& exit_code_file, sigset_t stop_signals) {
  // The config file names the log level, and loading it logs about its keys: load it once
  // silently to learn the level (the flag wins), then again at that level.
  log::SetLevel(log::Level::kOff);
  auto cfg = etcdw::common::LoadConfigFile(config_path);
  std::string level = !log_level_flag.empty() ? log_level_flag : cfg.ok() ? cfg->log_level : "";
  auto lvl = log::ParseLevel(level);
  log::SetLevel(lvl.ok() ? lvl.value() : log::Level::kInfo);
  if (cfg.ok()) cfg = etcdw::common::LoadConfigFile(config_path);
  if (!cfg.ok()) return ConfigError(cfg.status().message());
  if (!lvl.ok()) return ConfigError("log-level: " + lvl.status().message());
  log::Debug(
      "configuration loaded",
      {log::F("path", config_path), log::F("name", cfg->name), log::F("data-dir", cfg->data_dir),
       log::F("listen-client-urls", etcdw::common::JoinUrls(cfg->listen_client_urls)),
       log::F("advertise-client-urls", etcdw::common::JoinUrls(cfg->advertise_client_urls)),
       log::F("quota-backend-bytes", cfg->EffectiveQuotaBytes()),
       log::F("snapshot-count", cfg->snapshot_count),
       log::F("heartbeat-interval-ms", static_cast<int64_t>(cfg->heartbeat_interval.count())),
       log::F("election-timeout-ms", static_cast<int64_t>(cfg->election_timeout.count())),
       log::F("auto-compaction-mode", cfg->auto_compaction_mode),
       log::F("auto-compaction-retention", cfg->auto_compaction_retention),
       log::F("log-level", level)});
  if (Status st = etcdw::common::PrepareDataDir(*cfg); !st.ok()) return ConfigError(st.message());

  StopRequest stop;
  // Signals are handled on a dedicated thread; every other thread has them blocked.
  std::atomic<bool> main_done{false};
  std::thread signals([&stop, &exit_code_file, &main_done, stop_signals] {
    int count = 0;
    while (true) {
      int sig = 0;
      if (sigwait(&stop_signals, &sig) != 0) continue;
      if (sig == SIGUSR1) {
        // Main's wake-up when it is done; a SIGUSR1 from outside is ignored (returning then
        // would leave SIGTERM and SIGINT blocked in every thread, unanswered).
        if (main_done.load()) return;
        log::Debug("ignoring SIGUSR1");
        continue;
      }
      const char* name = sig == SIGTERM ? "terminated" : "interrupt";
      if (++count > 1) {
        log::Warn("second stop signal, exiting immediately", {log::F("signal", name)});
        std::_Exit(1);
      }
      log::Info("caught shutdown signal", {log::F("signal", name)});
      if (!exit_code_file.empty()) WriteExitCodeFile(exit_code_file, name);
      stop.Request(0, name);
    }
  });
  auto finish_signals = [&] {
    main_done.store(true);
    pthread_kill(signals.native_handle(), SIGUSR1);
    signals.join();
  };

  auto server = etcdw::server::EtcdServer::Open(*cfg);
  if (!server.ok()) {
    finish_signals();
    return StartupError("cannot open the store", server.status().message());
  }
  (*server)->SetFatalHandler([&stop](const Status& st) { stop.Request(1, st.ToString()); });
  if (Status st = (*server)->Start(); !st.ok()) {
    (*server)->Stop();
    finish_signals();
    return StartupError("cannot start the member", st.message());
  }
  // As etcd, clients are served once this member has published itself to the cluster, which
  // needs a quorum; until then the member only takes part in Raft.
  if (!(*server)->Published()) log::Info("waiting for a quorum to publish this member");
  while (!(*server)->Published()) {
    if (stop.WaitFor(std::chrono::milliseconds(20))) {
      log::Info("stopping before serving clients", {log::F("reason", stop.reason)});
      (*server)->Stop();
      server->reset();
      finish_signals();
      return stop.exit_code;
    }
  }
  auto grpc = etcdw::server::GrpcServer::Start(**server);
  if (!grpc.ok()) {
    (*server)->Stop();
    finish_signals();
    return StartupError("cannot serve clients", grpc.status().message());
  }
  log::Info("etcd server is now ready to serve client requests",
            {log::F("client-urls", etcdw::common::JoinUrls(cfg->listen_client_urls))});

  stop.Wait();
  log::Info("stopping", {log::F("reason", stop.reason)});
  // A leader hands leadership to another voter first, so the cluster does not wait for an
  // election timeout (as etcd does on a graceful stop).
  if (stop.exit_code == 0) (*server)->TransferLeadershipForStop(2 * cfg->election_timeout);
  // Stop accepting calls and give in-flight ones a moment; then stop the member, which drains
  // accepted proposals before it returns.
  (*grpc)->Shutdown(std::chrono::seconds(2));
  (*server)->Stop();
  grpc->reset();
  server->reset();
  finish_signals();
  log::Info("stopped", {log::F("exit-code", stop.exit_code)});
  return stop.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals before any thread starts, so only the signal thread receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  gpr_set_log_function(GrpcLog);

  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "start-etcd") {
    std::fprintf(stderr,
                 "etcd-wrapper: the start-etcd command (bootstrap through the backup-restore "
                 "sidecar) is not available in this build; use --config FILE\n");
    return 1;
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
  return RunConfigMode(config, log_level, flags.IsSet("exit-code-file") ? exit_code_file : "",
                       stop_signals);
}
