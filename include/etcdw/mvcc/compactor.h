// Physical compaction: after a compaction to revision C is applied (readers already refuse
// revisions below C), the compactor deletes, in small batches on its own thread, every version
// that no read at a revision >= C can see: for each key, every version older than its newest
// version at or below C, and that version too when it is a deletion. Work is driven by the
// revision log, so it is proportional to the changes since the previous compaction, not to the
// size of the store. Interrupted work resumes after a restart (scheduled > finished).
#pragma once

#include <absl/base/thread_annotations.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "etcdw/common/status.h"
#include "etcdw/mvcc/kv_store.h"

namespace etcdw::mvcc {

class Compactor {
 public:
  // Starts the worker; resumes an unfinished compaction recorded in the store.
  explicit Compactor(KvStore& store);
  ~Compactor();  // stops the worker (unfinished work resumes at the next start)

  // Queues compaction to `rev` (called after the compaction's batch is committed).
  void Schedule(int64_t rev);
  // Blocks until compaction up to at least `rev` has finished (OK), has failed (the failure),
  // or the compactor stopped (Unavailable).
  Status WaitFinished(int64_t rev);

  // Runs one compaction synchronously (tests and the worker).
  static Status CompactTo(KvStore& store, int64_t rev, const std::atomic<bool>* stop = nullptr);

 private:
  void Run();

  KvStore& store_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int64_t> queue_ ABSL_GUARDED_BY(mu_);
  int64_t finished_ ABSL_GUARDED_BY(mu_) = -1;
  // The last compaction that failed, if after finished_.
  int64_t failed_rev_ ABSL_GUARDED_BY(mu_) = -1;
  Status failure_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> stop_flag_{false};
  std::thread worker_;
};

}  // namespace etcdw::mvcc
