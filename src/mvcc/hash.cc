#include "etcdw/mvcc/hash.h"

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/hash.h"
#include "etcdw/storage/versioned_key.h"

namespace etcdw::mvcc {

Result<HashKVResult> HashKV(const KvStore& store, int64_t rev) {
  auto view = store.NewReadView();
  HashKVResult out;
  out.rev = view->Rev();
  out.compact_rev = view->CompactRev();
  if (rev > 0 && rev <= out.compact_rev) return errors::Compacted();
  if (rev > out.rev) return errors::FutureRev();
  if (rev <= 0) rev = out.rev;

  const uint64_t upper = static_cast<uint64_t>(rev);
  const int64_t compact = out.compact_rev;
  uint32_t crc = common::Crc32c(0, "keys");
  auto it = view->NewKeysIterator({});
  std::string current;
  bool kept_compacted = false;  // the newest version <= compact of `current` was handled
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    std::string_view k = it->key();
    std::string_view uk = storage::UserKeyOf(k);
    if (uk != current) {
      current.assign(uk);
      kept_compacted = false;
    }
    uint64_t v = storage::VersionOf(k);
    if (v > upper) continue;
    if (compact >= 0 && static_cast<int64_t>(v) <= compact) {
      // At or below the compaction point only the newest live version survives.
      if (kept_compacted) continue;
      kept_compacted = true;
      if (it->value().empty()) continue;
    }
    crc = common::Crc32c(crc, k);
    crc = common::Crc32c(crc, it->value());
  }
  ETCDW_RETURN_IF_ERROR(it->status());
  out.hash = crc;
  return out;
}

Result<uint32_t> HashAll(const storage::Engine& engine) {
  uint32_t crc = 0;
  auto snap = engine.GetSnapshot();
  for (auto c : {storage::Column::kKeys, storage::Column::kRevisions, storage::Column::kLeases}) {
    storage::ReadOptions ro;
    ro.snapshot = snap.get();
    auto it = engine.NewIterator(c, ro);
    crc = common::Crc32c(crc, storage::ColumnName(c));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      crc = common::Crc32c(crc, it->key());
      crc = common::Crc32c(crc, it->value());
    }
    ETCDW_RETURN_IF_ERROR(it->status());
  }
  return crc;
}

}  // namespace etcdw::mvcc
