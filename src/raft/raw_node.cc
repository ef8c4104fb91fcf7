#include "etcdw/raft/raw_node.h"

namespace etcdw::raft {

bool IsEmptyHardState(const raftpb::HardState& hs) {
  return hs.term() == 0 && hs.vote() == 0 && hs.commit() == 0;
}

bool HardStateEqual(const raftpb::HardState& a, const raftpb::HardState& b) {
  return a.term() == b.term() && a.vote() == b.vote() && a.commit() == b.commit();
}

RawNode::RawNode(const Config& c) : raft_(c) {
  prev_soft_ = raft_.soft_state();
  prev_hard_ = raft_.hard_state();
}

etcdw::Status RawNode::Bootstrap(const std::vector<raftpb::ConfChange>& peers) {
  ETCDW_RETURN_IF_ERROR(raft_.Bootstrap(peers));
  // The bootstrap entries and the hard state must reach the next Ready.
  prev_hard_ = raftpb::HardState();
  return etcdw::Status::Ok();
}

void RawNode::Campaign() {
  raftpb::Message m;
  m.set_type(raftpb::MSG_HUP);
  (void)raft_.Step(m);  // local message: the outcome shows in the state and the next Ready
}

etcdw::Status RawNode::Propose(std::string data) {
  raftpb::Message m;
  m.set_type(raftpb::MSG_PROP);
  m.set_from(raft_.id());
  m.add_entries()->set_data(std::move(data));
  return raft_.Step(m);
}

etcdw::Status RawNode::ProposeConfChange(const raftpb::ConfChange& cc) {
  raftpb::Message m;
  m.set_type(raftpb::MSG_PROP);
  m.set_from(raft_.id());
  raftpb::Entry* e = m.add_entries();
  e->set_type(raftpb::ENTRY_CONF_CHANGE);
  e->set_data(cc.SerializeAsString());
  return raft_.Step(m);
}

etcdw::Status RawNode::Step(const raftpb::Message& m) {
  if (IsLocalMessage(m.type())) {
    return InvalidArgument("raft: cannot step raft local message");
  }
  if (IsResponseMessage(m.type()) && !raft_.tracker().Get(m.from())) {
    return InvalidArgument("raft: cannot step as peer not found");
  }
  return raft_.Step(m);
}

void RawNode::TransferLeader(uint64_t transferee) {
  raftpb::Message m;
  m.set_type(raftpb::MSG_TRANSFER_LEADER);
  m.set_from(transferee);
  (void)raft_.Step(m);  // local message: the outcome shows in the state and the next Ready
}

void RawNode::ReadIndex(std::string ctx) {
  raftpb::Message m;
  m.set_type(raftpb::MSG_READ_INDEX);
  m.add_entries()->set_data(std::move(ctx));
  (void)raft_.Step(m);  // local message: the outcome shows in the state and the next Ready
}

void RawNode::ReportUnreachable(uint64_t id) {
  raftpb::Message m;
  m.set_type(raftpb::MSG_UNREACHABLE);
  m.set_from(id);
  (void)raft_.Step(m);  // local message: the outcome shows in the state and the next Ready
}

void RawNode::ReportSnapshot(uint64_t id, SnapshotStatus status) {
  raftpb::Message m;
  m.set_type(raftpb::MSG_SNAP_STATUS);
  m.set_from(id);
  m.set_reject(status == SnapshotStatus::kFailure);
  (void)raft_.Step(m);  // local message: the outcome shows in the state and the next Ready
}

bool RawNode::HasReady() const {
  if (!(raft_.soft_state() == prev_soft_)) return true;
  raftpb::HardState hs = raft_.hard_state();
  if (!IsEmptyHardState(hs) && !HardStateEqual(hs, prev_hard_)) return true;
  if (raft_.log().UnstableSnapshot()) return true;
  if (!raft_.msgs.empty() || !raft_.log().UnstableEntries().empty()) return true;
  if (raft_.log().HasNextCommittedEntries()) return true;
  return !raft_.read_states.empty();
}

Ready RawNode::GetReady() {
  Ready rd;
  rd.entries = raft_.log().UnstableEntries();
  rd.committed_entries = raft_.log().NextCommittedEntries();
  rd.messages = std::move(raft_.msgs);
  raft_.msgs.clear();
  SoftState ss = raft_.soft_state();
  if (!(ss == prev_soft_)) rd.soft_state = ss;
  raftpb::HardState hs = raft_.hard_state();
  if (!HardStateEqual(hs, prev_hard_)) rd.hard_state = hs;
  if (raft_.log().UnstableSnapshot()) rd.snapshot = *raft_.log().UnstableSnapshot();
  rd.read_states = std::move(raft_.read_states);
  raft_.read_states.clear();
  rd.must_sync =
      !rd.entries.empty() || hs.vote() != prev_hard_.vote() || hs.term() != prev_hard_.term();
  return rd;
}

void RawNode::Advance(const Ready& rd) {
  if (rd.soft_state) prev_soft_ = *rd.soft_state;
  if (rd.hard_state && !IsEmptyHardState(*rd.hard_state)) prev_hard_ = *rd.hard_state;
  if (rd.snapshot) {
    raft_.log().StableSnapTo(rd.snapshot->metadata().index());
    // The application installed the snapshot: its state is applied up to that index.
    if (raft_.log().applied() < rd.snapshot->metadata().index()) {
      raft_.log().AppliedTo(rd.snapshot->metadata().index());
    }
  }
  if (!rd.committed_entries.empty()) {
    raft_.log().AppliedTo(rd.committed_entries.back().index());
    raft_.ReduceUncommittedSize(rd.committed_entries);
  }
  if (!rd.entries.empty()) {
    const auto& e = rd.entries.back();
    raft_.log().StableTo(e.index(), e.term());
  }
}

NodeStatus RawNode::GetStatus() const {
  NodeStatus s;
  s.id = raft_.id();
  s.hard_state = raft_.hard_state();
  s.soft_state = raft_.soft_state();
  s.applied = raft_.log().applied();
  s.lead_transferee = raft_.lead_transferee();
  if (raft_.state() == StateType::kLeader) s.progress = raft_.tracker().progress;
  return s;
}

}  // namespace etcdw::raft
