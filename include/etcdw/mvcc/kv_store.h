// The MVCC key-value store: every version of every key, addressed by revision, on the engine.
//
// Layout (docs/design.md "Storage layout"):
//   Keys column       <user key><be64 main revision>  -> mvccpb.KeyValue wire bytes, or ""
//                     for a deletion (tombstone); newest version first (VersionedKeyComparator)
//   Revisions column  <be64 main><be64 sub>           -> ChangeKind byte + user key
//   Meta column       mvcc/* records (current, compacted and scheduled-compaction revisions,
//                     the consistent index)
//
// Concurrency: one apply thread writes (through ApplyBatch); any number of threads read through
// ReadViews. A ReadView pins a storage snapshot that contains at least the state up to its
// revision: a commit writes the engine first and then publishes its revision under a
// reader/writer lock that view creation also takes, so a snapshot may hold versions of a batch
// not yet published, which reads at the view's revision skip.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/mvccpb/kv.pb.h"
#include "etcdw/common/metrics.h"
#include "etcdw/common/status.h"
#include "etcdw/mvcc/key_index.h"
#include "etcdw/mvcc/key_range.h"
#include "etcdw/mvcc/lease_table.h"
#include "etcdw/storage/engine.h"

namespace etcdw::mvcc {

struct RangeOptions {
  int64_t limit = 0;  // 0: no limit
  int64_t rev = 0;    // <= 0: the view's revision
  bool count_only = false;
  bool keys_only = false;
};

struct RangeResult {
  std::vector<mvccpb::KeyValue> kvs;  // key order, at most `limit`
  int64_t count = 0;                  // keys in the range at that revision
  int64_t rev = 0;                    // the view's revision (not the requested one)
};

// Something keys can be read from at a revision.
class ReadView {
 public:
  virtual ~ReadView() = default;
  // The revision reads default to, and the revision reported in response headers.
  virtual int64_t Rev() const = 0;
  // The store's compaction revision as seen by this view; -1 when never compacted.
  virtual int64_t CompactRev() const = 0;
  virtual std::unique_ptr<storage::Iterator> NewKeysIterator(
      const storage::ReadOptions& opts) const = 0;
  // Leases as seen by this view.
  virtual const LeaseTable& leases() const = 0;
  // The number of live keys in `range` at Rev() when the view knows it without reading them;
  // nullopt when the keys must be walked to count them.
  virtual std::optional<int64_t> CountLive(const KeyRange& /*range*/) const { return std::nullopt; }
  // The newest version of `key` at Rev() (nullopt inside: no live key), found with one point
  // read when the view knows which version that is; nullopt when the versions must be searched.
  virtual std::optional<Result<std::optional<mvccpb::KeyValue>>> FindNewest(
      std::string_view /*key*/) const {
    return std::nullopt;
  }
};

// Reads keys in `range` as of opts.rev with etcd's rules: a revision above the view's is
// "future", one below the compaction revision "compacted". When the view can count the range
// (CountLive), only the keys returned are read.
Result<RangeResult> RangeKeys(const ReadView& view, const KeyRange& range,
                              const RangeOptions& opts);

class KvStore;

// One write transaction: its changes share one main revision. Reads through it see the
// changes made so far in this transaction and in earlier transactions of the same batch.
class WriteTxn final : public ReadView {
 public:
  int64_t Rev() const override { return changes_ ? begin_rev_ + 1 : begin_rev_; }
  int64_t CompactRev() const override;
  std::unique_ptr<storage::Iterator> NewKeysIterator(
      const storage::ReadOptions& opts) const override;
  const LeaseTable& leases() const override;

  // What the key index says about the newest version of `key` as of this transaction (the
  // batch's changes over the index), without reading it; nullopt when the key does not exist.
  std::optional<KeyMeta> Find(std::string_view key) const;
  // The latest version of `key` as of this transaction, if the key exists: the key index says
  // which version, one point read fetches it.
  Result<std::optional<mvccpb::KeyValue>> Get(std::string_view key) const;
  // The stored version `meta` (from Find) describes.
  Result<mvccpb::KeyValue> Read(std::string_view key, const KeyMeta& meta) const;
  std::optional<Result<std::optional<mvccpb::KeyValue>>> FindNewest(
      std::string_view key) const override {
    return Get(key);
  }

