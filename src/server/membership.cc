#include "etcdw/server/membership.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cstdio>

#include "etcdw/common/logging.h"
#include "etcdw/internal.pb.h"

namespace etcdw::server {

namespace {
constexpr char kClusterIdKey[] = "cluster/id";
constexpr char kLocalIdKey[] = "cluster/local_id";
constexpr char kMemberPrefix[] = "cluster/member/";

uint64_t Sha1Prefix(const std::string& data) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | digest[i];
  return v;
}
}  // namespace

void Member::ToProto(etcdserverpb::Member* out) const {
  out->set_id(id);
  out->set_name(name);
  for (const auto& u : peer_urls) out->add_peerurls(u);
  for (const auto& u : client_urls) out->add_clienturls(u);
  out->set_islearner(is_learner);
}

uint64_t ComputeMemberId(std::vector<std::string> peer_urls, const std::string& token) {
  std::sort(peer_urls.begin(), peer_urls.end());
  std::string b;
  for (const auto& u : peer_urls) b += u;
  b += token;
  return Sha1Prefix(b);
}

uint64_t ComputeClusterId(std::vector<uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  std::string b;
  for (uint64_t id : ids) b += storage::EncodeFixed64BE(id);
  return Sha1Prefix(b);
}

std::string IdToHex(uint64_t id) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

const Member* ClusterState::Find(uint64_t id) const {
  for (const auto& m : members) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

Result<ClusterState> LoadOrBootstrapCluster(storage::Engine& engine,
                                            const common::EtcdConfig& cfg) {
  ClusterState st;
  ETCDW_ASSIGN_OR_RETURN(auto cid, engine.Get(storage::Column::kMeta, kClusterIdKey));
  if (cid) {
    ETCDW_ASSIGN_OR_RETURN(auto lid, engine.Get(storage::Column::kMeta, kLocalIdKey));
    if (cid->size() != 8 || !lid || lid->size() != 8) {
      return DataLoss("cluster identity records are corrupt");
    }
    st.cluster_id = storage::DecodeFixed64BE(cid->data());
    st.local_id = storage::DecodeFixed64BE(lid->data());
    storage::ReadOptions ro;
    ro.lower_bound = kMemberPrefix;
    ro.upper_bound = std::string(kMemberPrefix, sizeof(kMemberPrefix) - 2) + char('/' + 1);
    auto it = engine.NewIterator(storage::Column::kMeta, ro);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      internalpb::MemberRecord rec;
      if (!rec.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
        return DataLoss("member record is corrupt");
      }
      Member m{rec.id(),
               rec.name(),
               {rec.peer_urls().begin(), rec.peer_urls().end()},
               {rec.client_urls().begin(), rec.client_urls().end()},
               rec.is_learner()};
      st.members.push_back(std::move(m));
    }
    ETCDW_RETURN_IF_ERROR(it->status());
    if (!st.Find(st.local_id)) return DataLoss("this member is missing from the stored membership");
    return st;
  }

  // Fresh data directory: derive the membership from initial-cluster.
  for (const auto& [name, urls] : cfg.initial_cluster) {
    Member m;
    m.name = name;
    for (const auto& u : urls) m.peer_urls.push_back(u.ToString());
    m.id = ComputeMemberId(m.peer_urls, cfg.initial_cluster_token);
    if (name == cfg.name) {
      st.local_id = m.id;
      for (const auto& u : cfg.advertise_client_urls) m.client_urls.push_back(u.ToString());
    } else {
      m.name.clear();  // etcd shows a member's name only once it has started
    }
    st.members.push_back(std::move(m));
  }
  std::vector<uint64_t> ids;
  for (const auto& m : st.members) ids.push_back(m.id);
  st.cluster_id = ComputeClusterId(ids);
  std::sort(st.members.begin(), st.members.end(), [](auto& a, auto& b) { return a.id < b.id; });

  storage::Batch batch(engine);
  batch.Put(storage::Column::kMeta, kClusterIdKey, storage::EncodeFixed64BE(st.cluster_id));
  batch.Put(storage::Column::kMeta, kLocalIdKey, storage::EncodeFixed64BE(st.local_id));
  for (const auto& m : st.members) {
    internalpb::MemberRecord rec;
    rec.set_id(m.id);
    rec.set_name(m.name);
    for (const auto& u : m.peer_urls) rec.add_peer_urls(u);
    for (const auto& u : m.client_urls) rec.add_client_urls(u);
    rec.set_is_learner(m.is_learner);
    batch.Put(storage::Column::kMeta, kMemberPrefix + IdToHex(m.id), rec.SerializeAsString());
  }
  ETCDW_RETURN_IF_ERROR(engine.Write(batch, /*sync=*/true));
  log::Info("bootstrapped new cluster",
            {log::Hex("cluster-id", st.cluster_id), log::Hex("local-member-id", st.local_id)});
  return st;
}

}  // namespace etcdw::server
