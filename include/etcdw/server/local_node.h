// The single-member consensus: the member is its own quorum, so an entry is committed as soon
// as it is durable. The loop thread takes every queued proposal at once (group commit), appends
// them to the Raft log in one synced write, applies them in one engine write, and repeats;
// proposals arriving during an fsync join the next group.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "etcdw/server/applier.h"
#include "etcdw/server/node.h"
#include "etcdw/storage/raft_log.h"

namespace etcdw::server {

struct LocalNodeOptions {
  uint64_t member_id = 0;
  // Log entries are compacted once this many are applied beyond the last compaction
  // (etcd's snapshot-count); kCatchUpEntries are kept.
  uint64_t snapshot_count = 100000;
  size_t max_batch_bytes = size_t{8} << 20;
  size_t max_batch_entries = 4096;
  // Called if the loop hits an unrecoverable storage error (the member must stop).
  std::function<void(const Status&)> on_fatal;
};

class LocalNode final : public Node {
 public:
  static constexpr uint64_t kCatchUpEntries = 5000;

  LocalNode(storage::Engine& engine, Applier& applier, LocalNodeOptions opts);
  ~LocalNode() override;

  Status Start() override;
  void Stop() override;
  Status Propose(std::string data) override;
  void ReadIndex(std::function<void(Status)> ready) override;

  uint64_t Term() const override { return term_.load(); }
  uint64_t Leader() const override { return running_.load() ? opts_.member_id : 0; }
  bool IsLeader() const override { return running_.load(); }
  uint64_t CommitIndex() const override { return commit_.load(); }
  uint64_t AppliedIndex() const override { return applier_.AppliedIndex(); }
  // Synced log writes so far: with group commit, fewer than the entries written.
  uint64_t SyncedWrites() const { return synced_writes_.load(); }

 private:
  void Loop();
  // Appends entries durably and applies them. False on a fatal error.
  bool Process(std::vector<raftpb::Entry>& entries);

  storage::Engine& engine_;
  storage::RaftLog log_;
  Applier& applier_;
  LocalNodeOptions opts_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> pending_;
  bool stopping_ = false;
  std::thread loop_;

  std::atomic<bool> running_{false};
  std::atomic<uint64_t> term_{0};
  std::atomic<uint64_t> commit_{0};
  std::atomic<uint64_t> applied_{0};
  std::atomic<uint64_t> synced_writes_{0};
};

}  // namespace etcdw::server
