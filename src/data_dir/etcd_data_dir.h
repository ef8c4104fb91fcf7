// An etcd data directory's member/ read as a whole before the takeover writes anything
// (takeover.cc) and by CheckDataDir (check.cc). Not a public interface.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etcd_wal.h"
#include "etcdw/bbolt/db.h"
#include "etcdw/cluster/membership.h"
#include "etcdw/common/status.h"

namespace etcdw::data_dir::internal {

// An exclusive flock(2) on etcd's backend file, as etcd's bbolt takes it while it runs:
// holding it keeps etcd from starting on the directory meanwhile.
class EtcdLock {
 public:
  // kFailedPrecondition when another process (a running etcd) holds the file.
  static Result<std::unique_ptr<EtcdLock>> Acquire(const std::string& db_path);
  ~EtcdLock();
  EtcdLock(const EtcdLock&) = delete;
  EtcdLock& operator=(const EtcdLock&) = delete;

 private:
  explicit EtcdLock(int fd) : fd_(fd) {}
  int fd_;
};

struct EtcdDataDir {
  std::unique_ptr<EtcdLock> lock;
  std::unique_ptr<bbolt::BoltDb> db;
  EtcdWal wal;
  std::optional<EtcdSnapMeta> snap;      // the newest .snap file's metadata
  uint64_t consistent_index = 0;         // the backend's applied index
  uint64_t consistent_term = 0;          // the term of that entry
  size_t first_replayed = 0;             // wal.entries[first_replayed..]: the entries after it
  std::vector<cluster::Member> members;  // the backend's members bucket
  std::vector<uint64_t> removed;         // and members_removed
  bool auth_enabled = false;

  uint64_t ReplayedEntries() const { return wal.entries.size() - first_replayed; }
  uint64_t LastIndex() const {
    return wal.entries.empty() || ReplayedEntries() == 0 ? consistent_index
                                                         : wal.entries.back().index;
  }
};

// Locks and reads `member_dir` (etcd's member/): the backend's meta and membership buckets, the
// WAL and the newest .snap file, and checks that the WAL holds every entry after the backend's
// consistent index and knows that entry's term. Errors name the file and what is wrong.
Result<EtcdDataDir> ReadEtcdDataDir(const std::string& member_dir);

}  // namespace etcdw::data_dir::internal
