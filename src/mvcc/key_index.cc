#include "etcdw/mvcc/key_index.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "etcdw/storage/engine.h"
#include "etcdw/storage/versioned_key.h"

namespace etcdw::mvcc {

namespace {

using google::protobuf::internal::WireFormatLite;

// Field numbers of mvccpb.KeyValue (proto/etcd/mvccpb/kv.proto).
constexpr int kCreateRevisionField = 2;
constexpr int kModRevisionField = 3;
constexpr int kVersionField = 4;
constexpr int kLeaseField = 6;

// Steps tried with Next() before seeking past the older versions of a key.
constexpr int kMaxNextBeforeSeek = 4;

}  // namespace

bool DecodeKeyMeta(std::string_view stored, KeyMeta& meta) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(stored.data()),
                                            static_cast<int>(stored.size()));
  while (uint32_t tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t v = 0;
      if (!in.ReadVarint64(&v)) return false;
      const auto s = static_cast<int64_t>(v);
      if (field == kCreateRevisionField) meta.create_rev = s;
      if (field == kModRevisionField) meta.mod_rev = s;
      if (field == kVersionField) meta.version = s;
      if (field == kLeaseField) meta.lease = s;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

Status KeyIndex::Load(const storage::Engine& engine, int64_t rev) {
  KeyTable keys;
  storage::ReadOptions ro;
  ro.fill_cache = false;  // one pass over everything: keep the cache for the working set
  auto it = engine.NewIterator(storage::Column::kKeys, ro);
  it->SeekToFirst();
  std::string user_key;
  while (it->Valid()) {
    // The first entry of a key is its newest version; a tombstone means it is not live.
    const std::string_view k = it->key();
    user_key.assign(storage::UserKeyOf(k));
    const std::string_view val = it->value();
    if (!val.empty()) {
      KeyMeta meta;
      if (!DecodeKeyMeta(val, meta)) {
        return DataLoss("stored version of key is corrupt at revision " +
                        std::to_string(storage::VersionOf(k)));
      }
      meta.mod_rev = static_cast<int64_t>(storage::VersionOf(k));
      if (!keys.Append(user_key, meta)) {
        return DataLoss("the keys column is not in key order at revision " +
                        std::to_string(meta.mod_rev));
      }
    }
    it->Next();
    for (int steps = 0; it->Valid() && storage::UserKeyOf(it->key()) == user_key; ++steps) {
      if (steps == kMaxNextBeforeSeek) {
        it->Seek(storage::MakeVersionedKey(user_key, 0));
        break;
      }
      it->Next();
    }
  }
  ETCDW_RETURN_IF_ERROR(it->status());
  absl::WriterMutexLock lock(&mu_);
  keys_ = std::move(keys);
  rev_ = rev;
  return Status::Ok();
}

const KeyMeta* KeyIndex::Find(std::string_view key) const { return keys_.Find(key); }

void KeyIndex::Apply(const KeyChanges& changes, int64_t rev) {
  absl::WriterMutexLock lock(&mu_);
  for (const auto& [key, meta] : changes) {
    if (meta) {
      keys_.Set(key, *meta);
    } else {
      keys_.Erase(key);
    }
  }
  rev_ = rev;
}

std::optional<int64_t> KeyIndex::NewestRevision(std::string_view key, int64_t rev) const {
  absl::ReaderMutexLock lock(&mu_);
  if (rev != rev_) return std::nullopt;
  const KeyMeta* meta = keys_.Find(key);
  return meta == nullptr ? 0 : meta->mod_rev;
}

Result<std::optional<mvccpb::KeyValue>> ReadIndexedVersion(
    std::string_view key, int64_t rev,
    const std::function<Result<std::optional<std::string>>(const std::string&)>& get) {
  ETCDW_ASSIGN_OR_RETURN(auto stored,
                         get(storage::MakeVersionedKey(key, static_cast<uint64_t>(rev))));
  std::optional<mvccpb::KeyValue> kv(std::in_place);
  if (!stored || stored->empty() ||
      !kv->ParseFromArray(stored->data(), static_cast<int>(stored->size()))) {
    return DataLoss("the version of a key at revision " + std::to_string(rev) +
                    " is missing or corrupt");
  }
  return kv;
}

std::optional<int64_t> KeyIndex::Count(const KeyRange& range, int64_t rev) const {
  absl::ReaderMutexLock lock(&mu_);
  if (rev != rev_) return std::nullopt;
  switch (range.kind) {
    case KeyRange::Kind::kSingle:
      return keys_.Find(range.key) ? 1 : 0;
    case KeyRange::Kind::kFromKey:
      return keys_.CountFrom(range.key);
    case KeyRange::Kind::kRange:
      if (range.IsEmpty()) return 0;
      return keys_.CountRange(range.key, range.end);
  }
  return std::nullopt;
}

}  // namespace etcdw::mvcc
