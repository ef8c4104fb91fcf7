#include "etcdw/mvcc/kv_store.h"

#include <absl/strings/string_view.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <chrono>
#include <mutex>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/logging.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/mvcc/txn.h"
#include "etcdw/storage/meta_records.h"
#include "etcdw/storage/versioned_key.h"

namespace etcdw::mvcc {

using storage::Column;
using storage::MakeVersionedKey;
using storage::UserKeyOf;
using storage::VersionOf;

namespace {

// A read view over a storage snapshot.
class SnapshotView final : public ReadView {
 public:
  SnapshotView(const storage::Engine& engine, std::unique_ptr<storage::Snapshot> snap, int64_t rev,
               int64_t compact_rev, const LeaseTable& leases, const KeyIndex& index)
      : engine_(engine),
        snap_(std::move(snap)),
        rev_(rev),
        compact_rev_(compact_rev),
        leases_(leases),
        index_(index) {}
  int64_t Rev() const override { return rev_; }
  int64_t CompactRev() const override { return compact_rev_; }
  std::unique_ptr<storage::Iterator> NewKeysIterator(
      const storage::ReadOptions& opts) const override {
    storage::ReadOptions o = opts;
    o.snapshot = snap_.get();
    return engine_.NewIterator(Column::kKeys, o);
  }
  const LeaseTable& leases() const override { return leases_; }
  std::optional<int64_t> CountLive(const KeyRange& range) const override {
    return index_.Count(range, rev_);
  }
  std::optional<Result<std::optional<mvccpb::KeyValue>>> FindNewest(
      std::string_view key) const override {
    std::optional<int64_t> newest = index_.NewestRevision(key, rev_);
    if (!newest) return std::nullopt;
    if (*newest == 0) return Result<std::optional<mvccpb::KeyValue>>(std::nullopt);
    return ReadIndexedVersion(key, *newest, [&](const std::string& vkey) {
      return engine_.Get(Column::kKeys, vkey, snap_.get());
    });
  }

 private:
  const storage::Engine& engine_;
  std::unique_ptr<storage::Snapshot> snap_;
  int64_t rev_;
  int64_t compact_rev_;
  const LeaseTable& leases_;
  const KeyIndex& index_;
};

Result<int64_t> ReadInt(const storage::Engine& e, std::string_view key, int64_t def) {
  ETCDW_ASSIGN_OR_RETURN(auto v, e.Get(Column::kMeta, key));
  if (!v) return def;
  if (v->size() != 8) return DataLoss("store record " + std::string(key) + " is corrupt");
  return static_cast<int64_t>(storage::DecodeFixed64BE(v->data()));
}

// Parses a stored KeyValue for a keys-only range: every field but the value, which is skipped
// without being copied (a value may be 1.5 MiB; a keys-only range of a prefix reads many).
bool ParseWithoutValue(std::string_view bytes, mvccpb::KeyValue* kv) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (const uint32_t tag = in.ReadTag()) {
    const auto type = WireFormatLite::GetTagWireType(tag);
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    uint64_t v = 0;
    if (field == mvccpb::KeyValue::kKeyFieldNumber &&
        type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::ReadBytes(&in, kv->mutable_key())) return false;
      continue;
    }
    if (field == mvccpb::KeyValue::kValueFieldNumber || type != WireFormatLite::WIRETYPE_VARINT) {
      if (!WireFormatLite::SkipField(&in, tag)) return false;
      continue;
    }
    if (!in.ReadVarint64(&v)) return false;
    const auto n = static_cast<int64_t>(v);
    switch (field) {
      case mvccpb::KeyValue::kCreateRevisionFieldNumber:
        kv->set_create_revision(n);
        break;
      case mvccpb::KeyValue::kModRevisionFieldNumber:
        kv->set_mod_revision(n);
        break;
      case mvccpb::KeyValue::kVersionFieldNumber:
        kv->set_version(n);
        break;
      case mvccpb::KeyValue::kLeaseFieldNumber:
        kv->set_lease(n);
        break;
      default:
        break;  // a field this version does not know
    }
  }
  return in.ConsumedEntireMessage();
}

