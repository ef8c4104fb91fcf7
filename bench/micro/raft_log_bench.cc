// The durable Raft log, written as RaftNode::HandleReady writes it: a Ready's entries and hard
// state in one append (synced when Raft says so, which it does whenever there are entries),
// compacted as the server compacts it.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_util.h"
#include "etcdw/raft.pb.h"
#include "etcdw/storage/raft_log.h"

namespace etcdw::bench {
namespace {

// About the entry of a Put with a 256-byte value.
constexpr size_t kEntryDataBytes = 300;
// The log is compacted as the server compacts it, so it stays the length of a server's log:
// once it holds more than kCompactAbove entries, all but the last kKeepEntries go.
constexpr uint64_t kCompactAbove = 15000;
constexpr uint64_t kKeepEntries = 5000;

// Appends `per_write` entries per engine write, synced or not.
void BM_RaftLogAppend(benchmark::State& state) {
  const int per_write = static_cast<int>(state.range(0));
  const bool sync = state.range(1) != 0;
  testsupport::ScratchDir dir("micro-raftlog");
  storage::RaftLog log(dir.path() + "/wal");
  if (!Check(state, log.Open(nullptr))) return;

  std::vector<raftpb::Entry> entries(per_write);
  for (int i = 0; i < per_write; ++i) {
    entries[i].set_term(1);
    entries[i].set_type(raftpb::ENTRY_NORMAL);
    entries[i].set_data(MakeValue(kEntryDataBytes, static_cast<uint64_t>(i)));
  }
  raftpb::HardState hs;
  hs.set_term(1);
  hs.set_vote(1);

  for (auto _ : state) {
    uint64_t index = log.LastIndex();
    for (auto& e : entries) e.set_index(++index);
    // A single voter commits its entries at once: every Ready also moves the commit index.
    hs.set_commit(index);
    if (!Check(state, log.Append(entries, &hs, sync))) break;
    if (index - log.CompactedIndex() > kCompactAbove) {
      if (!Check(state, log.Compact(index - kKeepEntries))) break;
    }
  }
  const uint64_t appended = static_cast<uint64_t>(state.iterations()) * per_write;
  if (!state.error_occurred()) {
    auto term = log.Term(log.LastIndex());
    if (log.LastIndex() != appended || !term.ok() || term.value() != 1) {
      state.SkipWithError("the log does not end with the entries appended");
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(appended));
  state.SetBytesProcessed(static_cast<int64_t>(appended * kEntryDataBytes));
}
BENCHMARK(BM_RaftLogAppend)
    ->ArgNames({"entries", "sync"})
    ->Args({1, 1})
    ->Args({64, 1})
    ->Args({1, 0})
    ->Args({64, 0})
    ->UseRealTime()  // a synced write waits for the disk, off the CPU
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace etcdw::bench
