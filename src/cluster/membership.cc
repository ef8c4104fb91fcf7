#include "etcdw/cluster/membership.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cstdio>

#include "etcdw/internal.pb.h"
#include "etcdw/storage/meta_records.h"

namespace etcdw::cluster {

namespace {

namespace meta = storage::meta;

uint64_t Sha1Prefix(const std::string& data) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | digest[i];
  return v;
}

// Calls fn(the rest of the key, value) for each record of `family`.
template <typename Fn>
Status ForEachOf(const storage::Engine& e, const meta::Record& family, Fn fn) {
  storage::ReadOptions ro;
  ro.lower_bound = std::string(family.key);
  ro.upper_bound = meta::FamilyEnd(family);
  auto it = e.NewIterator(storage::Column::kMeta, ro);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ETCDW_RETURN_IF_ERROR(fn(it->key().substr(family.key.size()), it->value()));
  }
  return it->status();
}
}  // namespace

void Member::ToProto(etcdserverpb::Member* out) const {
  out->set_id(id);
  out->set_name(name);
  for (const auto& u : peer_urls) out->add_peerurls(u);
  for (const auto& u : client_urls) out->add_clienturls(u);
  out->set_islearner(is_learner);
}

Member Member::FromProto(const etcdserverpb::Member& pm) {
  Member m;
  m.id = pm.id();
  m.name = pm.name();
  m.peer_urls.assign(pm.peerurls().begin(), pm.peerurls().end());
  m.client_urls.assign(pm.clienturls().begin(), pm.clienturls().end());
  m.is_learner = pm.islearner();
  return m;
}

std::string Member::Serialize() const {
  internalpb::MemberRecord rec;
  rec.set_id(id);
  rec.set_name(name);
  for (const auto& u : peer_urls) rec.add_peer_urls(u);
  for (const auto& u : client_urls) rec.add_client_urls(u);
  rec.set_is_learner(is_learner);
  return rec.SerializeAsString();
}

