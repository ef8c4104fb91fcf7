#include "etcdw/sidecar/peer_urls.h"

#include <algorithm>
#include <set>
#include <thread>

#include "etcdw/common/http.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/url.h"

namespace etcdw::sidecar {
namespace {

// The wrapper's base URL: the host of `etcd_endpoint`, `port`, https when `tls`.
Result<common::Url> WrapperAddress(const std::string& etcd_endpoint, int port, bool tls);

using std::chrono::milliseconds;

bool Cancelled(const PeerUrlUpdateOptions& o) { return o.cancel != nullptr && o.cancel->load(); }

// Sleeps `d` in short steps; false when cancelled meanwhile.
bool Pause(const PeerUrlUpdateOptions& o, milliseconds d) {
  auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    if (Cancelled(o)) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        until - std::chrono::steady_clock::now(), milliseconds(50)));
  }
  return !Cancelled(o);
}

// Runs `call` up to `attempts` times, waiting 2 s, 4 s, 8 s... between tries (gardener's
// member calls). The last error is returned.
template <typename T>
Result<T> Retry(const PeerUrlUpdateOptions& o, const char* what, int attempts,
                const std::function<Result<T>()>& call) {
  milliseconds wait(2000);
  Status last;
  for (int i = 1; i <= attempts; ++i) {
    Result<T> r = call();
    if (r.ok()) return r;
    last = r.status();
    log::Warn(std::string(what) + " failed", {log::F("attempt", i), log::F("error", last)});
    if (i == attempts || !Pause(o, wait)) break;
    wait *= 2;
  }
  if (Cancelled(o)) return Status(Code::kCanceled, std::string(what) + ": cancelled");
  return last.WithContext(what);
}

// The local member's ID and the peer URLs the cluster has registered for it.
struct Registration {
  uint64_t id = 0;
  std::vector<std::string> peer_urls;
};

Result<Registration> ReadRegistration(const PeerUrlUpdateOptions& o) {
  ETCDW_ASSIGN_OR_RETURN(auto local, EtcdClient::Connect(o.etcd, o.etcd.endpoints.front()));
  ETCDW_ASSIGN_OR_RETURN(auto status, local->EndpointStatus(o.etcd.connection_timeout));
  Registration reg;
  reg.id = status.header().member_id();
  // The list from any member that answers: a learner refuses cluster calls on some versions.
  ETCDW_ASSIGN_OR_RETURN(auto cluster, EtcdClient::ConnectToCluster(o.etcd));
  for (const auto& m : cluster.members.members()) {
    if (m.id() == reg.id) reg.peer_urls.assign(m.peerurls().begin(), m.peerurls().end());
  }
  return reg;
}

// Until the local member answers Status and knows a leader.
Status WaitHealthy(const PeerUrlUpdateOptions& o, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + o.health_timeout;
  Status last = Unavailable("not asked yet");
  while (std::chrono::steady_clock::now() < deadline) {
    auto c = EtcdClient::Connect(o.etcd, o.etcd.endpoints.front());
    if (!c.ok()) return c.status();
    auto st = (*c)->EndpointStatus(milliseconds(2000));
    if (st.ok() && st->leader() != 0) return Status::Ok();
    last = st.ok() ? Unavailable("the member knows no leader") : st.status();
    if (!Pause(o, milliseconds(1000))) return Status(Code::kCanceled, what + ": cancelled");
  }
  return Status(Code::kDeadlineExceeded, what + ": " + last.message());
}

// POST /stop to the wrapper: it ends etcd, the container restarts with the new config.
Status StopThroughWrapper(const PeerUrlUpdateOptions& o) {
  const bool tls = o.etcd.UseTls() || o.etcd.endpoints.front().rfind("https://", 0) == 0;
  ETCDW_ASSIGN_OR_RETURN(common::Url u,
                         WrapperAddress(o.etcd.endpoints.front(), o.wrapper_port, tls));
  const std::string url = u.ToString() + "/stop";
  common::HttpClientOptions ho;
  ho.tls = tls;
  ho.ca_file = o.etcd.ca_file;
  ho.system_roots = tls && o.etcd.ca_file.empty() && !o.etcd.insecure_skip_verify;
  ho.insecure_skip_verify = tls && o.etcd.ca_file.empty() && o.etcd.insecure_skip_verify;
  ho.timeout = milliseconds(30000);
  ETCDW_ASSIGN_OR_RETURN(auto client, common::HttpClient::Create(ho));
  ETCDW_ASSIGN_OR_RETURN(auto resp, client->Request("POST", u.HostPort(), "/stop", o.cancel));
  if (resp.status != 200) {
    return Unavailable("POST " + url + " answered HTTP " + std::to_string(resp.status) + ": " +
                       resp.body);
  }
  log::Info("asked etcd-wrapper to restart etcd with the new peer URLs", {log::F("url", url)});
  return Status::Ok();
}

}  // namespace

