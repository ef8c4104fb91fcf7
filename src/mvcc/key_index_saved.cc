// The key index's copy saved across a clean stop (see key_index.h).
//
// Records, in the Meta column (storage/meta_records.h: kKeyIndexHead, kKeyIndexChunks):
//   local/key-index/head              u8 format (1), then big-endian u64s: revision, number of
//                                     keys, number of chunks
//   local/key-index/chunk/<u64 BE n>  chunks 0..n-1, about kChunkBytes each: the keys in order,
//                                     each as varints (key length, create revision, revision,
//                                     version, lease) with the key's bytes after its length
// RocksDB checksums every block; the decoder also checks what the index relies on (keys in
// strictly increasing order, revisions within the saved one, the counts in the head).
#include <algorithm>

#include "etcdw/common/varint.h"
#include "etcdw/mvcc/key_index.h"
#include "etcdw/storage/engine.h"
#include "etcdw/storage/meta_records.h"

namespace etcdw::mvcc {

namespace {

namespace meta = storage::meta;

constexpr uint8_t kFormat = 1;
constexpr size_t kHeadBytes = 1 + 3 * 8;
constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr uint64_t kMaxReservedKeys = uint64_t{1} << 24;

std::string ChunkKey(uint64_t n) {
  return meta::KeyIn(meta::kKeyIndexChunks, storage::EncodeFixed64BE(n));
}

Status Damaged(const std::string& what) { return DataLoss("saved key index: " + what); }

// Decodes one chunk's entries onto the end of `keys`.
Status DecodeChunk(std::string_view in, int64_t rev, KeyTable& keys) {
  while (!in.empty()) {
    uint64_t len = 0;
    if (!common::ConsumeVarint(in, &len) || len > in.size()) return Damaged("a key is cut short");
    std::string key(in.substr(0, len));
    in.remove_prefix(len);
    uint64_t f[4];
    for (uint64_t& v : f) {
      if (!common::ConsumeVarint(in, &v)) return Damaged("a key's metadata is cut short");
    }
    KeyMeta m{static_cast<int64_t>(f[0]), static_cast<int64_t>(f[1]), static_cast<int64_t>(f[2]),
              static_cast<int64_t>(f[3])};
    if (m.create_rev < 1 || m.create_rev > m.mod_rev || m.mod_rev > rev || m.version < 1 ||
        m.lease < 0) {
      return Damaged("a key's revisions or version are out of range");
    }
    if (!keys.Append(std::move(key), m)) return Damaged("keys are out of order");
  }
  return Status::Ok();
}

}  // namespace

void KeyIndex::StageSave(storage::Batch& batch) const {
  absl::ReaderMutexLock lock(&mu_);
  uint64_t chunks = 0;
  std::string chunk;
  keys_.ForEachInOrder([&](const std::string& key, const KeyMeta& m) {
    common::AppendVarint(chunk, key.size());
    chunk.append(key);
    for (int64_t v : {m.create_rev, m.mod_rev, m.version, m.lease}) {
      common::AppendVarint(chunk, static_cast<uint64_t>(v));
    }
    if (chunk.size() >= kChunkBytes) {
      batch.Put(storage::Column::kMeta, ChunkKey(chunks++), chunk);
      chunk.clear();
    }
  });
  if (!chunk.empty()) batch.Put(storage::Column::kMeta, ChunkKey(chunks++), chunk);
  std::string head(1, static_cast<char>(kFormat));
  storage::PutFixed64BE(head, static_cast<uint64_t>(rev_));
  storage::PutFixed64BE(head, keys_.size());
  storage::PutFixed64BE(head, chunks);
  batch.Put(storage::Column::kMeta, meta::kKeyIndexHead.key, head);
}

Result<KeyIndex::Saved> KeyIndex::LoadSaved(const storage::Engine& engine, int64_t rev) {
  ETCDW_ASSIGN_OR_RETURN(auto head, engine.Get(storage::Column::kMeta, meta::kKeyIndexHead.key));
  if (!head) return Saved::kNone;
  if (head->size() != kHeadBytes || static_cast<uint8_t>((*head)[0]) != kFormat) {
    return Damaged("its head record is not of a known format");
  }
  const auto saved_rev = static_cast<int64_t>(storage::DecodeFixed64BE(head->data() + 1));
  const uint64_t want_keys = storage::DecodeFixed64BE(head->data() + 9);
  const uint64_t want_chunks = storage::DecodeFixed64BE(head->data() + 17);
  if (saved_rev != rev) return Saved::kOtherRevision;

  KeyTable keys;
  // The head's count, bounded: a damaged head must not make the reservation absurd (a count
  // that is wrong fails the load below).
  keys.Reserve(static_cast<size_t>(std::min<uint64_t>(want_keys, kMaxReservedKeys)));
  storage::ReadOptions ro;
  ro.fill_cache = false;
  ro.lower_bound = std::string(meta::kKeyIndexChunks.key);
  ro.upper_bound = meta::FamilyEnd(meta::kKeyIndexChunks);
  auto it = engine.NewIterator(storage::Column::kMeta, ro);
  uint64_t chunks = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (it->key() != ChunkKey(chunks))
      return Damaged("chunk " + std::to_string(chunks) + " is missing");
    ETCDW_RETURN_IF_ERROR(DecodeChunk(it->value(), rev, keys));
    ++chunks;
  }
  ETCDW_RETURN_IF_ERROR(it->status());
  if (chunks != want_chunks || keys.size() != want_keys) {
    return Damaged("it holds " + std::to_string(keys.size()) + " keys in " +
                   std::to_string(chunks) + " chunks where its head says " +
                   std::to_string(want_keys) + " in " + std::to_string(want_chunks));
  }
  absl::WriterMutexLock lock(&mu_);
  keys_ = std::move(keys);
  rev_ = rev;
  return Saved::kLoaded;
}

Status KeyIndex::StageDeleteSaved(const storage::Engine& engine, storage::Batch& batch) {
  batch.Delete(storage::Column::kMeta, meta::kKeyIndexHead.key);
  storage::ReadOptions ro;
  ro.lower_bound = std::string(meta::kKeyIndexChunks.key);
  ro.upper_bound = meta::FamilyEnd(meta::kKeyIndexChunks);
  auto it = engine.NewIterator(storage::Column::kMeta, ro);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    batch.Delete(storage::Column::kMeta, it->key());
  }
  return it->status();
}

bool KeyIndex::SameKeysAs(const KeyIndex& other) const { return keys_ == other.keys_; }

}  // namespace etcdw::mvcc
