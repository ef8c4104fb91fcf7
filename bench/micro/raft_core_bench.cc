// The Raft core's own cost per proposal, on the leader of a three-member cluster: propose, take
// the Ready (entries and MsgApps), persist, Advance, step both followers' acknowledgements, take
// the Ready with the committed entries, persist the hard state, Advance. The followers are
// simulated by their answers; no messages are sent.
//
// Two logs behind raft::Storage: MemoryStorage, and the durable storage::RaftLog in its files
// (written without sync: raft_log_bench.cc measures the fsync). The difference is what the core
// pays to read the durable log: Term() and Entries() calls, counted per proposal.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "etcdw/common/logging.h"
#include "etcdw/member/raft_log_storage.h"
#include "etcdw/raft.pb.h"
#include "etcdw/raft/raw_node.h"
#include "etcdw/raft/storage.h"
#include "etcdw/storage/raft_log.h"

namespace etcdw::bench {
namespace {

constexpr size_t kEntryDataBytes = 300;
// Compaction as in raft_log_bench.cc: above kCompactAbove entries, keep the last kKeepEntries.
constexpr uint64_t kCompactAbove = 15000;
constexpr uint64_t kKeepEntries = 5000;

// Forwards to another storage, counting the log reads, and reports members 1, 2 and 3.
class CountingStorage final : public raft::Storage {
 public:
  explicit CountingStorage(const raft::Storage& inner) : inner_(inner) {}
  Result<std::pair<raftpb::HardState, raftpb::ConfState>> InitialState() const override {
    auto init = inner_.InitialState();
    if (!init.ok()) return init.status();
    raftpb::ConfState cs;
    for (uint64_t id : {1, 2, 3}) cs.add_voters(id);
    return std::make_pair(init->first, cs);
  }
  Result<std::vector<raftpb::Entry>> Entries(uint64_t lo, uint64_t hi,
                                             uint64_t max_size) const override {
    ++entries_calls_;
    return inner_.Entries(lo, hi, max_size);
  }
  Result<uint64_t> Term(uint64_t i) const override {
    ++term_calls_;
    return inner_.Term(i);
  }
  uint64_t FirstIndex() const override { return inner_.FirstIndex(); }
  uint64_t LastIndex() const override { return inner_.LastIndex(); }
  Result<raftpb::Snapshot> Snapshot() const override { return inner_.Snapshot(); }

  int64_t term_calls() const { return term_calls_; }
  int64_t entries_calls() const { return entries_calls_; }

 private:
  const raft::Storage& inner_;
  mutable int64_t term_calls_ = 0;
  mutable int64_t entries_calls_ = 0;
};

// Where a Ready's entries and hard state go, and the storage Raft reads them back from.
class LogBackend {
 public:
  virtual ~LogBackend() = default;
  virtual const raft::Storage& storage() const = 0;
  // Persists the Ready's entries and hard state, compacting the log as it grows.
  virtual Status Persist(const raft::Ready& rd) = 0;
};

class MemoryBackend final : public LogBackend {
 public:
  const raft::Storage& storage() const override { return mem_; }
  Status Persist(const raft::Ready& rd) override {
    ETCDW_RETURN_IF_ERROR(mem_.Append(rd.entries));
    if (rd.hard_state) mem_.SetHardState(*rd.hard_state);
    const uint64_t last = mem_.LastIndex();
    if (last > mem_.FirstIndex() + kCompactAbove) {
      ETCDW_RETURN_IF_ERROR(mem_.Compact(last - kKeepEntries));
    }
    return Status::Ok();
  }

 private:
  raft::MemoryStorage mem_;
};

class EngineBackend final : public LogBackend {
 public:
  static Result<std::unique_ptr<EngineBackend>> Open() {
    std::unique_ptr<EngineBackend> b(new EngineBackend());
    b->dir_ = std::make_unique<testsupport::ScratchDir>("micro-raftcore");
    b->log_ = std::make_unique<storage::RaftLog>(b->dir_->path() + "/wal");
    ETCDW_RETURN_IF_ERROR(b->log_->Open(nullptr));
    // The server's adapter; the membership comes from CountingStorage, and no snapshot is taken.
    b->storage_ = std::make_unique<member::RaftLogStorage>(
        *b->log_, [] { return raftpb::ConfState(); },
        []() -> Result<raftpb::Snapshot> { return raftpb::Snapshot(); });
    return b;
  }
  const raft::Storage& storage() const override { return *storage_; }
  Status Persist(const raft::Ready& rd) override {
    ETCDW_RETURN_IF_ERROR(
        log_->Append(rd.entries, rd.hard_state ? &*rd.hard_state : nullptr, /*sync=*/false));
    const uint64_t last = log_->LastIndex();
    if (last - log_->CompactedIndex() > kCompactAbove) {
      ETCDW_RETURN_IF_ERROR(log_->Compact(last - kKeepEntries));
    }
    return Status::Ok();
  }