// Number of Next() steps tried before seeking past the older versions of a key.
constexpr int kMaxNextBeforeSeek = 4;

}  // namespace

Result<RangeResult> RangeKeys(const ReadView& view, const KeyRange& range,
                              const RangeOptions& opts) {
  RangeResult res;
  const int64_t cur = view.Rev();
  res.rev = cur;
  int64_t rev = opts.rev;
  if (rev > cur) return errors::FutureRev();
  if (rev <= 0) rev = cur;
  if (rev < view.CompactRev()) return errors::Compacted();
  if (range.IsEmpty()) return res;
  if (range.kind == KeyRange::Kind::kSingle && rev == cur) {
    if (auto found = view.FindNewest(range.key)) {  // one point read instead of a seek
      ETCDW_ASSIGN_OR_RETURN(std::optional<mvccpb::KeyValue> kv, std::move(*found));
      if (!kv) return res;
      res.count = 1;
      if (opts.count_only) return res;
      if (opts.keys_only) kv->clear_value();
      res.kvs.push_back(std::move(*kv));
      return res;
    }
  }

  storage::ReadOptions ro;
  ro.lower_bound = MakeVersionedKey(range.key, UINT64_MAX);
  if (range.kind == KeyRange::Kind::kRange) {
    ro.upper_bound = MakeVersionedKey(range.end, UINT64_MAX);
  } else if (range.kind == KeyRange::Kind::kSingle) {
    ro.upper_bound = MakeVersionedKey(range.key, 0);  // after every version of the key
  }
  // Counted without reading the keys when the view can (ranges at its own revision): then only
  // the keys returned are read.
  const std::optional<int64_t> known = rev == cur ? view.CountLive(range) : std::nullopt;
  if (known) {
    res.count = *known;
    if (opts.count_only) return res;
  }
  auto it = view.NewKeysIterator(ro);
  const uint64_t at = static_cast<uint64_t>(rev);
  const bool collect = !opts.count_only;
  it->Seek(MakeVersionedKey(range.key, at));
  std::string user_key;
  while (it->Valid()) {
    std::string_view k = it->key();
    if (VersionOf(k) > at) {  // only versions newer than `rev` seen so far: jump to `rev`
      it->Seek(MakeVersionedKey(UserKeyOf(k), at));
      continue;
    }
    // The newest version of this key at or below `rev`.
    std::string_view val = it->value();
    if (!val.empty()) {
      if (known && opts.limit > 0 && static_cast<int64_t>(res.kvs.size()) >= opts.limit) break;
      if (!known) ++res.count;
      if (collect && (opts.limit <= 0 || static_cast<int64_t>(res.kvs.size()) < opts.limit)) {
        mvccpb::KeyValue& kv = res.kvs.emplace_back();
        if (opts.keys_only ? !ParseWithoutValue(val, &kv)
                           : !kv.ParseFromArray(val.data(), static_cast<int>(val.size()))) {
          return DataLoss("stored version of key is corrupt at revision " +
                          std::to_string(VersionOf(k)));
        }
      }
    }
    user_key.assign(UserKeyOf(k));
    it->Next();
    for (int steps = 0; it->Valid() && UserKeyOf(it->key()) == user_key; ++steps) {
      if (steps == kMaxNextBeforeSeek) {
        it->Seek(MakeVersionedKey(user_key, 0));
        break;
      }
      it->Next();
    }
  }
  ETCDW_RETURN_IF_ERROR(it->status());
  return res;
}

// ---------------------------------------------------------------------------------------------
// WriteTxn

int64_t WriteTxn::CompactRev() const { return compact_rev_; }

std::unique_ptr<storage::Iterator> WriteTxn::NewKeysIterator(
    const storage::ReadOptions& opts) const {
  return store_.engine_.NewIterator(batch_, Column::kKeys, opts);
}

const LeaseTable& WriteTxn::leases() const { return store_.leases_; }
LeaseTable& WriteTxn::mutable_leases() { return store_.leases_; }
const storage::Engine& WriteTxn::engine() const { return store_.engine_; }

