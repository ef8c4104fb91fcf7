#include "etcdw/storage/engine.h"

#include <rocksdb/cache.h>
#include <rocksdb/comparator.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/write_batch_with_index.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "etcdw/storage/versioned_key.h"

namespace etcdw::storage {

void PutFixed64BE(std::string& out, uint64_t v) {
  char buf[8];
  for (int i = 7; i >= 0; --i) {
    buf[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  out.append(buf, 8);
}

uint64_t DecodeFixed64BE(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string EncodeFixed64BE(uint64_t v) {
  std::string s;
  PutFixed64BE(s, v);
  return s;
}

const char* ColumnName(Column c) {
  switch (c) {
    case Column::kMeta:
      return rocksdb::kDefaultColumnFamilyName.c_str();
    case Column::kKeys:
      return "keys";
    case Column::kRevisions:
      return "revisions";
    case Column::kLeases:
      return "leases";
    case Column::kRaftLog:
      return "raft_log";
  }
  return "?";
}

namespace {

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  Code code = s.IsCorruption()                 ? Code::kDataLoss
              : s.IsIOError() || s.IsNoSpace() ? Code::kUnavailable
              : s.IsInvalidArgument()          ? Code::kInvalidArgument
                                               : Code::kInternal;
  return Status(code, what + ": " + s.ToString());
}

// RocksDB takes a lock on the database's LOCK file (fcntl, plus an in-process table because
// fcntl locks do not conflict within one process). Failing to get it is an I/O error whose
// message says which: RocksDB 7.x words it "lock hold by current process" (same process), or
// "While lock file" with fcntl's EAGAIN or EACCES (another process; other errnos there, such
// as ENOLCK on a file system without locks, are not a conflict).
bool IsLockConflict(const rocksdb::Status& s) {
  if (!s.IsIOError()) return false;
  const std::string m = s.ToString();
  auto has = [&m](const char* text) { return m.find(text) != std::string::npos; };
  return has("lock hold by current process") ||
         (has("While lock file") &&
          (has("Resource temporarily unavailable") || has("Permission denied")));
}

rocksdb::Slice S(std::string_view v) { return rocksdb::Slice(v.data(), v.size()); }

// Adapts a RocksDB iterator to [lower, upper) bounds. A database iterator enforces them itself
// (ReadOptions' iterate bounds); a batch-over-database iterator does not for the batch's
// entries, so for it Valid() checks them (`check_bounds`): two comparisons per step that plain
// iterators, the hot read path, are spared.
class BoundedIterator final : public Iterator {
 public:
  BoundedIterator(std::unique_ptr<rocksdb::Iterator> it, bool check_bounds,
                  const rocksdb::Comparator* cmp, std::optional<std::string> lower,
                  std::optional<std::string> upper, std::unique_ptr<rocksdb::ReadOptions> ro,
                  std::unique_ptr<std::string> lb, std::unique_ptr<std::string> ub,
                  std::unique_ptr<rocksdb::Slice> lbs, std::unique_ptr<rocksdb::Slice> ubs)
      : ro_(std::move(ro)),
        lb_store_(std::move(lb)),
        ub_store_(std::move(ub)),
        lb_slice_(std::move(lbs)),
        ub_slice_(std::move(ubs)),
        it_(std::move(it)),
        check_bounds_(check_bounds),
        cmp_(cmp),
        lower_(std::move(lower)),
        upper_(std::move(upper)) {}

  void SeekToFirst() override {
    if (lower_)
      it_->Seek(S(*lower_));
    else
      it_->SeekToFirst();
  }
  void SeekToLast() override {
    if (upper_) {
      it_->SeekForPrev(S(*upper_));
      if (it_->Valid() && cmp_->Compare(it_->key(), S(*upper_)) >= 0) it_->Prev();
    } else {
      it_->SeekToLast();
    }
  }
  void Seek(std::string_view t) override {
    if (lower_ && cmp_->Compare(S(t), S(*lower_)) < 0)
      it_->Seek(S(*lower_));
    else
      it_->Seek(S(t));
  }
  void SeekForPrev(std::string_view t) override {
    if (upper_ && cmp_->Compare(S(t), S(*upper_)) >= 0) {
      SeekToLast();
    } else {
      it_->SeekForPrev(S(t));
    }
  }
  void Next() override { it_->Next(); }
  void Prev() override { it_->Prev(); }
  bool Valid() const override {
    if (!it_->Valid()) return false;
    if (!check_bounds_) return true;
    if (upper_ && cmp_->Compare(it_->key(), S(*upper_)) >= 0) return false;
    if (lower_ && cmp_->Compare(it_->key(), S(*lower_)) < 0) return false;
    return true;
  }
  std::string_view key() const override {
    auto k = it_->key();
    return {k.data(), k.size()};
  }
  std::string_view value() const override {
    auto v = it_->value();
    return {v.data(), v.size()};
  }
  Status status() const override { return FromRocks(it_->status(), "iterator"); }

 private:
  // Declared before it_ so they outlive it (members are destroyed in reverse order).
  std::unique_ptr<rocksdb::ReadOptions> ro_;
  std::unique_ptr<std::string> lb_store_, ub_store_;
  std::unique_ptr<rocksdb::Slice> lb_slice_, ub_slice_;
  std::unique_ptr<rocksdb::Iterator> it_;
  const bool check_bounds_;
  const rocksdb::Comparator* cmp_;
  std::optional<std::string> lower_, upper_;
};

}  // namespace

Snapshot::~Snapshot() { db_->ReleaseSnapshot(snap_); }

Batch::Batch(const Engine& engine)
    : engine_(engine), plain_(std::make_unique<rocksdb::WriteBatch>()) {}
Batch::~Batch() = default;

namespace {

// Copies a plain batch's records, in order, into an indexed one.
class Replay final : public rocksdb::WriteBatch::Handler {
 public:
  Replay(const Engine& engine, rocksdb::WriteBatchWithIndex& to) : engine_(engine), to_(to) {}
  rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    return to_.Put(Handle(cf), key, value);
  }
  rocksdb::Status DeleteCF(uint32_t cf, const rocksdb::Slice& key) override {
    return to_.Delete(Handle(cf), key);
  }
  rocksdb::Status DeleteRangeCF(uint32_t cf, const rocksdb::Slice& begin,
                                const rocksdb::Slice& end) override {
    // Not indexed (Batch::DeleteRange): recorded in the underlying batch only.
    return to_.GetWriteBatch()->DeleteRange(Handle(cf), begin, end);
  }

 private:
  rocksdb::ColumnFamilyHandle* Handle(uint32_t id) const {
    for (int c = 0; c < kColumnCount; ++c) {
      rocksdb::ColumnFamilyHandle* h = engine_.handle(static_cast<Column>(c));
      if (h->GetID() == id) return h;
    }
    return nullptr;  // cannot happen: Batch records only this engine's columns
  }
  const Engine& engine_;
  rocksdb::WriteBatchWithIndex& to_;
};

}  // namespace

rocksdb::WriteBatch* Batch::Raw() const {
  return indexed_ ? indexed_->GetWriteBatch() : plain_.get();
}

rocksdb::WriteBatchWithIndex& Batch::Indexed() {
  if (!indexed_) {
    indexed_ = std::make_unique<rocksdb::WriteBatchWithIndex>(rocksdb::BytewiseComparator(), 0,
                                                              /*overwrite_key=*/true);
    Replay replay(engine_, *indexed_);
    rocksdb::Status s = plain_->Iterate(&replay);
    if (!s.ok()) {
      // Only records Batch itself wrote are replayed: a failure is a bug, not bad input.
      std::fprintf(stderr, "storage: cannot index a write batch: %s\n", s.ToString().c_str());
      std::abort();
    }
    plain_.reset();
  }
  return *indexed_;
}

rocksdb::WriteBatchBase& Batch::Recorder() {
  if (indexed_) return *indexed_;
  return *plain_;
}

void Batch::Put(Column c, std::string_view key, std::string_view value) {
  Recorder().Put(engine_.handle(c), S(key), S(value));
}
void Batch::Delete(Column c, std::string_view key) { Recorder().Delete(engine_.handle(c), S(key)); }
void Batch::DeleteRange(Column c, std::string_view begin, std::string_view end) {
  // WriteBatchWithIndex does not index range deletions; record it in the underlying batch.
  Raw()->DeleteRange(engine_.handle(c), S(begin), S(end));
}
size_t Batch::Count() const { return Raw()->Count(); }
size_t Batch::DataSize() const { return Raw()->GetDataSize(); }
void Batch::Clear() {
  indexed_.reset();
  // A plain batch keeps its buffer: bulk writers (the importer) refill it batch after batch.
  if (plain_) {
    plain_->Clear();
  } else {
    plain_ = std::make_unique<rocksdb::WriteBatch>();
  }
}

Result<std::unique_ptr<Engine>> Engine::Open(const std::string& path, const EngineOptions& o) {
  std::unique_ptr<Engine> e(new Engine());
  e->path_ = path;

  rocksdb::DBOptions dbo;
  dbo.create_if_missing = o.create_if_missing;
  dbo.create_missing_column_families = o.create_if_missing;
  dbo.paranoid_checks = true;
  dbo.max_background_jobs = 2;
  dbo.bytes_per_sync = 1 << 20;
  // A damaged WAL record fails the open: point-in-time recovery would silently drop it and
  // every later (acknowledged, synced) write. Only an incomplete record at the very end, a
  // write torn by a crash before it was acknowledged, is dropped.
  dbo.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  // Unsynced writes stay in RocksDB's buffer until a synced write, SyncWal, a full buffer or
  // Close writes them out: no system call per unsynced write (see Write in engine.h).
  dbo.manual_wal_flush = true;
  // A column written rarely (Meta holds the consistent index: a little per apply) keeps every
  // write-ahead log file since its last flush alive, and an open replays them all: past this
  // total RocksDB flushes the columns holding the oldest file, so a start replays at most this.
  dbo.max_total_wal_size = 128 << 20;
  dbo.keep_log_file_num = 3;
  dbo.max_manifest_file_size = 64 << 20;
  dbo.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  if (o.in_memory) {
    e->env_.reset(rocksdb::NewMemEnv(rocksdb::Env::Default()));
    dbo.env = e->env_.get();
  }

  e->cache_ = rocksdb::NewLRUCache(o.block_cache_bytes);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = e->cache_;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.format_version = 5;

  rocksdb::ColumnFamilyOptions base;
  base.write_buffer_size = o.write_buffer_bytes;
  base.max_write_buffer_number = 3;
  // Memtable memory is counted in SizeOnDisk(); small arena blocks keep that count close to the
  // data actually written (the default block is an eighth of the write buffer).
  base.arena_block_size = 64 << 10;
  base.level_compaction_dynamic_level_bytes = true;
  base.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (int i = 0; i < kColumnCount; ++i) {
    rocksdb::ColumnFamilyOptions cfo = base;
    if (static_cast<Column>(i) == Column::kKeys) cfo.comparator = VersionedKeyComparator();
    if (static_cast<Column>(i) != Column::kKeys && static_cast<Column>(i) != Column::kMeta) {
      // Small columns: smaller memtables keep an idle member's memory low.
      cfo.write_buffer_size = std::min<size_t>(o.write_buffer_bytes, size_t{8} << 20);
    }
    cfs.emplace_back(ColumnName(static_cast<Column>(i)), cfo);
  }

  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status s = rocksdb::DB::Open(dbo, path, cfs, &handles, &e->db_);
  if (IsLockConflict(s)) {
    return FailedPrecondition("open store \"" + path +
                              "\": the store is locked by another open of it: " + s.ToString());
  }
  if (!s.ok()) return FromRocks(s, "open store \"" + path + "\"");
  for (int i = 0; i < kColumnCount; ++i) e->handles_[i] = handles[i];
  return e;
}

Engine::~Engine() {
  if (!db_) return;
  // Buffered unsynced writes go to the file, as they would have without the buffer.
  rocksdb::Status flushed = db_->FlushWAL(/*sync=*/false);
  (void)flushed;  // nothing to tell: the writes were not promised durable
  for (auto* h : handles_) {
    if (h) db_->DestroyColumnFamilyHandle(h);
  }
  db_->Close();
  delete db_;
}

Status Engine::Write(Batch& batch, bool sync) {
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  return FromRocks(db_->Write(wo, batch.Raw()), "write");
}

Status Engine::WriteUnlogged(Batch& batch) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  return FromRocks(db_->Write(wo, batch.Raw()), "write");
}

Result<std::optional<std::string>> Engine::Get(Column c, std::string_view key,
                                               const Snapshot* snapshot) const {
  rocksdb::ReadOptions ro;
  if (snapshot) ro.snapshot = snapshot->snap_;
  std::string v;
  rocksdb::Status s = db_->Get(ro, handle(c), S(key), &v);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return FromRocks(s, "get");
  return std::optional<std::string>(std::move(v));
}

Result<std::optional<std::string>> Engine::Get(Batch& batch, Column c, std::string_view key) const {
  rocksdb::ReadOptions ro;
  std::string v;
  rocksdb::Status s = batch.Indexed().GetFromBatchAndDB(db_, ro, handle(c), S(key), &v);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return FromRocks(s, "get");
  return std::optional<std::string>(std::move(v));
}

namespace {
struct PreparedRead {
  std::unique_ptr<rocksdb::ReadOptions> ro = std::make_unique<rocksdb::ReadOptions>();
  std::unique_ptr<std::string> lb, ub;
  std::unique_ptr<rocksdb::Slice> lbs, ubs;
};
PreparedRead Prepare(const ReadOptions& opts, const rocksdb::Snapshot* snap) {
  PreparedRead p;
  p.ro->snapshot = snap;
  p.ro->fill_cache = opts.fill_cache;
  if (opts.lower_bound) {
    p.lb = std::make_unique<std::string>(*opts.lower_bound);
    p.lbs = std::make_unique<rocksdb::Slice>(*p.lb);
    p.ro->iterate_lower_bound = p.lbs.get();
  }
  if (opts.upper_bound) {
    p.ub = std::make_unique<std::string>(*opts.upper_bound);
    p.ubs = std::make_unique<rocksdb::Slice>(*p.ub);
    p.ro->iterate_upper_bound = p.ubs.get();
  }
  return p;
}
}  // namespace

std::unique_ptr<Iterator> Engine::NewIterator(Column c, const ReadOptions& opts) const {
  PreparedRead p = Prepare(opts, opts.snapshot ? opts.snapshot->snap_ : nullptr);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(*p.ro, handle(c)));
  return std::make_unique<BoundedIterator>(std::move(it), /*check_bounds=*/false,
                                           handle(c)->GetComparator(), opts.lower_bound,
                                           opts.upper_bound, std::move(p.ro), std::move(p.lb),
                                           std::move(p.ub), std::move(p.lbs), std::move(p.ubs));
}