std::optional<Member> Member::Parse(std::string_view bytes) {
  internalpb::MemberRecord rec;
  if (!rec.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return std::nullopt;
  return Member{rec.id(),
                rec.name(),
                {rec.peer_urls().begin(), rec.peer_urls().end()},
                {rec.client_urls().begin(), rec.client_urls().end()},
                rec.is_learner()};
}

uint64_t ComputeMemberId(std::vector<std::string> peer_urls, const std::string& token,
                         std::optional<int64_t> unix_time) {
  std::string b;
  for (const auto& u : SortedUrls(std::move(peer_urls))) b += u;
  b += token;
  if (unix_time) b += std::to_string(*unix_time);
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

std::vector<std::string> SortedUrls(std::vector<std::string> urls) {
  std::sort(urls.begin(), urls.end());
  return urls;
}

std::vector<Member> InitialMembers(const common::EtcdConfig& cfg) {
  std::vector<Member> out;
  for (const auto& [name, urls] : cfg.initial_cluster) {
    Member m;
    for (const auto& u : urls) m.peer_urls.push_back(u.ToString());
    m.id = ComputeMemberId(m.peer_urls, cfg.initial_cluster_token);
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

Status Membership::Load(const storage::Engine& e) {
  std::lock_guard lock(mu_);
  members_.clear();
  removed_.clear();
  cluster_id_ = 0;
  ETCDW_ASSIGN_OR_RETURN(auto cid, e.Get(storage::Column::kMeta, meta::kClusterId.key));
  if (cid) {
    if (cid->size() != 8) return DataLoss("cluster ID record is corrupt");
    cluster_id_ = storage::DecodeFixed64BE(cid->data());
  }
  ETCDW_RETURN_IF_ERROR(
      ForEachOf(e, meta::kClusterMembers, [&](std::string_view, std::string_view v) {
        auto m = Member::Parse(v);
        if (!m) return DataLoss("member record is corrupt");
        members_[m->id] = std::move(*m);
        return Status::Ok();
      }));
  return ForEachOf(e, meta::kRemovedMembers, [&](std::string_view k, std::string_view) {
    removed_.insert(std::stoull(std::string(k), nullptr, 16));
    return Status::Ok();
  });
}

uint64_t Membership::cluster_id() const {
  std::lock_guard lock(mu_);
  return cluster_id_;
}

std::vector<Member> Membership::List() const {
  std::lock_guard lock(mu_);
  std::vector<Member> out;
  for (const auto& [id, m] : members_) out.push_back(m);
  return out;
}

std::optional<Member> Membership::Get(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = members_.find(id);
  if (it == members_.end()) return std::nullopt;
  return it->second;
}

bool Membership::IsRemoved(uint64_t id) const {
  std::lock_guard lock(mu_);
  return removed_.count(id) > 0;
}

std::vector<uint64_t> Membership::RemovedIds() const {
  std::lock_guard lock(mu_);
  return std::vector<uint64_t>(removed_.begin(), removed_.end());
}

std::optional<Member> Membership::FindByPeerUrls(const std::vector<std::string>& urls) const {
  std::lock_guard lock(mu_);
  auto want = SortedUrls(urls);
  for (const auto& [id, m] : members_) {
    if (SortedUrls(m.peer_urls) == want) return m;
  }
  return std::nullopt;
}

std::optional<Member> Membership::FindUsingAnyPeerUrl(const std::vector<std::string>& urls,
                                                      uint64_t except) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, m] : members_) {
    if (id == except) continue;
    for (const auto& u : urls) {
      if (std::find(m.peer_urls.begin(), m.peer_urls.end(), u) != m.peer_urls.end()) return m;
    }
  }
  return std::nullopt;
}

raftpb::ConfState Membership::ConfState() const {
  std::lock_guard lock(mu_);
  raftpb::ConfState cs;
  for (const auto& [id, m] : members_) {
    if (m.is_learner) {
      cs.add_learners(id);
    } else {
      cs.add_voters(id);
    }
  }
  return cs;
}

size_t Membership::VoterCount() const {
  std::lock_guard lock(mu_);
  return std::count_if(members_.begin(), members_.end(),
                       [](auto& p) { return !p.second.is_learner; });
}

size_t Membership::LearnerCount() const {
  std::lock_guard lock(mu_);
  return std::count_if(members_.begin(), members_.end(),
                       [](auto& p) { return p.second.is_learner; });
}

size_t Membership::StartedVoterCount() const {
  std::lock_guard lock(mu_);
  return std::count_if(members_.begin(), members_.end(),
                       [](auto& p) { return !p.second.is_learner && !p.second.name.empty(); });
}

void Membership::StageClusterId(storage::Batch& b, uint64_t cluster_id) {
  b.Put(storage::Column::kMeta, meta::kClusterId.key, storage::EncodeFixed64BE(cluster_id));
  std::lock_guard lock(mu_);
  cluster_id_ = cluster_id;
}

void Membership::StageAdd(storage::Batch& b, const Member& m) {
  b.Put(storage::Column::kMeta, meta::KeyIn(meta::kClusterMembers, IdToHex(m.id)), m.Serialize());
  std::lock_guard lock(mu_);
  members_[m.id] = m;
}

void Membership::StageRemove(storage::Batch& b, uint64_t id) {
  b.Delete(storage::Column::kMeta, meta::KeyIn(meta::kClusterMembers, IdToHex(id)));
  b.Put(storage::Column::kMeta, meta::KeyIn(meta::kRemovedMembers, IdToHex(id)), "");
  std::lock_guard lock(mu_);
  members_.erase(id);
  removed_.insert(id);
}

void Membership::StageUpdate(storage::Batch& b, const Member& m) { StageAdd(b, m); }

void Membership::Fill(etcdserverpb::MemberListResponse* resp) const {
  for (const auto& m : List()) m.ToProto(resp->add_members());
}

Result<std::optional<uint64_t>> LoadLocalMemberId(const storage::Engine& e) {
  ETCDW_ASSIGN_OR_RETURN(auto v, e.Get(storage::Column::kMeta, meta::kLocalMemberId.key));
  if (!v) return std::optional<uint64_t>();
  if (v->size() != 8) return DataLoss("local member ID record is corrupt");
  return std::optional<uint64_t>(storage::DecodeFixed64BE(v->data()));
}

void StageLocalMemberId(storage::Batch& b, uint64_t id) {
  b.Put(storage::Column::kMeta, meta::kLocalMemberId.key, storage::EncodeFixed64BE(id));
}

Result<std::optional<RestoredIdentity>> LoadRestoredIdentity(const storage::Engine& e) {
  ETCDW_ASSIGN_OR_RETURN(auto v, e.Get(storage::Column::kMeta, meta::kRestoredIdentity.key));
  if (!v) return std::optional<RestoredIdentity>();
  if (v->size() != 16) return DataLoss("restored identity record is corrupt");
  return std::optional<RestoredIdentity>(RestoredIdentity{storage::DecodeFixed64BE(v->data()),
                                                          storage::DecodeFixed64BE(v->data() + 8)});
}

void StageRestoredIdentity(storage::Batch& b, const RestoredIdentity& id) {
  b.Put(storage::Column::kMeta, meta::kRestoredIdentity.key,
        storage::EncodeFixed64BE(id.member_id) + storage::EncodeFixed64BE(id.cluster_id));
}

void StageClearRestoredIdentity(storage::Batch& b) {
  b.Delete(storage::Column::kMeta, meta::kRestoredIdentity.key);
}

Result<std::vector<Member>> LoadJoinMembers(const storage::Engine& e) {
  ETCDW_ASSIGN_OR_RETURN(auto v, e.Get(storage::Column::kMeta, meta::kJoinMembers.key));
  std::vector<Member> out;
  if (!v) return out;
  etcdserverpb::MemberListResponse list;
  if (!list.ParseFromString(*v)) return DataLoss("join members record is corrupt");
  for (const auto& pm : list.members()) out.push_back(Member::FromProto(pm));
  return out;
}

void StageJoinMembers(storage::Batch& b, const std::vector<Member>& members) {
  etcdserverpb::MemberListResponse list;
  for (const Member& m : members) m.ToProto(list.add_members());
  b.Put(storage::Column::kMeta, meta::kJoinMembers.key, list.SerializeAsString());
}

}  // namespace etcdw::cluster