 private:
  EngineBackend() = default;
  std::unique_ptr<testsupport::ScratchDir> dir_;
  std::unique_ptr<storage::RaftLog> log_;  // these two are destroyed before dir_
  std::unique_ptr<member::RaftLogStorage> storage_;
};

raftpb::Message Answer(raftpb::MessageType type, uint64_t from, uint64_t term, uint64_t index) {
  raftpb::Message m;
  m.set_type(type);
  m.set_from(from);
  m.set_to(1);
  m.set_term(term);
  m.set_index(index);
  return m;
}

// One Ready cycle: persist, then Advance. Returns the number of entries committed by it.
Result<size_t> Cycle(raft::RawNode& node, LogBackend& backend) {
  raft::Ready rd = node.GetReady();
  ETCDW_RETURN_IF_ERROR(backend.Persist(rd));
  node.Advance(rd);
  return rd.committed_entries.size();
}

// Member 1 becomes leader (votes from 2) and commits its first entry (acknowledged by 2 and 3).
Status ElectLeader(raft::RawNode& node, LogBackend& backend) {
  node.Campaign();
  ETCDW_RETURN_IF_ERROR(Cycle(node, backend).status());
  const uint64_t term = node.raft().term();
  ETCDW_RETURN_IF_ERROR(node.Step(Answer(raftpb::MSG_VOTE_RESP, 2, term, 0)));
  if (node.raft().lead() != 1) return Internal("member 1 did not become leader");
  ETCDW_RETURN_IF_ERROR(Cycle(node, backend).status());
  const uint64_t last = node.raft().log().LastIndex();
  for (uint64_t from : {2, 3}) {
    ETCDW_RETURN_IF_ERROR(node.Step(Answer(raftpb::MSG_APP_RESP, from, term, last)));
  }
  ETCDW_ASSIGN_OR_RETURN(size_t committed, Cycle(node, backend));
  if (committed != 1) return Internal("the leader's first entry was not committed");
  return Status::Ok();
}

// Arguments: proposals per Ready, and the log (0: MemoryStorage, 1: RaftLog in its directory).
void BM_RaftLeaderCommit(benchmark::State& state) {
  const int per_ready = static_cast<int>(state.range(0));
  std::unique_ptr<LogBackend> backend;
  if (state.range(1) == 0) {
    backend = std::make_unique<MemoryBackend>();
  } else {
    auto engine = EngineBackend::Open();
    if (!Check(state, engine.status())) return;
    backend = std::move(engine).value();
  }
  // The core logs each election at info level; keep the benchmark's output to its table.
  log::SetLevel(log::Level::kWarn);
  CountingStorage counted(backend->storage());
  raft::Config cfg;
  cfg.id = 1;
  cfg.storage = &counted;
  cfg.pre_vote = false;  // one vote round is enough to elect member 1 here
  raft::RawNode node(cfg);
  if (!Check(state, ElectLeader(node, *backend))) return;

  const std::string data = MakeValue(kEntryDataBytes, 1);
  const int64_t term_calls_before = counted.term_calls();
  const int64_t entries_calls_before = counted.entries_calls();
  for (auto _ : state) {
    bool ok = true;
    for (int i = 0; ok && i < per_ready; ++i) ok = Check(state, node.Propose(data));
    if (!ok) break;
    auto appended = Cycle(node, *backend);
    if (!Check(state, appended.status())) break;
    const uint64_t term = node.raft().term();
    const uint64_t last = node.raft().log().LastIndex();
    for (uint64_t from : {2, 3}) {
      ok = ok && Check(state, node.Step(Answer(raftpb::MSG_APP_RESP, from, term, last)));
    }
    if (!ok) break;
    auto committed = Cycle(node, *backend);
    if (!Check(state, committed.status())) break;
    if (committed.value() != static_cast<size_t>(per_ready)) {
      state.SkipWithError("the proposals were not committed by the followers' acknowledgements");
      break;
    }
  }
  const double proposals = static_cast<double>(state.iterations() * per_ready);
  state.SetItemsProcessed(state.iterations() * per_ready);
  state.counters["term_reads"] =
      static_cast<double>(counted.term_calls() - term_calls_before) / std::max(proposals, 1.0);
  state.counters["entries_reads"] =
      static_cast<double>(counted.entries_calls() - entries_calls_before) /
      std::max(proposals, 1.0);
}
BENCHMARK(BM_RaftLeaderCommit)
    ->ArgNames({"per_ready", "engine"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({64, 0})
    ->Args({64, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace etcdw::bench
