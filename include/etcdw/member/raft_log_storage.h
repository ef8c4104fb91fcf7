// raft::Storage over the durable Raft log (storage::RaftLog): entries, terms, indexes and the
// hard state come from the log, with the errors Raft expects outside its bounds (compacted
// below, unavailable above); the configuration and the snapshot come from the owner, which
// knows them (the membership, the applied state).
#pragma once

#include <functional>

#include "etcdw/raft/storage.h"
#include "etcdw/storage/raft_log.h"

namespace etcdw::member {

class RaftLogStorage final : public raft::Storage {
 public:
  using ConfStateFn = std::function<raftpb::ConfState()>;
  using SnapshotFn = std::function<Result<raftpb::Snapshot>()>;

  RaftLogStorage(const storage::RaftLog& log, ConfStateFn conf_state, SnapshotFn snapshot)
      : log_(log), conf_state_(std::move(conf_state)), snapshot_(std::move(snapshot)) {}

  Result<std::pair<raftpb::HardState, raftpb::ConfState>> InitialState() const override;
  Result<std::vector<raftpb::Entry>> Entries(uint64_t lo, uint64_t hi,
                                             uint64_t max_size) const override;
  Result<uint64_t> Term(uint64_t i) const override;
  uint64_t FirstIndex() const override { return log_.FirstIndex(); }
  uint64_t LastIndex() const override { return log_.LastIndex(); }
  Result<raftpb::Snapshot> Snapshot() const override { return snapshot_(); }

 private:
  const storage::RaftLog& log_;
  ConfStateFn conf_state_;
  SnapshotFn snapshot_;
};

}  // namespace etcdw::member