std::optional<KeyMeta> WriteTxn::Find(std::string_view key) const {
  if (!key_changes_.empty()) {
    auto it = key_changes_.find(absl::string_view(key.data(), key.size()));
    if (it != key_changes_.end()) return it->second;
  }
  const KeyMeta* m = store_.index_.Find(key);
  return m ? std::optional<KeyMeta>(*m) : std::nullopt;
}

Result<std::optional<mvccpb::KeyValue>> WriteTxn::Get(std::string_view key) const {
  const std::optional<KeyMeta> meta = Find(key);
  if (!meta) return std::optional<mvccpb::KeyValue>();
  ETCDW_ASSIGN_OR_RETURN(mvccpb::KeyValue kv, Read(key, *meta));
  return std::optional<mvccpb::KeyValue>(std::move(kv));
}

Result<mvccpb::KeyValue> WriteTxn::Read(std::string_view key, const KeyMeta& meta) const {
  ETCDW_ASSIGN_OR_RETURN(auto kv,
                         ReadIndexedVersion(key, meta.mod_rev, [&](const std::string& vkey) {
                           return store_.engine_.Get(batch_, Column::kKeys, vkey);
                         }));
  return std::move(*kv);
}

void WriteTxn::Put(std::string_view key, std::string_view value, int64_t lease,
                   const std::optional<KeyMeta>& prev, std::optional<mvccpb::KeyValue> prev_kv) {
  const int64_t rev = begin_rev_ + 1;
  mvccpb::KeyValue kv;
  kv.set_key(key.data(), key.size());
  kv.set_value(value.data(), value.size());
  kv.set_mod_revision(rev);
  kv.set_lease(lease);
  if (prev) {
    kv.set_create_revision(prev->create_rev);
    kv.set_version(prev->version + 1);
  } else {
    kv.set_create_revision(rev);
    kv.set_version(1);
  }
  batch_.Put(Column::kKeys, MakeVersionedKey(key, static_cast<uint64_t>(rev)),
             kv.SerializeAsString());
  key_changes_.insert_or_assign(std::string(key),
                                KeyMeta{kv.create_revision(), rev, kv.version(), lease});
  std::string change(1, static_cast<char>(ChangeKind::kPut));
  change.append(key);
  batch_.Put(Column::kRevisions, EncodeRevisionKey({rev, changes_}), change);

  const int64_t old_lease = prev ? prev->lease : 0;
  if (old_lease != lease) {
    if (old_lease != 0) LeaseTable::StageDetach(batch_, old_lease, key);
    if (lease != 0) LeaseTable::StageAttach(batch_, lease, key);
  }

  mvccpb::Event& ev = events_.emplace_back();
  ev.set_type(mvccpb::Event::PUT);
  *ev.mutable_kv() = std::move(kv);
  if (prev_kv) {
    *ev.mutable_prev_kv() = std::move(*prev_kv);
    prev_revs_.push_back(0);
  } else {
    prev_revs_.push_back(prev ? prev->mod_rev : 0);
  }
  ++changes_;
}

void WriteTxn::StageDelete(const mvccpb::KeyValue& kv) {
  const int64_t rev = begin_rev_ + 1;
  batch_.Put(Column::kKeys, MakeVersionedKey(kv.key(), static_cast<uint64_t>(rev)), "");
  key_changes_.insert_or_assign(kv.key(), std::nullopt);
  std::string change(1, static_cast<char>(ChangeKind::kDelete));
  change.append(kv.key());
  batch_.Put(Column::kRevisions, EncodeRevisionKey({rev, changes_}), change);
  if (kv.lease() != 0) LeaseTable::StageDetach(batch_, kv.lease(), kv.key());

  mvccpb::Event& ev = events_.emplace_back();
  ev.set_type(mvccpb::Event::DELETE);
  ev.mutable_kv()->set_key(kv.key());
  ev.mutable_kv()->set_mod_revision(rev);
  *ev.mutable_prev_kv() = kv;
  prev_revs_.push_back(0);
  ++changes_;
}

Result<int64_t> WriteTxn::DeleteRange(const KeyRange& range,
                                      std::vector<mvccpb::KeyValue>* deleted) {
  ETCDW_ASSIGN_OR_RETURN(RangeResult r, RangeKeys(*this, range, {}));
  for (const auto& kv : r.kvs) StageDelete(kv);
  int64_t n = static_cast<int64_t>(r.kvs.size());
  if (deleted) *deleted = std::move(r.kvs);
  return n;
}