std::unique_ptr<Iterator> Engine::NewIterator(Batch& batch, Column c,
                                              const ReadOptions& opts) const {
  PreparedRead p = Prepare(opts, opts.snapshot ? opts.snapshot->snap_ : nullptr);
  rocksdb::Iterator* base = db_->NewIterator(*p.ro, handle(c));
  std::unique_ptr<rocksdb::Iterator> it(
      batch.Indexed().NewIteratorWithBase(handle(c), base, p.ro.get()));
  return std::make_unique<BoundedIterator>(std::move(it), /*check_bounds=*/true,
                                           handle(c)->GetComparator(), opts.lower_bound,
                                           opts.upper_bound, std::move(p.ro), std::move(p.lb),
                                           std::move(p.ub), std::move(p.lbs), std::move(p.ubs));
}

std::unique_ptr<Snapshot> Engine::GetSnapshot() const {
  return std::unique_ptr<Snapshot>(new Snapshot(db_, db_->GetSnapshot()));
}

Status Engine::Flush() {
  rocksdb::FlushOptions fo;
  fo.wait = true;
  std::vector<rocksdb::ColumnFamilyHandle*> hs(handles_, handles_ + kColumnCount);
  return FromRocks(db_->Flush(fo, hs), "flush");
}

Status Engine::SyncWal() { return FromRocks(db_->FlushWAL(/*sync=*/true), "sync write-ahead log"); }

