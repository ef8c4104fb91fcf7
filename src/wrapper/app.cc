// The wrapper's lifecycle. In the pod (start-etcd):
//   signals -> sidecar client -> initialisation loop -> GET /config -> $HOME/etcd.conf.yaml ->
//   /readyz server (503 until ready) -> store started -> exit-code file removed ->
//   clients served once published -> wait for a stop -> graceful shutdown.
#include "etcdw/wrapper/app.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "etcdw/common/config.h"
#include "etcdw/common/flags.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/stop.h"
#include "etcdw/wrapper/bootstrap.h"
#include "etcdw/wrapper/control_server.h"
#include "etcdw/wrapper/embedded_member.h"
#include "etcdw/wrapper/exit_code.h"
#include "etcdw/wrapper/readiness.h"
#include "etcdw/wrapper/sidecar_client.h"

namespace etcdw::wrapper {

namespace log = etcdw::log;
namespace fs = std::filesystem;

namespace {

// A failure once logging runs: one JSON error line; exit status 1.
int Fatal(std::string_view what, const std::string& error) {
  log::Error(what, {log::F("error", error)});
  return 1;
}

// Writes the fetched config where gardener's wrapper keeps it ($HOME/etcd.conf.yaml, 0600).
Status WriteConfigFile(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("cannot write \"" + path + "\": " + std::strerror(errno));
  bool ok = ::fchmod(fd, 0600) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int saved = errno;
  ::close(fd);
  if (!ok) return Internal("cannot write \"" + path + "\": " + std::strerror(saved));
  return Status::Ok();
}

// gardener's wrapper makes every file under data-dir 0600 before etcd starts (and sets the
// umask to 0077 for what comes after): the data must not be readable by other users.
Status RestrictDataDirFiles(const std::string& data_dir) {
  std::error_code ec;
  if (!fs::exists(data_dir, ec)) return Status::Ok();
  if (!fs::is_directory(data_dir, ec)) {
    return InvalidArgument("data-dir \"" + data_dir + "\" is not a directory");
  }
  for (auto it = fs::recursive_directory_iterator(data_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) {
      fs::permissions(it->path(), fs::perms::owner_read | fs::perms::owner_write,
                      fs::perm_options::replace, ec);
      if (ec) break;
    }
  }
  if (ec) return Internal("data-dir \"" + data_dir + "\": " + ec.message());
  return Status::Ok();
}

// "etcd client TLS" as gardener detects it: cert-file, key-file and trusted-ca-file all set.
bool ClientTlsEnabled(const common::TlsConfig& t) {
  return !t.cert_file.empty() && !t.key_file.empty() && !t.trusted_ca_file.empty();
}

ControlServerOptions ControlOptionsFor(const common::EtcdConfig& cfg, int port) {
  ControlServerOptions o;
  o.port = port;
  if (ClientTlsEnabled(cfg.client_tls)) {
    o.cert_file = cfg.client_tls.cert_file;
    o.key_file = cfg.client_tls.key_file;
    o.client_ca_file = cfg.client_tls.trusted_ca_file;
  }
  return o;
}

// The store from start to stop, once the config is known: /readyz, the member, the wait for a
// stop, the graceful shutdown. Returns the exit code.
int RunStore(const common::EtcdConfig& cfg, common::StopRequest& stop,
             const ReadinessOptions* readiness, int wrapper_port, const std::string& exit_code_file,
             std::chrono::milliseconds ready_timeout) {
  std::unique_ptr<ReadinessProbe> probe;
  std::unique_ptr<ControlServer> control;
  if (wrapper_port > 0) {
    auto p = ReadinessProbe::Start(*readiness);
    if (!p.ok()) return Fatal("cannot create the readiness client", p.status().message());
    probe = std::move(p).value();
    ReadinessProbe* probe_ptr = probe.get();
    auto c = ControlServer::Start(
        ControlOptionsFor(cfg, wrapper_port), [probe_ptr] { return probe_ptr->Ready(); },
        [&stop] { stop.Request(0, "stop requested through /stop"); });
    if (!c.ok()) {
      return Fatal("cannot start the HTTP server on --etcd-wrapper-port", c.status().message());
    }
    control = std::move(c).value();
  }
  auto member = EmbeddedMember::Start(cfg, &stop);
  if (!member.ok()) return Fatal("cannot start etcd", member.status().message());
  if (!exit_code_file.empty()) RemoveExitCodeFile(exit_code_file);
  auto serving = (*member)->ServeWhenPublished(stop, ready_timeout);
  if (!serving.ok()) {
    (*member)->Stop(false);
    return Fatal("cannot serve clients", serving.status().message());
  }
  stop.Wait();
  log::Info("stopping", {log::F("reason", stop.reason())});
  if (control) control->Stop();
  probe.reset();
  (*member)->Stop(stop.exit_code() == 0);
  log::Info("stopped", {log::F("exit-code", stop.exit_code())});
  return stop.exit_code();
}

// Applies the log level: the flag wins over the config's.
bool ApplyLogLevel(const std::string& flag, const std::string& from_config) {
  auto lvl = log::ParseLevel(!flag.empty() ? flag : from_config.empty() ? "info" : from_config);
  if (!lvl.ok()) return false;
  log::SetLevel(lvl.value());
  return true;
}

// The signal catcher's hook: records the stop signal's name in the exit-code file, when one is
// set, so that the next start chooses its validation from it (exit_code.h).
common::SignalCatcher::SignalHook RecordSignalIn(const std::string& exit_code_file) {
  if (exit_code_file.empty()) return nullptr;
  return [exit_code_file](const std::string& name) { CaptureExitSignal(exit_code_file, name); };
}

}  // namespace

int RunStartEtcd(const StartEtcdOptions& o) {
  ApplyLogLevel(o.log_level, "");
  common::StopRequest stop;
  common::SignalCatcher signals(&stop, RecordSignalIn(o.exit_code_file));
  log::Info(
      "Running with flags",
      {log::F("backup-restore-ca-cert-bundle-path", o.sidecar_ca_file),
       log::F("backup-restore-host-port", o.sidecar_host_port),
       log::F("backup-restore-tls-enabled", o.sidecar_tls),
       log::F("bootstrap-timeout", common::FormatGoDuration(o.bootstrap_timeout)),
       log::F("etcd-client-cert-path", o.etcd_client_cert),
       log::F("etcd-client-key-path", o.etcd_client_key),
       log::F("etcd-client-port", o.etcd_client_port),
       log::F("etcd-ready-timeout", common::FormatGoDuration(o.ready_timeout)),
       log::F("etcd-server-name", o.etcd_server_name), log::F("etcd-wrapper-port", o.wrapper_port),
       log::F("exit-code-file", o.exit_code_file)});

  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    return Fatal("cannot start", "HOME is not set: the etcd config is written to $HOME");
  }
  auto sidecar = SidecarClient::Create(o);
  if (!sidecar.ok()) return Fatal("cannot create the sidecar client", sidecar.status().message());

