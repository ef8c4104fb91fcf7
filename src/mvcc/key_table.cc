#include "etcdw/mvcc/key_table.h"

#include <iterator>

namespace etcdw::mvcc {

namespace {

absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

void KeyTable::Set(std::string_view key, const KeyMeta& meta) {
  auto [it, inserted] = by_key_.try_emplace(Absl(key), meta);
  if (inserted) {
    in_order_.insert(&*it);
  } else {
    it->second = meta;
  }
}

void KeyTable::Erase(std::string_view key) {
  auto it = by_key_.find(Absl(key));
  if (it == by_key_.end()) return;
  in_order_.erase(&*it);
  by_key_.erase(it);
}

bool KeyTable::Append(std::string key, const KeyMeta& meta) {
  if (!in_order_.empty() && (*std::prev(in_order_.end()))->first >= key) return false;
  auto [it, inserted] = by_key_.try_emplace(std::move(key), meta);
  if (!inserted) return false;  // cannot happen: the key is above every key held
  in_order_.insert(in_order_.end(), &*it);
  return true;
}

int64_t KeyTable::CountFrom(std::string_view from) const {
  return std::distance(in_order_.lower_bound(from), in_order_.end());
}

int64_t KeyTable::CountRange(std::string_view from, std::string_view to) const {
  if (from >= to) return 0;
  return std::distance(in_order_.lower_bound(from), in_order_.lower_bound(to));
}

bool KeyTable::operator==(const KeyTable& other) const {
  if (size() != other.size()) return false;
  for (const auto& [key, meta] : by_key_) {
    const KeyMeta* m = other.Find(key);
    if (m == nullptr || !(*m == meta)) return false;
  }
  return true;
}

}  // namespace etcdw::mvcc
