#include "etcdw/mvcc/history.h"

#include "etcdw/mvcc/revision.h"
#include "etcdw/storage/versioned_key.h"

namespace etcdw::mvcc {

using storage::Column;

Result<HistoryResult> ReadHistory(const KvStore& store, int64_t from, int64_t to,
                                  size_t max_events) {
  HistoryResult out;
  out.next_rev = from;
  const storage::Engine& engine = store.engine();
  auto snap = engine.GetSnapshot();
  // Loaded after the snapshot: any compaction deletions the snapshot holds are covered.
  out.compact_rev = store.CompactRev();
  if (from < out.compact_rev) {
    out.compacted = true;
    return out;
  }
  if (from > to) return out;

  storage::ReadOptions ro;
  ro.snapshot = snap.get();
  ro.upper_bound = RevisionLowerBound(to + 1);
  auto rit = engine.NewIterator(Column::kRevisions, ro);
  storage::ReadOptions ko;
  ko.snapshot = snap.get();
  auto kit = engine.NewIterator(Column::kKeys, ko);

  size_t events = 0;
  for (rit->Seek(RevisionLowerBound(from)); rit->Valid(); rit->Next()) {
    std::string_view val = rit->value();
    if (rit->key().size() != 16 || val.empty()) return DataLoss("revision log entry is corrupt");
    Revision r = DecodeRevisionKey(rit->key());
    std::string_view key = val.substr(1);
    bool is_delete = static_cast<ChangeKind>(val[0]) == ChangeKind::kDelete;
    // At the compaction revision (from >= compact_rev, so no lower) the compactor removes
    // deletions and every older version, possibly while we read: answer as if it had finished,
    // so that the result does not depend on its progress.
    const bool at_compaction = r.main <= out.compact_rev;
    if (is_delete && at_compaction) continue;
    if (out.revisions.empty() || out.revisions.back().rev != r.main) {
      if (events >= max_events) break;  // stop at a revision boundary
      out.revisions.push_back(RevisionEvents{r.main, {}});
    }
    const std::string vkey = storage::MakeVersionedKey(key, static_cast<uint64_t>(r.main));
    kit->Seek(vkey);
    if (!kit->Valid() || kit->key() != vkey) {
      ETCDW_RETURN_IF_ERROR(kit->status());
      return DataLoss("revision " + std::to_string(r.main) + " refers to a missing key version");
    }
    mvccpb::Event& ev = out.revisions.back().events.emplace_back();
    if (is_delete) {
      ev.set_type(mvccpb::Event::DELETE);
      ev.mutable_kv()->set_key(key.data(), key.size());
      ev.mutable_kv()->set_mod_revision(r.main);
    } else {
      ev.set_type(mvccpb::Event::PUT);
      std::string_view v = kit->value();
      if (!ev.mutable_kv()->ParseFromArray(v.data(), static_cast<int>(v.size()))) {
        return DataLoss("stored version at revision " + std::to_string(r.main) + " is corrupt");
      }
    }
    // The previous version, if it exists and is not a deletion.
    kit->Next();
    // (None for a change at the compaction revision: older versions are compacted away.)
    if (!at_compaction && kit->Valid() && storage::UserKeyOf(kit->key()) == key &&
        !kit->value().empty()) {
      std::string_view v = kit->value();
      if (!ev.mutable_prev_kv()->ParseFromArray(v.data(), static_cast<int>(v.size()))) {
        return DataLoss("stored version of a key is corrupt");
      }
    }
    ++events;
  }
  ETCDW_RETURN_IF_ERROR(rit->status());
  ETCDW_RETURN_IF_ERROR(kit->status());
  if (rit->Valid()) {
    // Stopped by max_events: complete up to the last revision read (if any).
    out.next_rev = out.revisions.empty() ? from : out.revisions.back().rev + 1;
  } else {
    out.next_rev = to + 1;  // the loop ended: everything up to `to` was read
  }
  return out;
}

}  // namespace etcdw::mvcc