// ---------------------------------------------------------------------------------------------
// ApplyBatch

ApplyBatch::ApplyBatch(KvStore& store)
    : store_(store),
      batch_(store.engine_),
      pending_rev_(store.Rev()),
      pending_compact_rev_(store.CompactRev()) {}

std::unique_ptr<WriteTxn> ApplyBatch::Begin() {
  return std::unique_ptr<WriteTxn>(
      new WriteTxn(store_, batch_, key_changes_, pending_rev_, pending_compact_rev_));
}

void ApplyBatch::End(std::unique_ptr<WriteTxn> txn) {
  if (!txn->changed()) return;
  ++pending_rev_;
  changes_.push_back(
      RevisionEvents{pending_rev_, std::move(txn->events_), std::move(txn->prev_revs_)});
}

// ---------------------------------------------------------------------------------------------
// KvStore

Result<std::unique_ptr<KvStore>> KvStore::Open(storage::Engine& engine) {
  return Open(engine, OpenOptions{});
}

Result<std::unique_ptr<KvStore>> KvStore::Open(storage::Engine& engine, OpenOptions opts) {
  std::unique_ptr<KvStore> s(new KvStore(engine));
  ETCDW_RETURN_IF_ERROR(s->Load(opts.use_saved_index));
  return s;
}

Result<StoreMeta> ReadStoreMeta(const storage::Engine& engine) {
  StoreMeta m;
  ETCDW_ASSIGN_OR_RETURN(m.rev, ReadInt(engine, storage::meta::kCurrentRev.key, 1));
  ETCDW_ASSIGN_OR_RETURN(int64_t ci, ReadInt(engine, storage::meta::kConsistentIndex.key, 0));
  ETCDW_ASSIGN_OR_RETURN(m.scheduled_compact_rev,
                         ReadInt(engine, storage::meta::kScheduledCompactRev.key, -1));
  ETCDW_ASSIGN_OR_RETURN(m.finished_compact_rev,
                         ReadInt(engine, storage::meta::kFinishedCompactRev.key, -1));
  m.consistent_index = static_cast<uint64_t>(ci);
  if (m.rev < 1) {
    return DataLoss("store current revision " + std::to_string(m.rev) + " is invalid");
  }
  if (m.scheduled_compact_rev > m.rev || m.finished_compact_rev > m.scheduled_compact_rev) {
    return DataLoss("store compaction records are inconsistent (current " + std::to_string(m.rev) +
                    ", scheduled " + std::to_string(m.scheduled_compact_rev) + ", finished " +
                    std::to_string(m.finished_compact_rev) + ")");
  }
  return m;
}

Status KvStore::Load(bool use_saved_index) {
  ETCDW_ASSIGN_OR_RETURN(StoreMeta m, ReadStoreMeta(engine_));
  rev_ = m.rev;
  consistent_index_ = m.consistent_index;
  scheduled_compact_rev_ = m.scheduled_compact_rev;
  finished_compact_rev_ = m.finished_compact_rev;
  // A scheduled compaction was acknowledged: readers must treat it as done even if the
  // physical deletion is still to be finished by the compactor.
  compact_rev_ = m.scheduled_compact_rev;
  ETCDW_RETURN_IF_ERROR(LoadKeyIndex(m.rev, use_saved_index));
  return leases_.Load(engine_);
}

Status KvStore::LoadKeyIndex(int64_t rev, bool use_saved_index) {
  loaded_saved_index_ = false;
  holds_saved_index_ = true;  // unless the store is seen to hold none
  if (use_saved_index) {
    Result<KeyIndex::Saved> saved = index_.LoadSaved(engine_, rev);
    if (!saved.ok()) {
      log::Warn("rebuilding the key index", {log::F("error", saved.status())});
    } else if (*saved == KeyIndex::Saved::kNone) {
      holds_saved_index_ = false;
    } else if (*saved == KeyIndex::Saved::kLoaded) {
      loaded_saved_index_ = true;
      return Status::Ok();
    }
  }
  return index_.Load(engine_, rev);
}