bool AllHttps(const std::vector<std::string>& urls) {
  if (urls.empty()) return false;
  return std::all_of(urls.begin(), urls.end(),
                     [](const std::string& u) { return u.rfind("https://", 0) == 0; });
}

std::vector<std::string> UnregisteredUrls(const std::vector<std::string>& configured,
                                          const std::vector<std::string>& registered) {
  std::set<std::string> known(registered.begin(), registered.end());
  std::vector<std::string> out;
  for (const auto& u : configured) {
    if (known.count(u) == 0) out.push_back(u);
  }
  return out;
}

namespace {

Result<common::Url> WrapperAddress(const std::string& etcd_endpoint, int port, bool tls) {
  std::string endpoint = etcd_endpoint;
  if (endpoint.find("://") == std::string::npos) endpoint = "http://" + endpoint;
  ETCDW_ASSIGN_OR_RETURN(common::Url u, common::ParseUrl(endpoint));
  u.scheme = tls ? "https" : "http";
  u.port = static_cast<uint16_t>(port);
  return u;
}

}  // namespace

Result<std::string> WrapperStopUrl(const std::string& etcd_endpoint, int port, bool tls) {
  ETCDW_ASSIGN_OR_RETURN(common::Url u, WrapperAddress(etcd_endpoint, port, tls));
  return u.ToString() + "/stop";
}

Result<PeerUrlOutcome> UpdatePeerUrls(const PeerUrlUpdateOptions& o) {
  if (o.etcd.endpoints.empty()) return InvalidArgument("no etcd endpoint configured");
  ETCDW_ASSIGN_OR_RETURN(Registration reg,
                         Retry<Registration>(o, "reading this member's registered peer URLs", 4,
                                             [&] { return ReadRegistration(o); }));
  const std::vector<std::string> missing = UnregisteredUrls(o.configured, reg.peer_urls);
  if (missing.empty()) return PeerUrlOutcome::kUnchanged;

  std::string registered;
  for (const auto& u : reg.peer_urls) registered += (registered.empty() ? "" : ",") + u;
  std::string configured;
  for (const auto& u : o.configured) configured += (configured.empty() ? "" : ",") + u;
  log::Info("the configured peer URLs differ from the registered ones: updating the member",
            {log::Hex("member-id", reg.id), log::F("registered", registered),
             log::F("configured", configured)});
  ETCDW_RETURN_IF_ERROR(
      Retry<bool>(o, "updating this member's peer URLs", 6, [&]() -> Result<bool> {
        ETCDW_ASSIGN_OR_RETURN(auto cluster, EtcdClient::ConnectToCluster(o.etcd));
        ETCDW_RETURN_IF_ERROR(
            cluster.client->MemberUpdate(reg.id, o.configured, milliseconds(30000)));
        return true;
      }).status());
  log::Info("updated this member's peer URLs", {log::Hex("member-id", reg.id)});
  ETCDW_RETURN_IF_ERROR(WaitHealthy(o, "waiting for the member after the peer URL update"));
  return PeerUrlOutcome::kUpdated;
}

Status RestartEtcdThroughWrapper(const PeerUrlUpdateOptions& o) {
  ETCDW_RETURN_IF_ERROR(StopThroughWrapper(o).WithContext("restarting etcd through etcd-wrapper"));
  // The old process may still answer for a moment: wait for it to go, then for the new one.
  auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < gone_by) {
    auto c = EtcdClient::Connect(o.etcd, o.etcd.endpoints.front());
    if (!c.ok()) return c.status();
    if (!(*c)->EndpointStatus(milliseconds(1000)).ok()) break;
    if (!Pause(o, milliseconds(200))) return Status(Code::kCanceled, "cancelled");
  }
  ETCDW_RETURN_IF_ERROR(WaitHealthy(o, "waiting for etcd to come back after the restart"));
  log::Info("etcd restarted with the new peer URLs");
  return Status::Ok();
}

}  // namespace etcdw::sidecar