  // Writes a new version of `key`. `prev` must be Find(key). `prev_kv` is the version it
  // describes when the caller has read it (the event carries it); when not, the value is not
  // read here: the event records the replaced version's revision instead (RevisionEvents).
  void Put(std::string_view key, std::string_view value, int64_t lease,
           const std::optional<KeyMeta>& prev, std::optional<mvccpb::KeyValue> prev_kv);
  // Deletes every key in `range`; returns how many existed. `deleted` receives their last
  // versions when not null.
  Result<int64_t> DeleteRange(const KeyRange& range, std::vector<mvccpb::KeyValue>* deleted);

  bool changed() const { return changes_ > 0; }
  int64_t begin_rev() const { return begin_rev_; }
  // Events of this transaction, in order (ApplyBatch::End moves them, with the revisions of
  // the versions puts replaced without reading them, into RevisionEvents).
  const std::vector<mvccpb::Event>& events() const { return events_; }
  storage::Batch& batch() { return batch_; }
  const storage::Engine& engine() const;
  LeaseTable& mutable_leases();

 private:
  friend class ApplyBatch;
  WriteTxn(KvStore& store, storage::Batch& batch, KeyChanges& key_changes, int64_t begin_rev,
           int64_t compact_rev)
      : store_(store),
        batch_(batch),
        key_changes_(key_changes),
        begin_rev_(begin_rev),
        compact_rev_(compact_rev) {}
  void StageDelete(const mvccpb::KeyValue& kv);

  KvStore& store_;
  storage::Batch& batch_;
  KeyChanges& key_changes_;  // the batch's, shared by its transactions
  int64_t begin_rev_;
  // The compaction revision including compactions staged earlier in the same batch, so that
  // requests answer the same whether or not the compaction was applied in their batch.
  int64_t compact_rev_;
  int64_t changes_ = 0;
  std::vector<mvccpb::Event> events_;
  std::vector<int64_t> prev_revs_;  // parallel to events_
};

// Revision-ordered changes produced by an ApplyBatch, for watchers.
//
// A put reads the version it replaces only when its request needs it (prev_kv, ignore_value):
// most puts know what they replace from the key index alone. Such an event has no prev_kv and
// prev_revs[i] holds the revision of the version it replaced; the watch hub reads it
// (KvStore::ReadVersion) when a watcher asks for it, as etcd reads prev_kv when it sends an event.
// prev_revs is empty, or holds 0, where prev_kv is complete (deletions, history read back from the
// store).
struct RevisionEvents {
  int64_t rev = 0;
  std::vector<mvccpb::Event> events;
  std::vector<int64_t> prev_revs;

  // The revision of the replaced version events[i] did not read; 0 when there is none.
  int64_t unread_prev_rev(size_t i) const { return i < prev_revs.size() ? prev_revs[i] : 0; }
};

// Changes of several log entries applied together and written with one engine write.
class ApplyBatch {
 public:
  // Starts a transaction at the batch's pending revision. Only one may be open at a time.
  std::unique_ptr<WriteTxn> Begin();
  // Ends it: if it changed anything the pending revision advances and its events are kept.
  void End(std::unique_ptr<WriteTxn> txn);

  int64_t pending_rev() const { return pending_rev_; }
  storage::Batch& batch() { return batch_; }
  std::vector<RevisionEvents>& changes() { return changes_; }
  // A compaction requested in this batch (applied to readers at commit).
  std::optional<int64_t> compaction() const { return compaction_; }

