#include "etcdw/member/raft_log_storage.h"

namespace etcdw::member {

Result<std::pair<raftpb::HardState, raftpb::ConfState>> RaftLogStorage::InitialState() const {
  return std::make_pair(log_.hard_state(), conf_state_());
}

Result<std::vector<raftpb::Entry>> RaftLogStorage::Entries(uint64_t lo, uint64_t hi,
                                                           uint64_t max_size) const {
  if (lo < log_.FirstIndex()) return raft::ErrCompacted();
  if (hi > log_.LastIndex() + 1) return raft::ErrUnavailable();
  return log_.Entries(lo, hi, max_size);
}

Result<uint64_t> RaftLogStorage::Term(uint64_t i) const {
  if (i < log_.CompactedIndex()) return raft::ErrCompacted();
  if (i > log_.LastIndex()) return raft::ErrUnavailable();
  return log_.Term(i);
}

}  // namespace etcdw::member
