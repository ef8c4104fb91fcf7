#include "etcdw/wrapper/embedded_member.h"

#include <string>

#include "etcdw/common/flags.h"
#include "etcdw/common/logging.h"
#include "etcdw/data_dir/data_dir.h"

namespace etcdw::wrapper {

namespace log = etcdw::log;
using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<EmbeddedMember>> EmbeddedMember::Start(const common::EtcdConfig& config,
                                                              common::StopRequest* stop) {
  std::unique_ptr<EmbeddedMember> m(new EmbeddedMember());
  m->config_ = config;
  // A data directory etcd wrote is converted in place first (or an interrupted conversion
  // finished); any other directory is left alone.
  data_dir::TakeoverOptions takeover_opts;
  takeover_opts.bcrypt_cost = static_cast<int>(config.bcrypt_cost);
  auto takeover = data_dir::TakeOverEtcdDataDir(config.data_dir, takeover_opts);
  if (!takeover.ok())
    return takeover.status().WithContext("cannot take over etcd's data directory");
  auto server = member::EtcdServer::Open(config);
  if (!server.ok()) return server.status().WithContext("cannot open the store");
  m->server_ = std::move(server).value();
  m->server_->SetFatalHandler([stop](const Status& st) { stop->Request(1, st.ToString()); });
  if (Status st = m->server_->Start(); !st.ok()) {
    m->server_->Stop();
    m->server_.reset();
    return st.WithContext("cannot start the member");
  }
  return m;
}

EmbeddedMember::~EmbeddedMember() { Stop(false); }

Result<bool> EmbeddedMember::ServeWhenPublished(const common::StopRequest& stop,
                                                std::chrono::milliseconds warn_after) {
  const auto start = Clock::now();
  bool warned = false;
  if (!server_->Published()) log::Info("waiting for a quorum to publish this member");
  while (!server_->Published()) {
    if (stop.WaitFor(std::chrono::milliseconds(20))) return false;
    if (!warned && warn_after.count() > 0 && Clock::now() - start > warn_after) {
      warned = true;
      log::Error("etcd is not ready to serve clients yet; still waiting",
                 {log::F("etcd-ready-timeout", common::FormatGoDuration(warn_after))});
    }
  }
  // listen-client-urls are served by our own HTTP/2 server (docs/design.md, "The client API
  // server").
  auto native = client_api::NativeRpcServer::Start(
      *server_, client_api::NativeRpcOptions::FromConfig(config_));
  if (!native.ok()) return native.status();
  native_ = std::move(native).value();
  log::Info("etcd server is now ready to serve client requests",
            {log::F("client-urls", common::JoinUrls(config_.listen_client_urls))});
  return true;
}

void EmbeddedMember::Stop(bool graceful) {
  if (!server_) return;
  // As etcd on a graceful stop: hand leadership over so the cluster does not wait for an
  // election timeout.
  if (graceful) server_->TransferLeadershipForStop(2 * config_.election_timeout);
  // Stop accepting calls and, on a graceful stop, give in-flight ones a moment; then stop the
  // member, which drains accepted proposals before it returns. After a fatal error (a log that
  // cannot be synced) nothing in flight can finish: its clients see the connection end at once,
  // as when etcd exits.
  if (native_) native_->Shutdown(graceful ? std::chrono::seconds(2) : std::chrono::seconds(0));
  server_->Stop();
  native_.reset();
  server_.reset();
}

}  // namespace etcdw::wrapper