Status Engine::CompactAll() {
  ETCDW_RETURN_IF_ERROR(Flush());
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  co.change_level = true;
  co.target_level = 0;
  for (auto* h : handles_) {
    ETCDW_RETURN_IF_ERROR(FromRocks(db_->CompactRange(co, h, nullptr, nullptr), "compact"));
  }
  return Status::Ok();
}

uint64_t Engine::SizeOnDisk() const {
  uint64_t total = 0;
  for (int i = 0; i < kColumnCount; ++i) {
    if (static_cast<Column>(i) == Column::kRaftLog) continue;
    auto* h = handles_[i];
    uint64_t v = 0;
    if (db_->GetIntProperty(h, "rocksdb.total-sst-files-size", &v)) total += v;
    if (db_->GetIntProperty(h, "rocksdb.cur-size-all-mem-tables", &v)) total += v;
  }
  return total;
}

uint64_t Engine::SizeInUse() const {
  uint64_t total = 0;
  for (int i = 0; i < kColumnCount; ++i) {
    if (static_cast<Column>(i) == Column::kRaftLog) continue;
    auto* h = handles_[i];
    uint64_t v = 0;
    if (db_->GetIntProperty(h, "rocksdb.estimate-live-data-size", &v)) total += v;
    if (db_->GetIntProperty(h, "rocksdb.cur-size-active-mem-table", &v)) total += v;
  }
  return total;
}

Status Engine::VerifyChecksums() const {
  return FromRocks(db_->VerifyChecksum(), "verify checksums");
}

}  // namespace etcdw::storage