  BootstrapOptions b;
  b.exit_code_file = o.exit_code_file;
  b.timeout = o.bootstrap_timeout;
  if (Status st = RunInitialization(**sidecar, b, stop); !st.ok()) {
    if (st.code() == Code::kCanceled) {
      log::Info("stopped during bootstrap", {log::F("reason", stop.reason())});
      return stop.exit_code();
    }
    return Fatal("etcd initialization failed", st.message());
  }
  auto text = FetchConfig(**sidecar, b, stop);
  if (!text.ok()) {
    if (text.status().code() == Code::kCanceled) return stop.exit_code();
    return Fatal("cannot fetch the etcd configuration", text.status().message());
  }
  const std::string config_path = std::string(home) + "/etcd.conf.yaml";
  if (Status st = WriteConfigFile(config_path, *text); !st.ok()) {
    return Fatal("cannot write the etcd configuration", st.message());
  }
  log::Info("fetched and written etcd configuration", {log::F("path", config_path)});
  auto cfg = common::ParseConfig(*text, config_path);
  if (!cfg.ok()) return Fatal("invalid etcd configuration", cfg.status().message());
  if (o.log_level.empty() && !ApplyLogLevel("", cfg->log_level)) {
    return Fatal("invalid etcd configuration",
                 "log-level: unknown level \"" + cfg->log_level + "\"");
  }
  ::umask(0077);
  if (Status st = RestrictDataDirFiles(cfg->data_dir); !st.ok()) {
    return Fatal("cannot prepare the data directory", st.message());
  }
  if (Status st = common::PrepareDataDir(*cfg); !st.ok()) {
    return Fatal("cannot prepare the data directory", st.message());
  }