 private:
  friend class KvStore;
  explicit ApplyBatch(KvStore& store);
  KvStore& store_;
  storage::Batch batch_;
  KeyChanges key_changes_;  // applied to the key index at commit
  int64_t pending_rev_;
  int64_t pending_compact_rev_;
  std::optional<int64_t> compaction_;
  std::vector<RevisionEvents> changes_;
};

// The store's metadata records (column Meta), validated: what KvStore::Open loads before its
// leases and key index.
struct StoreMeta {
  int64_t rev = 1;
  uint64_t consistent_index = 0;
  int64_t scheduled_compact_rev = -1;
  int64_t finished_compact_rev = -1;
};
// Reads them without reading any key (a quick check of a data directory needs no more); DataLoss
// when a record is corrupt or they contradict each other.
Result<StoreMeta> ReadStoreMeta(const storage::Engine& engine);

// What the store's writes cost (etcd's etcd_disk_backend_commit_duration_seconds).
struct KvStoreStats {
  // Seconds per applied batch written to the engine (not synced: the Raft log is the durable
  // record). etcd's buckets: 1 ms doubling to 8.192 s.
  common::Histogram commit_seconds{common::ExponentialBuckets(0.001, 2, 14)};
};

class KvStore {
 public:
  struct OpenOptions {
    // Load the key index from the copy a clean stop saved (SaveKeyIndex) when it matches the
    // store's revision. Off, the index is always rebuilt: a full check of a data directory reads
    // every key's newest version that way.
    bool use_saved_index = true;
  };
  // Opens the store on an engine (which it does not own) and loads its metadata and key index
  // (the saved copy, or one pass over the newest version of every key).
  static Result<std::unique_ptr<KvStore>> Open(storage::Engine& engine);
  static Result<std::unique_ptr<KvStore>> Open(storage::Engine& engine, OpenOptions opts);

  // --- any thread ---
  int64_t Rev() const { return rev_.load(std::memory_order_acquire); }
  int64_t CompactRev() const { return compact_rev_.load(std::memory_order_acquire); }
  uint64_t ConsistentIndex() const { return consistent_index_.load(std::memory_order_acquire); }
  // A consistent view at the current revision.
  std::unique_ptr<ReadView> NewReadView() const;
  const LeaseTable& leases() const { return leases_; }
  storage::Engine& engine() const { return engine_; }
  const KvStoreStats& stats() const { return stats_; }
  const KeyIndex& key_index() const { return index_; }
  // The version of `key` written at `rev`, read from the engine's current state; DataLoss when
  // it is missing or corrupt. Compaction removes versions: one replaced at revision R is kept
  // while the compaction revision is below R.
  Result<mvccpb::KeyValue> ReadVersion(std::string_view key, int64_t rev) const;

  // Compaction bookkeeping persisted for the compactor.
  int64_t ScheduledCompactRev() const { return scheduled_compact_rev_.load(); }
  int64_t FinishedCompactRev() const { return finished_compact_rev_.load(); }

  // --- apply thread only ---
  std::unique_ptr<ApplyBatch> BeginApply();
  // Validates a compaction to `rev` against the batch's state and stages it.
  Status Compact(ApplyBatch& batch, int64_t rev);
  // Writes the batch together with the consistent index (no sync: the log entries are already
  // durable) and publishes the new revision, compaction revision and consistent index, and the
  // batch's key changes to the key index.
  Status Commit(ApplyBatch& batch, uint64_t consistent_index);

  // Runs `replace` (which rewrites the store's records, e.g. restoring a snapshot) with every
  // reader held off, then reloads the store's metadata, leases and key index from the engine.
  Status ReplaceState(const std::function<Status()>& replace);

  // With no apply running (a member stopping cleanly): saves the key index in the store (synced)
  // for the next open, which then need not rebuild it.
  Status SaveKeyIndex();
  // Whether the last load took the key index from a saved copy (diagnostics and tests).
  bool loaded_saved_index() const { return loaded_saved_index_; }

  // --- compactor thread ---
  // Records that compaction up to `rev` is physically complete.
  Status MarkCompactionFinished(int64_t rev);

 private:
  friend class WriteTxn;
  friend class ApplyBatch;
  explicit KvStore(storage::Engine& engine) : engine_(engine) {}
  Status Load(bool use_saved_index);
  Status LoadKeyIndex(int64_t rev, bool use_saved_index);

  storage::Engine& engine_;
  KvStoreStats stats_;
  LeaseTable leases_;
  KeyIndex index_;
  // Orders Commit's publication of a new revision against NewReadView (exclusive in Commit,
  // shared in NewReadView); the fields it orders are atomics.
  mutable std::shared_mutex view_mu_;
  std::atomic<int64_t> rev_{1};
  std::atomic<int64_t> compact_rev_{-1};
  std::atomic<uint64_t> consistent_index_{0};
  std::atomic<int64_t> scheduled_compact_rev_{-1};
  std::atomic<int64_t> finished_compact_rev_{-1};
  bool loaded_saved_index_ = false;  // set by Load
  // The store holds a saved copy of the key index: the next Commit deletes it with its changes.
  // The apply thread's (and Load's).
  bool holds_saved_index_ = false;
};

}  // namespace etcdw::mvcc
