#include "etcdw/raft/progress.h"

#include <algorithm>

#include "fatal.h"

namespace etcdw::raft {

void Inflights::Add(uint64_t last_index) {
  if (Full()) Fatal("cannot add into a full inflights window");
  if (buffer_.empty()) buffer_.resize(size_);  // allocated on first use
  size_t next = start_ + count_;
  if (next >= size_) next -= size_;
  buffer_[next] = last_index;
  ++count_;
}

void Inflights::FreeLE(uint64_t to) {
  if (count_ == 0 || to < buffer_[start_]) return;  // nothing to free
  size_t idx = start_, i = 0;
  for (; i < count_; ++i) {
    if (to < buffer_[idx]) break;
    if (++idx >= size_) idx -= size_;
  }
  count_ -= i;
  start_ = idx;
  if (count_ == 0) start_ = 0;
}

void Inflights::FreeFirstOne() {
  if (count_ > 0) FreeLE(buffer_[start_]);
}

void Inflights::Reset() {
  count_ = 0;
  start_ = 0;
}

const char* ProgressStateName(ProgressState s) {
  switch (s) {
    case ProgressState::kProbe:
      return "StateProbe";
    case ProgressState::kReplicate:
      return "StateReplicate";
    case ProgressState::kSnapshot:
      return "StateSnapshot";
  }
  return "?";
}

void Progress::ResetState(ProgressState s) {
  probe_sent = false;
  pending_snapshot = 0;
  state = s;
  inflights.Reset();
}

void Progress::BecomeProbe() {
  // After a snapshot, resume right after it; otherwise probe from the last known match.
  if (state == ProgressState::kSnapshot) {
    uint64_t pending = pending_snapshot;
    ResetState(ProgressState::kProbe);
    next = std::max(match + 1, pending + 1);
  } else {
    ResetState(ProgressState::kProbe);
    next = match + 1;
  }
}

void Progress::BecomeReplicate() {
  ResetState(ProgressState::kReplicate);
  next = match + 1;
}

void Progress::BecomeSnapshot(uint64_t snapshot_index) {
  ResetState(ProgressState::kSnapshot);
  pending_snapshot = snapshot_index;
}

bool Progress::MaybeUpdate(uint64_t n) {
  bool updated = false;
  if (match < n) {
    match = n;
    updated = true;
    probe_sent = false;
  }
  next = std::max(next, n + 1);
  return updated;
}

bool Progress::MaybeDecrTo(uint64_t rejected, uint64_t match_hint) {
  if (state == ProgressState::kReplicate) {
    // Stale if the follower already matched beyond the rejected index.
    if (rejected <= match) return false;
    next = match + 1;
    return true;
  }
  // Probing sends one message at a time: only the rejection of that one counts.
  if (next - 1 != rejected) return false;
  next = std::max<uint64_t>(std::min(rejected, match_hint + 1), 1);
  probe_sent = false;
  return true;
}

void Progress::SentEntries(uint64_t last, bool any) {
  if (state == ProgressState::kReplicate) {
    if (any) {
      next = last + 1;
      inflights.Add(last);
    }
  } else if (state == ProgressState::kProbe) {
    probe_sent = true;
  }
}

bool Progress::IsPaused() const {
  switch (state) {
    case ProgressState::kProbe:
      return probe_sent;
    case ProgressState::kReplicate:
      return inflights.Full();
    case ProgressState::kSnapshot:
      return true;
  }
  return true;
}

std::string Progress::ToString() const {
  std::string s = std::string(ProgressStateName(state)) + " match=" + std::to_string(match) +
                  " next=" + std::to_string(next);
  if (is_learner) s += " learner";
  if (pending_snapshot) s += " pending_snap=" + std::to_string(pending_snapshot);
  if (!recent_active) s += " inactive";
  if (inflights.Count()) s += " inflight=" + std::to_string(inflights.Count());
  return s;
}

Progress* ProgressTracker::Get(uint64_t id) {
  auto it = progress.find(id);
  return it == progress.end() ? nullptr : &it->second;
}

const Progress* ProgressTracker::Get(uint64_t id) const {
  auto it = progress.find(id);
  return it == progress.end() ? nullptr : &it->second;
}

void ProgressTracker::Add(uint64_t id, bool learner, uint64_t next) {
  auto [it, inserted] = progress.try_emplace(id, max_inflight_);
  Progress& pr = it->second;
  if (inserted) {
    pr.next = std::max<uint64_t>(next, 1);
    // A new member counts as active so that adding it cannot make the leader step down
    // before it had a chance to respond.
    pr.recent_active = true;
  }
  pr.is_learner = learner;
  if (learner) {
    voters.erase(id);
    learners.insert(id);
  } else {
    learners.erase(id);
    voters.insert(id);
  }
}

void ProgressTracker::Remove(uint64_t id) {
  progress.erase(id);
  voters.erase(id);
  learners.erase(id);
  votes_.erase(id);
}

void ProgressTracker::MakeVoter(uint64_t id) {
  if (auto* pr = Get(id)) pr->is_learner = false;
  learners.erase(id);
  voters.insert(id);
}

void ProgressTracker::MakeLearner(uint64_t id) {
  if (auto* pr = Get(id)) pr->is_learner = true;
  voters.erase(id);
  learners.insert(id);
}

uint64_t ProgressTracker::Committed() const {
  if (voters.empty()) return 0;
  std::vector<uint64_t> matched;
  matched.reserve(voters.size());
  for (uint64_t id : voters) {
    const Progress* pr = Get(id);
    matched.push_back(pr ? pr->match : 0);
  }
  std::sort(matched.begin(), matched.end(), std::greater<>());
  return matched[voters.size() / 2];  // the smallest index a majority has
}

bool ProgressTracker::QuorumActive(uint64_t self) const {
  size_t active = 0;
  for (uint64_t id : voters) {
    const Progress* pr = Get(id);
    if (id == self || (pr && pr->recent_active)) ++active;
  }
  return active >= voters.size() / 2 + 1;
}

void ProgressTracker::RecordVote(uint64_t id, bool granted) { votes_.try_emplace(id, granted); }

std::pair<int, int> ProgressTracker::VoteCounts() const {
  int granted = 0, rejected = 0;
  for (uint64_t id : voters) {
    auto it = votes_.find(id);
    if (it == votes_.end()) continue;
    (it->second ? granted : rejected)++;
  }
  return {granted, rejected};
}

VoteResult ProgressTracker::TallyVotes() const {
  auto [granted, rejected] = VoteCounts();
  int n = static_cast<int>(voters.size());
  int quorum = n / 2 + 1;
  if (granted >= quorum) return VoteResult::kWon;
  int missing = n - granted - rejected;
  if (granted + missing >= quorum) return VoteResult::kPending;
  return VoteResult::kLost;
}

raftpb::ConfState ProgressTracker::ConfState() const {
  raftpb::ConfState cs;
  for (uint64_t id : voters) cs.add_voters(id);
  for (uint64_t id : learners) cs.add_learners(id);
  return cs;
}

}  // namespace etcdw::raft