Status KvStore::SaveKeyIndex() {
  storage::Batch batch(engine_);
  ETCDW_RETURN_IF_ERROR(KeyIndex::StageDeleteSaved(engine_, batch));
  index_.StageSave(batch);
  ETCDW_RETURN_IF_ERROR(engine_.Write(batch, /*sync=*/true));
  holds_saved_index_ = true;
  return Status::Ok();
}

Result<mvccpb::KeyValue> KvStore::ReadVersion(std::string_view key, int64_t rev) const {
  ETCDW_ASSIGN_OR_RETURN(auto kv, ReadIndexedVersion(key, rev, [&](const std::string& vkey) {
                           return engine_.Get(Column::kKeys, vkey);
                         }));
  return std::move(*kv);
}

std::unique_ptr<ReadView> KvStore::NewReadView() const {
  std::shared_lock lock(view_mu_);
  int64_t rev = rev_.load(std::memory_order_acquire);
  auto snap = engine_.GetSnapshot();
  int64_t compact = compact_rev_.load(std::memory_order_acquire);
  return std::make_unique<SnapshotView>(engine_, std::move(snap), rev, compact, leases_, index_);
}

std::unique_ptr<ApplyBatch> KvStore::BeginApply() {
  return std::unique_ptr<ApplyBatch>(new ApplyBatch(*this));
}

Status KvStore::Compact(ApplyBatch& b, int64_t rev) {
  ETCDW_RETURN_IF_ERROR(CheckCompaction(rev, b.pending_compact_rev_, b.pending_rev_));
  b.pending_compact_rev_ = rev;
  b.compaction_ = rev;
  b.batch_.Put(Column::kMeta, storage::meta::kScheduledCompactRev.key,
               storage::EncodeFixed64BE(static_cast<uint64_t>(rev)));
  return Status::Ok();
}

Status KvStore::Commit(ApplyBatch& b, uint64_t consistent_index) {
  b.batch_.Put(Column::kMeta, storage::meta::kCurrentRev.key,
               storage::EncodeFixed64BE(static_cast<uint64_t>(b.pending_rev_)));
  b.batch_.Put(Column::kMeta, storage::meta::kConsistentIndex.key,
               storage::EncodeFixed64BE(consistent_index));
  // A saved key index describes the keys at the revision it was saved at only: it goes with the
  // first write after it (atomically, so no crash leaves it beside later changes).
  if (holds_saved_index_) ETCDW_RETURN_IF_ERROR(KeyIndex::StageDeleteSaved(engine_, b.batch_));
  const auto start = std::chrono::steady_clock::now();
  ETCDW_RETURN_IF_ERROR(engine_.Write(b.batch_, /*sync=*/false));
  stats_.commit_seconds.Observe(common::SecondsSince(start));
  holds_saved_index_ = false;
  index_.Apply(b.key_changes_, b.pending_rev_);
  {
    // Publication is ordered against NewReadView: a view never pairs a revision with a
    // snapshot that lacks that revision's data, nor with a compaction revision above it.
    std::unique_lock lock(view_mu_);
    rev_.store(b.pending_rev_, std::memory_order_release);
    consistent_index_.store(consistent_index, std::memory_order_release);
    compact_rev_.store(b.pending_compact_rev_, std::memory_order_release);
  }
  if (b.compaction_) scheduled_compact_rev_.store(*b.compaction_);
  return Status::Ok();
}

Status KvStore::ReplaceState(const std::function<Status()>& replace) {
  std::unique_lock lock(view_mu_);
  ETCDW_RETURN_IF_ERROR(replace());
  // Rebuilt: a replaced state is rare, and its keys owe nothing to a copy saved before.
  return Load(/*use_saved_index=*/false);
}

Status KvStore::MarkCompactionFinished(int64_t rev) {
  storage::Batch batch(engine_);
  batch.Put(Column::kMeta, storage::meta::kFinishedCompactRev.key,
            storage::EncodeFixed64BE(static_cast<uint64_t>(rev)));
  ETCDW_RETURN_IF_ERROR(engine_.Write(batch, /*sync=*/false));
  finished_compact_rev_.store(rev);
  return Status::Ok();
}

}  // namespace etcdw::mvcc
