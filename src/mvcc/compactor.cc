#include "etcdw/mvcc/compactor.h"

#include <set>

#include "etcdw/common/logging.h"
#include "etcdw/common/thread_name.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/storage/versioned_key.h"

namespace etcdw::mvcc {

using storage::Column;

namespace {
// Revision-log entries handled per write batch; small batches keep foreground latency low.
constexpr int kChunkEntries = 1000;
}  // namespace

Compactor::Compactor(KvStore& store) : store_(store) {
  finished_ = store.FinishedCompactRev();
  if (store.ScheduledCompactRev() > finished_) queue_.push_back(store.ScheduledCompactRev());
  worker_ = common::NamedThread("mvcc-compactor", [this] { Run(); });
}

Compactor::~Compactor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    stop_flag_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void Compactor::Schedule(int64_t rev) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(rev);
  }
  cv_.notify_all();
}

Status Compactor::WaitFinished(int64_t rev) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stop_ || finished_ >= rev || failed_rev_ >= rev; });
  if (finished_ >= rev) return Status::Ok();
  if (failed_rev_ >= rev) return failure_;
  return Unavailable("compactor stopped");
}

void Compactor::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    int64_t rev = queue_.front();
    queue_.pop_front();
    if (rev <= finished_) {
      cv_.notify_all();
      continue;
    }
    lock.unlock();
    log::Info("compaction started", {log::F("compact-revision", rev)});
    Status st = CompactTo(store_, rev, &stop_flag_);
    lock.lock();
    if (st.ok()) {
      finished_ = rev;
      log::Info("compaction finished", {log::F("compact-revision", rev)});
    } else if (!stop_) {
      // Waiters learn of the failure; the work is retried at the next compaction or start.
      failed_rev_ = rev;
      failure_ = st.WithContext("compaction to revision " + std::to_string(rev));
      log::Error("compaction failed", {log::F("compact-revision", rev), log::F("error", st)});
    }
    cv_.notify_all();
  }
}

Status Compactor::CompactTo(KvStore& store, int64_t rev, const std::atomic<bool>* stop) {
  storage::Engine& engine = store.engine();
  const uint64_t at = static_cast<uint64_t>(rev);
  storage::ReadOptions ro;
  ro.upper_bound = RevisionLowerBound(rev + 1);
  auto rit = engine.NewIterator(Column::kRevisions, ro);
  auto kit = engine.NewIterator(Column::kKeys);
  storage::Batch batch(engine);
  std::set<std::string> done;  // keys handled in this chunk
  int in_chunk = 0;

  for (rit->SeekToFirst(); rit->Valid(); rit->Next()) {
    std::string_view val = rit->value();
    if (rit->key().size() != 16 || val.empty()) return DataLoss("revision log entry is corrupt");
    Revision r = DecodeRevisionKey(rit->key());
    auto kind = static_cast<ChangeKind>(val[0]);
    std::string key(val.substr(1));
    if (done.insert(key).second) {
      // The newest version at or below `rev` survives unless it is a deletion; all older go.
      kit->Seek(storage::MakeVersionedKey(key, at));
      bool first = true;
      while (kit->Valid() && storage::UserKeyOf(kit->key()) == key) {
        if (!first || kit->value().empty()) batch.Delete(Column::kKeys, kit->key());
        first = false;
        kit->Next();
      }
      ETCDW_RETURN_IF_ERROR(kit->status());
    }
    // Keep the log from `rev` on (a watch may start at `rev`), except deletions at `rev`,
    // whose versions are gone.
    if (r.main < rev || kind == ChangeKind::kDelete) batch.Delete(Column::kRevisions, rit->key());
    if (++in_chunk == kChunkEntries) {
      ETCDW_RETURN_IF_ERROR(engine.Write(batch, /*sync=*/false));
      batch.Clear();
      done.clear();
      in_chunk = 0;
      if (stop && stop->load()) return Status(Code::kCanceled, "compaction interrupted");
      kit = engine.NewIterator(Column::kKeys);
      std::this_thread::yield();
    }
  }
  ETCDW_RETURN_IF_ERROR(rit->status());
  if (!batch.Empty()) ETCDW_RETURN_IF_ERROR(engine.Write(batch, /*sync=*/false));
  return store.MarkCompactionFinished(rev);
}

}  // namespace etcdw::mvcc
