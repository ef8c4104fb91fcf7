#include "etcdw/mvcc/import.h"

#include <algorithm>
#include <string>

#include "etcd/mvccpb/kv.pb.h"
#include "etcdw/storage/meta_records.h"
#include "etcdw/storage/versioned_key.h"

namespace etcdw::mvcc {

using storage::Column;

namespace {

// A write batch is written once it holds this many bytes.
constexpr size_t kBatchBytes = size_t{4} << 20;

std::string RevisionText(Revision rev) {
  return std::to_string(rev.main) + "." + std::to_string(rev.sub);
}

}  // namespace

StateImporter::StateImporter(storage::Engine& engine, ImportedCompaction compaction)
    : engine_(engine), compaction_(compaction), batch_(std::make_unique<storage::Batch>(engine)) {
  if (compaction_.finished < 1) compaction_.finished = -1;
  if (compaction_.scheduled < 1) compaction_.scheduled = -1;
  compaction_.scheduled = std::max(compaction_.scheduled, compaction_.finished);
}

StateImporter::~StateImporter() = default;

Status StateImporter::FlushIfFull() {
  if (batch_->DataSize() < kBatchBytes) return Status::Ok();
  ETCDW_RETURN_IF_ERROR(engine_.WriteUnlogged(*batch_));
  batch_->Clear();
  return Status::Ok();
}

Status StateImporter::AddVersion(Revision rev, bool tombstone, std::string_view kv_bytes) {
  if (rev.main < 1 || rev.sub < 0) {
    return DataLoss("change at revision " + RevisionText(rev) + ": not a valid revision");
  }
  mvccpb::KeyValue kv;
  if (!kv.ParseFromArray(kv_bytes.data(), static_cast<int>(kv_bytes.size()))) {
    return DataLoss("change at revision " + RevisionText(rev) + ": not a mvccpb.KeyValue");
  }
  if (kv.key().empty()) {
    return DataLoss("change at revision " + RevisionText(rev) + ": the KeyValue has no key");
  }
  if (!tombstone && (kv.mod_revision() != rev.main || kv.create_revision() < 1 ||
                     kv.create_revision() > rev.main || kv.version() < 1)) {
    return DataLoss("change at revision " + RevisionText(rev) +
                    ": the KeyValue's revisions (create " + std::to_string(kv.create_revision()) +
                    ", mod " + std::to_string(kv.mod_revision()) + ", version " +
                    std::to_string(kv.version()) + ") do not fit it");
  }
  const std::string& key = kv.key();
  batch_->Put(Column::kKeys, storage::MakeVersionedKey(key, static_cast<uint64_t>(rev.main)),
              tombstone ? std::string_view() : kv_bytes);
  // Below the finished compaction our compactor keeps versions without their records.
  if (compaction_.finished < 1 || rev.main >= compaction_.finished) {
    std::string change(1, static_cast<char>(tombstone ? ChangeKind::kDelete : ChangeKind::kPut));
    change.append(key);
    batch_->Put(Column::kRevisions, EncodeRevisionKey(rev), change);
  }
  max_main_ = std::max(max_main_, rev.main);
  if (tombstone) {
    ++stats_.deletions;
  } else {
    ++stats_.puts;
    stats_.value_bytes += kv_bytes.size();
    if (kv.lease() != 0) ++leased_puts_;
  }
  return FlushIfFull();
}

Status StateImporter::AddLease(const LeaseInfo& lease) {
  if (lease.id == 0) return InvalidArgument("lease with ID 0");
  if (lease.ttl < 0 || lease.ttl > kMaxLeaseTtl || lease.remaining_ttl < 0 ||
      lease.remaining_ttl > kMaxLeaseTtl) {
    return InvalidArgument("lease " + std::to_string(lease.id) + ": TTL " +
                           std::to_string(lease.ttl) + " (remaining " +
                           std::to_string(lease.remaining_ttl) + ") out of range");
  }
  LeaseTable staging;  // only for its record format; the store loads its own at Open
  staging.StageGrant(*batch_, lease);
  lease_ids_.insert(lease.id);
  ++stats_.leases;
  return FlushIfFull();
}

// One pass over the Keys column in key order, where each key's newest version comes first.
Status StateImporter::AttachLeases() {
  storage::ReadOptions ro;
  ro.fill_cache = false;
  auto it = engine_.NewIterator(Column::kKeys, ro);
  std::string current;
  bool first = true;
  mvccpb::KeyValue kv;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view key = storage::UserKeyOf(it->key());
    if (!first && key == current) continue;  // an older version
    first = false;
    current.assign(key);
    const std::string_view value = it->value();
    if (value.empty()) continue;  // deleted
    if (!kv.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      return DataLoss("imported version at revision " +
                      std::to_string(storage::VersionOf(it->key())) + " does not parse");
    }
    if (kv.lease() == 0) continue;
    if (lease_ids_.count(kv.lease()) == 0) {
      return DataLoss("key \"" + current + "\" (revision " + std::to_string(kv.mod_revision()) +
                      ") is attached to lease " + std::to_string(kv.lease()) +
                      ", which the imported state does not hold");
    }
    LeaseTable::StageAttach(*batch_, kv.lease(), key);
    ETCDW_RETURN_IF_ERROR(FlushIfFull());
  }
  return it->status();
}

Result<int64_t> StateImporter::Finish() {
  if (finished_) return FailedPrecondition("the import is finished already");
  finished_ = true;
  ETCDW_RETURN_IF_ERROR(engine_.WriteUnlogged(*batch_));
  batch_->Clear();
  if (leased_puts_ > 0) ETCDW_RETURN_IF_ERROR(AttachLeases());
  const int64_t rev = std::max({max_main_, compaction_.scheduled, int64_t{1}});
  batch_->Put(Column::kMeta, storage::meta::kCurrentRev.key,
              storage::EncodeFixed64BE(static_cast<uint64_t>(rev)));
  if (compaction_.scheduled >= 1) {
    batch_->Put(Column::kMeta, storage::meta::kScheduledCompactRev.key,
                storage::EncodeFixed64BE(static_cast<uint64_t>(compaction_.scheduled)));
  }
  if (compaction_.finished >= 1) {
    batch_->Put(Column::kMeta, storage::meta::kFinishedCompactRev.key,
                storage::EncodeFixed64BE(static_cast<uint64_t>(compaction_.finished)));
  }
  ETCDW_RETURN_IF_ERROR(engine_.WriteUnlogged(*batch_));
  batch_->Clear();
  // Every write above skipped the write-ahead log: the flush is what makes them durable.
  ETCDW_RETURN_IF_ERROR(engine_.Flush());
  return rev;
}

}  // namespace etcdw::mvcc
