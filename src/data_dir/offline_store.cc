// OfflineStore (data_dir.h): the events of delta snapshots written straight into a stopped
// member's store, each revision as the one write transaction that produced it on the source.
//
// The writes go through mvcc's ApplyBatch/WriteTxn, exactly as the applier writes, so versions,
// revision records and lease attachments are what a member would have produced. The consistent
// index is committed unchanged: these writes come from no Raft entry of this member, and
// changing the index would make the member skip entries of its log at the next start (on a
// restored directory it is 0, and must stay 0 for the bootstrap entries to be applied).
#include <filesystem>
#include <set>

#include "etcdw/common/logging.h"
#include "etcdw/common/version.h"
#include "etcdw/data_dir/data_dir.h"
#include "etcdw/mvcc/compactor.h"
#include "etcdw/mvcc/key_range.h"
#include "etcdw/storage/raft_log.h"
#include "internal.h"

namespace etcdw::data_dir {

class OfflineStore::Impl {
 public:
  std::unique_ptr<storage::Engine> engine;
  std::unique_ptr<mvcc::KvStore> kv;  // destroyed before the engine it reads
  std::vector<std::string> orphaned;
  int64_t rev = 0;  // Rev() once closed
};

namespace {

Status Mismatch(int64_t expected, int64_t applied) {
  return FailedPrecondition("mismatched event revision while applying delta snapshot, expected " +
                            std::to_string(expected) + " but applied " + std::to_string(applied));
}

}  // namespace

Result<std::unique_ptr<OfflineStore>> OfflineStore::Open(const std::string& dir) {
  auto impl = std::make_unique<Impl>();
  ETCDW_ASSIGN_OR_RETURN(impl->engine, internal::OpenExistingStore(dir));
  ETCDW_ASSIGN_OR_RETURN(impl->kv, mvcc::KvStore::Open(*impl->engine));
  // Entries in the log above the applied index are requests the member applies at its next
  // start, on whatever state it then has: writing under them would make their results differ
  // from those of the members that applied them in order.
  storage::RaftLog log(internal::WalDir(dir));
  ETCDW_RETURN_IF_ERROR(log.Open(impl->engine.get()));
  if (log.LastIndex() > impl->kv->ConsistentIndex()) {
    return FailedPrecondition(
        "data directory \"" + dir + "\" has " +
        std::to_string(log.LastIndex() - impl->kv->ConsistentIndex()) +
        " raft log entries not yet applied; start the member once before writing to it offline");
  }
  impl->rev = impl->kv->Rev();
  std::unique_ptr<OfflineStore> s(new OfflineStore());
  s->impl_ = std::move(impl);
  return s;
}

OfflineStore::~OfflineStore() {
  if (!impl_ || !impl_->engine) return;
  Status st = Close();
  if (!st.ok()) log::Warn("closing the offline store failed", {log::F("error", st)});
}

int64_t OfflineStore::Rev() const { return impl_->kv ? impl_->kv->Rev() : impl_->rev; }

const std::vector<std::string>& OfflineStore::orphaned_lease_keys() const {
  return impl_->orphaned;
}

Status OfflineStore::ApplyRevision(const std::vector<mvccpb::Event>& events) {
  if (!impl_->kv) return FailedPrecondition("the offline store is closed");
  if (events.empty()) return InvalidArgument("a revision to apply needs at least one event");
  mvcc::KvStore& kv = *impl_->kv;
  const int64_t expected = kv.Rev() + 1;
  // Everything is checked before anything is staged, so a refused revision changes nothing.
  std::set<std::string_view> keys;
  for (const mvccpb::Event& ev : events) {
    if (ev.kv().mod_revision() != expected) return Mismatch(expected, ev.kv().mod_revision());
    if (ev.type() != mvccpb::Event::PUT && ev.type() != mvccpb::Event::DELETE) {
      return InvalidArgument("event of unknown type " + std::to_string(ev.type()));
    }
    if (ev.kv().key().empty()) return InvalidArgument("event without a key");
    // One transaction never changes a key twice (etcd refuses duplicate keys in a txn).
    if (!keys.insert(ev.kv().key()).second) {
      return InvalidArgument("key \"" + ev.kv().key() + "\" changes twice in revision " +
                             std::to_string(expected));
    }
  }

  auto batch = kv.BeginApply();
  auto txn = batch->Begin();
  std::vector<std::string> orphaned;
  for (const mvccpb::Event& ev : events) {
    const std::string& key = ev.kv().key();
    if (ev.type() == mvccpb::Event::DELETE) {
      ETCDW_RETURN_IF_ERROR(txn->DeleteRange(mvcc::KeyRange::Single(key), nullptr).status());
      continue;
    }
    int64_t lease = ev.kv().lease();
    if (lease != 0 && !kv.leases().Exists(lease)) {
      orphaned.push_back(key);
      lease = 0;
    }
    txn->Put(key, ev.kv().value(), lease, txn->Find(key), std::nullopt);
  }
  batch->End(std::move(txn));
  // Only deletions of keys the store does not have: the store is not the one the events
  // were recorded against.
  if (batch->pending_rev() != expected) return Mismatch(expected, batch->pending_rev());
  ETCDW_RETURN_IF_ERROR(kv.Commit(*batch, kv.ConsistentIndex()));
  if (kv.Rev() != expected) return Mismatch(expected, kv.Rev());
  for (auto& k : orphaned) impl_->orphaned.push_back(std::move(k));
  return Status::Ok();
}

Status OfflineStore::CompactToCurrentRevision() {
  if (!impl_->kv) return FailedPrecondition("the offline store is closed");
  mvcc::KvStore& kv = *impl_->kv;
  const int64_t rev = kv.Rev();
  if (kv.CompactRev() >= rev && kv.FinishedCompactRev() >= rev) return Status::Ok();
  if (kv.CompactRev() < rev) {
    auto batch = kv.BeginApply();
    ETCDW_RETURN_IF_ERROR(kv.Compact(*batch, rev));
    ETCDW_RETURN_IF_ERROR(kv.Commit(*batch, kv.ConsistentIndex()));
  }
  return mvcc::Compactor::CompactTo(kv, rev);
}

Status OfflineStore::Defragment() {
  if (!impl_->engine) return FailedPrecondition("the offline store is closed");
  return impl_->engine->CompactAll();
}

Result<mvcc::EtcdExportSummary> OfflineStore::ExportEtcdSnapshot(const std::string& path) {
  if (!impl_->engine) return FailedPrecondition("the offline store is closed");
  std::unique_ptr<storage::Snapshot> snap = impl_->engine->GetSnapshot();
  mvcc::EtcdExportOptions options;
  options.cluster_version = std::string(kEtcdApiVersion) + ".0";  // as the member writes it
  ETCDW_ASSIGN_OR_RETURN(mvcc::EtcdExportSummary summary,
                         mvcc::ExportEtcdBackend(*impl_->engine, *snap, path, options));
  Status st = mvcc::AppendSha256Trailer(path);
  if (!st.ok()) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return st;
  }
  return summary;
}

Status OfflineStore::Close() {
  if (!impl_->engine) return Status::Ok();
  impl_->rev = impl_->kv->Rev();
  // The commits were not synced: a flush writes the memtables to synced table files, after
  // which the write-ahead log is no longer needed for them.
  Status st = impl_->engine->Flush();
  impl_->kv.reset();
  impl_->engine.reset();
  return st.WithContext("sync the store");
}

}  // namespace etcdw::data_dir
