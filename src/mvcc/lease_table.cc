#include "etcdw/mvcc/lease_table.h"

#include <algorithm>
#include <mutex>

#include "etcdw/internal.pb.h"

namespace etcdw::mvcc {

std::string LeaseTable::RecordKey(int64_t id) {
  std::string k = "L";
  storage::PutFixed64BE(k, static_cast<uint64_t>(id));
  return k;
}

std::string LeaseTable::AttachmentPrefix(int64_t id) {
  std::string k = "A";
  storage::PutFixed64BE(k, static_cast<uint64_t>(id));
  return k;
}

Status LeaseTable::Load(const storage::Engine& engine) {
  std::unique_lock lock(mu_);
  leases_.clear();
  storage::ReadOptions ro;
  ro.lower_bound = "L";
  ro.upper_bound = "M";
  auto it = engine.NewIterator(storage::Column::kLeases, ro);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    internalpb::LeaseRecord rec;
    if (!rec.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return DataLoss("lease record is corrupt");
    }
    leases_[rec.id()] = LeaseInfo{rec.id(), rec.ttl(), rec.remaining_ttl()};
  }
  return it->status();
}

std::optional<LeaseInfo> LeaseTable::Get(int64_t id) const {
  std::shared_lock lock(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  return it->second;
}

bool LeaseTable::Exists(int64_t id) const {
  std::shared_lock lock(mu_);
  return leases_.count(id) > 0;
}

std::vector<LeaseInfo> LeaseTable::List() const {
  std::shared_lock lock(mu_);
  std::vector<LeaseInfo> out;
  out.reserve(leases_.size());
  for (const auto& [id, info] : leases_) out.push_back(info);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

size_t LeaseTable::Size() const {
  std::shared_lock lock(mu_);
  return leases_.size();
}

Result<std::vector<std::string>> LeaseTable::AttachedKeys(const storage::Engine& engine, int64_t id,
                                                          storage::Batch* batch) {
  std::string prefix = AttachmentPrefix(id);
  storage::ReadOptions ro;
  ro.lower_bound = prefix;
  uint64_t u = static_cast<uint64_t>(id);
  if (u != UINT64_MAX) {
    ro.upper_bound = "A" + storage::EncodeFixed64BE(u + 1);
  } else {
    ro.upper_bound = "B";
  }
  auto it = batch ? engine.NewIterator(*batch, storage::Column::kLeases, ro)
                  : engine.NewIterator(storage::Column::kLeases, ro);
  std::vector<std::string> keys;
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    std::string_view k = it->key();
    if (k.substr(0, prefix.size()) != prefix) break;
    keys.emplace_back(k.substr(prefix.size()));
  }
  ETCDW_RETURN_IF_ERROR(it->status());
  return keys;
}

void LeaseTable::StageGrant(storage::Batch& batch, const LeaseInfo& info) {
  internalpb::LeaseRecord rec;
  rec.set_id(info.id);
  rec.set_ttl(info.ttl);
  rec.set_remaining_ttl(info.remaining_ttl);
  batch.Put(storage::Column::kLeases, RecordKey(info.id), rec.SerializeAsString());
  std::unique_lock lock(mu_);
  leases_[info.id] = info;
}

void LeaseTable::StageRevoke(storage::Batch& batch, int64_t id,
                             const std::vector<std::string>& keys) {
  batch.Delete(storage::Column::kLeases, RecordKey(id));
  for (const auto& k : keys) StageDetach(batch, id, k);
  std::unique_lock lock(mu_);
  leases_.erase(id);
}

void LeaseTable::StageCheckpoint(storage::Batch& batch, int64_t id, int64_t remaining_ttl) {
  std::unique_lock lock(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  it->second.remaining_ttl = remaining_ttl;
  internalpb::LeaseRecord rec;
  rec.set_id(id);
  rec.set_ttl(it->second.ttl);
  rec.set_remaining_ttl(remaining_ttl);
  batch.Put(storage::Column::kLeases, RecordKey(id), rec.SerializeAsString());
}

void LeaseTable::StageAttach(storage::Batch& batch, int64_t id, std::string_view key) {
  std::string k = AttachmentPrefix(id);
  k.append(key);
  batch.Put(storage::Column::kLeases, k, "");
}

void LeaseTable::StageDetach(storage::Batch& batch, int64_t id, std::string_view key) {
  std::string k = AttachmentPrefix(id);
  k.append(key);
  batch.Delete(storage::Column::kLeases, k);
}

}  // namespace etcdw::mvcc
