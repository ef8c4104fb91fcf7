#include "etcdw/member/alarm_store.h"

#include "etcdw/storage/meta_records.h"

namespace etcdw::member {

namespace {
namespace meta = storage::meta;
}

std::string AlarmStore::Key(uint64_t member, int type) {
  std::string id;
  storage::PutFixed64BE(id, member);
  id.push_back(static_cast<char>(type));
  return meta::KeyIn(meta::kAlarms, id);
}

Status AlarmStore::Load(const storage::Engine& engine) {
  std::lock_guard lock(mu_);
  alarms_.clear();
  storage::ReadOptions ro;
  ro.lower_bound = std::string(meta::kAlarms.key);
  ro.upper_bound = meta::FamilyEnd(meta::kAlarms);
  auto it = engine.NewIterator(storage::Column::kMeta, ro);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    std::string_view k = it->key();
    k.remove_prefix(meta::kAlarms.key.size());
    if (k.size() != 9) return DataLoss("alarm record is corrupt");
    uint64_t member = storage::DecodeFixed64BE(k.data());
    alarms_.insert({member, static_cast<uint8_t>(k.back())});
  }
  return it->status();
}

std::vector<etcdserverpb::AlarmMember> AlarmStore::Get(etcdserverpb::AlarmType type) const {
  std::lock_guard lock(mu_);
  std::vector<etcdserverpb::AlarmMember> out;
  for (const auto& [member, t] : alarms_) {
    if (type != etcdserverpb::NONE && t != type) continue;
    etcdserverpb::AlarmMember m;
    m.set_memberid(member);
    m.set_alarm(static_cast<etcdserverpb::AlarmType>(t));
    out.push_back(m);
  }
  return out;
}

bool AlarmStore::Active(etcdserverpb::AlarmType type) const {
  std::lock_guard lock(mu_);
  for (const auto& a : alarms_) {
    if (a.second == type) return true;
  }
  return false;
}

etcdserverpb::AlarmMember AlarmStore::Activate(storage::Batch& batch, uint64_t member,
                                               etcdserverpb::AlarmType type) {
  std::lock_guard lock(mu_);
  if (alarms_.insert({member, type}).second) {
    batch.Put(storage::Column::kMeta, Key(member, type), "");
  }
  etcdserverpb::AlarmMember m;
  m.set_memberid(member);
  m.set_alarm(type);
  return m;
}

std::optional<etcdserverpb::AlarmMember> AlarmStore::Deactivate(storage::Batch& batch,
                                                                uint64_t member,
                                                                etcdserverpb::AlarmType type) {
  std::lock_guard lock(mu_);
  if (alarms_.erase({member, type}) == 0) return std::nullopt;
  batch.Delete(storage::Column::kMeta, Key(member, type));
  etcdserverpb::AlarmMember m;
  m.set_memberid(member);
  m.set_alarm(type);
  return m;
}

}  // namespace etcdw::member