  ReadinessOptions r;
  r.endpoint = (o.etcd_server_name.empty() ? std::string("127.0.0.1") : o.etcd_server_name) + ":" +
               std::to_string(o.etcd_client_port);
  if (ClientTlsEnabled(cfg->client_tls)) {
    r.tls = true;
    r.ca_file = cfg->client_tls.trusted_ca_file;
    r.server_name = o.etcd_server_name;
    r.cert_file = o.etcd_client_cert;
    r.key_file = o.etcd_client_key;
  }
  return RunStore(*cfg, stop, &r, static_cast<int>(o.wrapper_port), o.exit_code_file,
                  o.ready_timeout);
}

int RunLocal(const LocalOptions& o) {
  // The config file names the log level, and loading it logs about its keys: load it once
  // silently to learn the level (the flag wins), then again at that level.
  log::SetLevel(log::Level::kOff);
  auto cfg = common::LoadConfigFile(o.config_file);
  bool level_ok = ApplyLogLevel(o.log_level, cfg.ok() ? cfg->log_level : "");
  if (!level_ok) log::SetLevel(log::Level::kInfo);
  if (cfg.ok()) cfg = common::LoadConfigFile(o.config_file);
  // Configuration errors: exactly one plain line on stderr naming the file or setting.
  if (!cfg.ok()) {
    std::fprintf(stderr, "etcd-wrapper: %s\n", cfg.status().message().c_str());
    return 1;
  }
  if (!level_ok) {
    std::fprintf(stderr, "etcd-wrapper: log-level: unknown level \"%s\"\n", cfg->log_level.c_str());
    return 1;
  }
  log::Debug(
      "configuration loaded",
      {log::F("path", o.config_file), log::F("name", cfg->name), log::F("data-dir", cfg->data_dir),
       log::F("listen-client-urls", common::JoinUrls(cfg->listen_client_urls)),
       log::F("quota-backend-bytes", cfg->EffectiveQuotaBytes()),
       log::F("snapshot-count", cfg->snapshot_count)});
  if (Status st = common::PrepareDataDir(*cfg); !st.ok()) {
    std::fprintf(stderr, "etcd-wrapper: %s\n", st.message().c_str());
    return 1;
  }
  common::StopRequest stop;
  common::SignalCatcher signals(&stop, RecordSignalIn(o.exit_code_file));
  // Readiness through the first client URL (a wildcard host means this machine).
  ReadinessOptions r;
  const common::Url& u = cfg->listen_client_urls.front();
  std::string host = u.host.empty() || u.host == "0.0.0.0" || u.host == "::" ? "127.0.0.1" : u.host;
  r.endpoint = host + ":" + std::to_string(u.port);
  if (u.tls() && ClientTlsEnabled(cfg->client_tls)) {
    r.tls = true;
    r.ca_file = cfg->client_tls.trusted_ca_file;
    r.cert_file = cfg->client_tls.cert_file;  // etcd server certificates serve both ways
    r.key_file = cfg->client_tls.key_file;
  }
  return RunStore(*cfg, stop, &r, o.wrapper_port, "", std::chrono::milliseconds(0));
}

}  // namespace etcdw::wrapper
