// The key index: every live key with what its newest version says about it, in memory, in key
// order. It answers the two questions the store's hot paths would otherwise ask RocksDB with an
// iterator: "what does a put replace?" (create revision, version, lease and where the previous
// value is) and "how many keys does this range hold?" (etcd's `count`, which a range with a limit
// must report without reading every key). etcd keeps the same in its treeIndex, with every
// revision of every key; this one keeps only the newest, so it answers counts at the current
// revision and the store walks versions for older ones.
//
// The keys are held in a KeyTable (key_table.h): found by hash, counted in key order.
//
// Concurrency: the apply thread is the only writer (Apply) and reads without a lock (Find);
// readers on other threads take the index's reader lock (Count).
#pragma once

#include <absl/container/flat_hash_map.h>
#include <absl/synchronization/mutex.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "etcd/mvccpb/kv.pb.h"
#include "etcdw/common/status.h"
#include "etcdw/mvcc/key_range.h"
#include "etcdw/mvcc/key_table.h"

namespace etcdw::storage {
class Batch;
class Engine;
}  // namespace etcdw::storage

namespace etcdw::mvcc {

// Changes of one apply batch, by key: the new newest version, or nullopt for a deletion. Looked
// up by string_view (no copy of the key per lookup).
using KeyChanges = absl::flat_hash_map<std::string, std::optional<KeyMeta>>;

class KeyIndex {
 public:
  // Rebuilds the index from the Keys column, which holds the store's state at `rev`.
  Status Load(const storage::Engine& engine, int64_t rev);

  // Apply thread only: the key's newest version, or nullptr when it does not exist.
  const KeyMeta* Find(std::string_view key) const;
  // Apply thread only: applies a committed batch's changes; the index is then at `rev`.
  void Apply(const KeyChanges& changes, int64_t rev);

  // Any thread: the number of live keys in `range` at `rev`, if the index is at `rev` (it may
  // have moved on, or not caught up yet, when the caller's view was taken).
  std::optional<int64_t> Count(const KeyRange& range, int64_t rev) const;

  // Any thread: the revision of the newest version of `key` at `rev` (0: no live key), if the
  // index is at `rev`.
  std::optional<int64_t> NewestRevision(std::string_view key, int64_t rev) const;

  // --- The copy saved across a clean stop (key_index_saved.cc) ---
  // Rebuilding the index reads the newest version of every key, values included: about a
  // second per GiB of values. A member that stops cleanly saves the index in its store instead
  // (Meta column, under "local/key-index/", which snapshots and restores leave out), and the next
  // open loads it when it was saved at the store's current revision. Every change of a key
  // moves the revision, so a copy at the current revision describes the keys exactly; KvStore
  // deletes the copy with its first write after an open, so it never outlives that revision.

  // Apply thread only (or no thread applying): stages in `batch` a copy of the index at its
  // current revision, replacing any saved before.
  void StageSave(storage::Batch& batch) const;
  enum class Saved { kNone, kOtherRevision, kLoaded };
  // Replaces the index with the saved copy if the store holds one saved at `rev` (kLoaded);
  // otherwise leaves it unchanged. DataLoss, with the index unchanged, when the copy is damaged
  // (the caller rebuilds from the Keys column).
  Result<Saved> LoadSaved(const storage::Engine& engine, int64_t rev);
  // Stages in `batch` the deletion of every saved record (`engine` lists them).
  static Status StageDeleteSaved(const storage::Engine& engine, storage::Batch& batch);

  // Any thread: the number of live keys.
  size_t size() const {
    absl::ReaderMutexLock lock(&mu_);
    return keys_.size();
  }
  // Apply thread only (tests): whether both hold the same keys with the same metadata.
  bool SameKeysAs(const KeyIndex& other) const;

 private:
  // The apply thread changes keys_ and rev_ under mu_ and reads them without it (Find); other
  // threads read them under mu_.
  mutable absl::Mutex mu_;
  KeyTable keys_;
  int64_t rev_ = 0;
};

// Reads the stored version of `key` at `rev` (a Keys column record) through `get`, which
// returns the record's bytes; DataLoss when the index names a version that is missing or corrupt.
Result<std::optional<mvccpb::KeyValue>> ReadIndexedVersion(
    std::string_view key, int64_t rev,
    const std::function<Result<std::optional<std::string>>(const std::string&)>& get);

// Decodes the fields of a stored mvccpb.KeyValue that KeyMeta holds (the value is skipped, not
// copied); mod_rev is taken from the record. False when the bytes are not a KeyValue.
bool DecodeKeyMeta(std::string_view stored, KeyMeta& meta);

}  // namespace etcdw::mvcc
