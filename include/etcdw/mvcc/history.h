// Reading past changes from the revision log, for watchers that start in the past or fell
// behind. Events carry prev_kv (the version each change replaced) when it still exists.
// Changes at the compaction revision read as the finished compaction leaves them, whether or
// not it has run yet: deletions are omitted and no event carries a prev_kv.
#pragma once

#include <cstdint>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/mvcc/kv_store.h"

namespace etcdw::mvcc {

struct HistoryResult {
  std::vector<RevisionEvents> revisions;  // ascending; never splits a revision
  int64_t next_rev = 0;                   // first revision not read yet
  bool compacted = false;                 // `from` is below the compaction revision
  int64_t compact_rev = -1;               // the compaction revision seen
};

// Reads the changes of revisions [from, to], stopping after the revision in which the number
// of events reaches `max_events`. `to` must not exceed store.Rev().
Result<HistoryResult> ReadHistory(const KvStore& store, int64_t from, int64_t to,
                                  size_t max_events);

}  // namespace etcdw::mvcc
