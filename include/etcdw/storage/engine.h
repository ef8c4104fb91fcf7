// The storage engine: one RocksDB database with a fixed set of columns (column families), atomic
// write batches with optional fsync, snapshots and bounded iterators. It knows nothing of etcd;
// the layers above choose what the columns hold (docs/design.md, "Storage layout").
//
// Thread-safety: an Engine may be read from any number of threads while one thread writes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
class Iterator;
class Snapshot;
class WriteBatch;
class WriteBatchBase;
class WriteBatchWithIndex;
class Env;
class Cache;
}  // namespace rocksdb

namespace etcdw::storage {

// The columns of the database. Their order and names are part of the on-disk format.
enum class Column : int {
  kMeta = 0,       // small records: consistent index, revisions, membership, alarms
  kKeys = 1,       // versioned keys (VersionedKeyComparator): <key><8-byte version>
  kRevisions = 2,  // revision log: <8-byte main><8-byte sub> -> event reference
  kLeases = 3,     // lease records and lease->key attachments
  kRaftLog = 4,    // empty: where earlier versions kept the Raft log (storage/raft_log_legacy.cc)
};
inline constexpr int kColumnCount = 5;
const char* ColumnName(Column c);

struct EngineOptions {
  bool create_if_missing = true;
  // Keep everything in memory (tests and simulations): nothing touches the file system.
  bool in_memory = false;
  size_t block_cache_bytes = size_t{64} << 20;
  size_t write_buffer_bytes = size_t{32} << 20;
};

class Engine;

// A consistent point-in-time view; released when destroyed.
class Snapshot {
 public:
  ~Snapshot();
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

 private:
  friend class Engine;
  Snapshot(rocksdb::DB* db, const rocksdb::Snapshot* s) : db_(db), snap_(s) {}
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snap_;
};

// Iterates one column in key order within [lower, upper) bounds.
class Iterator {
 public:
  virtual ~Iterator() = default;
  virtual void SeekToFirst() = 0;
  virtual void SeekToLast() = 0;
  virtual void Seek(std::string_view target) = 0;         // first key >= target
  virtual void SeekForPrev(std::string_view target) = 0;  // last key <= target
  virtual void Next() = 0;
  virtual void Prev() = 0;
  virtual bool Valid() const = 0;
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  // Non-OK when iteration stopped because of an I/O error or corruption.
  virtual Status status() const = 0;
};

struct ReadOptions {
  const Snapshot* snapshot = nullptr;  // default: the latest state
  std::optional<std::string> lower_bound;
  std::optional<std::string> upper_bound;  // exclusive
  bool fill_cache = true;
};

// A write batch that can be read back before it is written (read-your-writes): Get and
// NewIterator merge the batch's pending changes over the database.
//
// Changes are recorded in a plain batch until the first read through it; that read builds the
// index reads need (replaying the changes so far), and later changes are indexed as they come.
// Most batches are never read back (puts know what they replace from the MVCC key index), so
// they skip the indexing.
class Batch {
 public:
  explicit Batch(const Engine& engine);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  void Put(Column c, std::string_view key, std::string_view value);
  void Delete(Column c, std::string_view key);
  // Deletes [begin, end). Not visible to this batch's own reads; use only for ranges the batch
  // does not read back (log truncation, revision-log trimming).
  void DeleteRange(Column c, std::string_view begin, std::string_view end);
  size_t Count() const;
  size_t DataSize() const;
  bool Empty() const { return Count() == 0; }
  void Clear();

 private:
  friend class Engine;
  // The batch in RocksDB's form, for writing it.
  rocksdb::WriteBatch* Raw() const;
  // The indexed form, built on first use.
  rocksdb::WriteBatchWithIndex& Indexed();
  // Where puts and deletes go: the indexed form once built, else the plain batch.
  rocksdb::WriteBatchBase& Recorder();

  const Engine& engine_;
  std::unique_ptr<rocksdb::WriteBatch> plain_;             // until the first read
  std::unique_ptr<rocksdb::WriteBatchWithIndex> indexed_;  // from then on
};

class Engine {
 public:
  // Opens (and creates if allowed) the database in directory `path`. Fails with
  // kFailedPrecondition when another Engine, in this process or another, has it open (RocksDB's
  // LOCK file is held); other failures keep RocksDB's classification (kDataLoss for corruption).
  static Result<std::unique_ptr<Engine>> Open(const std::string& path, const EngineOptions& opts);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Applies the batch atomically. With sync, returns only after it is on stable storage;
  // a synced write also makes every earlier write durable (one write-ahead log). Without sync
  // the write is buffered in the process until a synced write, SyncWal, 1 MiB of buffered
  // writes or the engine's destruction writes it out: a crash of the process (not only of the
  // machine) may lose it, and callers rebuild such writes from their own durable record (the
  // applier from the Raft log).
  Status Write(Batch& batch, bool sync);
  // Applies the batch atomically without the write-ahead log (RocksDB's disableWAL): it reaches
  // the disk only with Flush(), and a crash before that loses it and every other unlogged
  // write. For bulk loads into a new store that is discarded when the load does not finish
  // (mvcc::StateImporter); a logged write after them does not make them durable, Flush() does.
  Status WriteUnlogged(Batch& batch);

  Result<std::optional<std::string>> Get(Column c, std::string_view key,
                                         const Snapshot* snapshot = nullptr) const;
  // Reads through a batch's pending changes.
  Result<std::optional<std::string>> Get(Batch& batch, Column c, std::string_view key) const;

  std::unique_ptr<Iterator> NewIterator(Column c, const ReadOptions& opts = {}) const;
  // Iterates the database with the batch's pending changes merged in.
  std::unique_ptr<Iterator> NewIterator(Batch& batch, Column c, const ReadOptions& opts = {}) const;

  std::unique_ptr<Snapshot> GetSnapshot() const;

  // Rewrites every column to drop deleted and overwritten data (defragmentation).
  Status CompactAll();
  // Forces memtables to disk.
  Status Flush();
  // Makes every write so far durable (syncs the write-ahead log), as a synced write would.
  Status SyncWal();
  // Bytes the database occupies: table files plus unflushed data in memory. The legacy Raft
  // log column is left out (it holds an old data directory's log only until RaftLog moves it
  // into its own files; etcd's database size does not count its WAL either).
  uint64_t SizeOnDisk() const;
  // Estimated bytes of live data (same columns as SizeOnDisk()).
  uint64_t SizeInUse() const;
  // Reads every block of every file and checks its checksum.
  Status VerifyChecksums() const;

  const std::string& path() const { return path_; }
  bool in_memory() const { return env_ != nullptr; }

  // For the storage layer's own helpers.
  rocksdb::ColumnFamilyHandle* handle(Column c) const { return handles_[static_cast<int>(c)]; }
  rocksdb::DB* db() const { return db_; }

 private:
  Engine() = default;

  std::string path_;
  std::unique_ptr<rocksdb::Env> env_;  // in-memory env, when requested
  std::shared_ptr<rocksdb::Cache> cache_;
  rocksdb::DB* db_ = nullptr;
  rocksdb::ColumnFamilyHandle* handles_[kColumnCount] = {};
};

// Big-endian fixed-width integers: their byte order is their numeric order.
void PutFixed64BE(std::string& out, uint64_t v);
uint64_t DecodeFixed64BE(const char* p);
std::string EncodeFixed64BE(uint64_t v);

}  // namespace etcdw::storage
