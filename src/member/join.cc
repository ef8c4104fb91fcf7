#include "etcdw/member/join.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "etcdw/common/logging.h"
#include "etcdw/peer_transport/peer_transport.h"

namespace etcdw::member {

namespace {

std::vector<std::string> Strings(const std::vector<common::Url>& urls) {
  std::vector<std::string> out;
  out.reserve(urls.size());
  for (const auto& u : urls) out.push_back(u.ToString());
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

Result<JoinInfo> MatchClusterToConfig(const common::EtcdConfig& cfg, uint64_t cluster_id,
                                      std::vector<cluster::Member> remote) {
  if (cluster_id == 0) return Unavailable("the peer does not know its cluster ID yet");
  const std::string where = "initial-cluster: error validating peer URLs against cluster " +
                            cluster::IdToHex(cluster_id) + ": ";
  if (remote.size() != cfg.initial_cluster.size()) {
    return InvalidArgument(where + "member count is unequal (initial-cluster lists " +
                           std::to_string(cfg.initial_cluster.size()) + ", the cluster has " +
                           std::to_string(remote.size()) + ")");
  }
  // Every member of the cluster must appear in initial-cluster with the same peer URLs.
  for (const cluster::Member& m : remote) {
    auto urls = cluster::SortedUrls(m.peer_urls);
    bool found = std::any_of(
        cfg.initial_cluster.begin(), cfg.initial_cluster.end(),
        [&](const auto& entry) { return cluster::SortedUrls(Strings(entry.second)) == urls; });
    if (!found) {
      return InvalidArgument(where + "no match found for existing member (" +
                             cluster::IdToHex(m.id) + ", [" + Join(m.peer_urls) + "])");
    }
  }
  JoinInfo info;
  info.cluster_id = cluster_id;
  auto mine = cluster::SortedUrls(Strings(cfg.initial_advertise_peer_urls));
  for (const cluster::Member& m : remote) {
    if (cluster::SortedUrls(m.peer_urls) == mine) info.local_id = m.id;
  }
  if (info.local_id == 0) {
    return InvalidArgument("initial-advertise-peer-urls: no member of cluster " +
                           cluster::IdToHex(cluster_id) + " has peer URLs " + Join(mine) +
                           " (add this member with 'etcdctl member add' first)");
  }
  info.members = std::move(remote);
  return info;
}

Result<JoinInfo> DiscoverCluster(const common::EtcdConfig& cfg, int attempts,
                                 std::chrono::milliseconds retry_delay,
                                 const common::Clock& clock) {
  std::vector<common::Url> urls;
  for (const auto& [name, member_urls] : cfg.initial_cluster) {
    if (name == cfg.name) continue;
    urls.insert(urls.end(), member_urls.begin(), member_urls.end());
  }
  if (urls.empty()) {
    return InvalidArgument(
        "initial-cluster: joining an existing cluster needs the peer URLs of its other members");
  }
  Status last;
  for (int i = 0; i < attempts; ++i) {
    if (i > 0) {
      std::mutex mu;
      std::condition_variable cv;
      std::unique_lock lock(mu);
      clock.WaitUntil(lock, cv, clock.Now() + retry_delay, [] { return false; });
    }
    auto answer = peer_transport::PeerTransport::FetchClusterInfo(urls, cfg.peer_tls,
                                                                  std::chrono::seconds(2), clock);
    if (!answer.ok()) {
      last = answer.status();
      log::Warn("cannot fetch the cluster information yet", {log::F("error", last)});
      continue;
    }
    etcdserverpb::MemberListResponse list;
    if (!list.ParseFromString(*answer)) {
      last = DataLoss("undecodable cluster information from the peer");
      continue;
    }
    std::vector<cluster::Member> remote;
    for (const auto& pm : list.members()) remote.push_back(cluster::Member::FromProto(pm));
    auto info = MatchClusterToConfig(cfg, list.header().cluster_id(), std::move(remote));
    if (info.ok() || info.status().code() != Code::kUnavailable) return info;
    last = info.status();
  }
  return Unavailable("cannot fetch cluster info from peer urls: " + last.message());
}

}  // namespace etcdw::member
