// What a leader knows about each member's log (Raft's nextIndex/matchIndex), with flow control:
//  Probe      one MsgApp at a time until the follower's position is known
//  Replicate  optimistic pipelining, bounded by a window of in-flight messages
//  Snapshot   replication paused while the follower installs a snapshot
// and the membership (voters, learners) with its quorum computations.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "etcdw/raft.pb.h"

namespace etcdw::raft {

// The last indexes of the MsgApps sent and not yet acknowledged, oldest first (a ring buffer).
class Inflights {
 public:
  explicit Inflights(size_t size) : size_(size) {}
  void Add(uint64_t last_index);
  // Acknowledged up to `to`: frees every message whose last index is <= to.
  void FreeLE(uint64_t to);
  void FreeFirstOne();
  bool Full() const { return count_ == size_; }
  size_t Count() const { return count_; }
  void Reset();

 private:
  size_t size_;
  size_t start_ = 0;
  size_t count_ = 0;
  std::vector<uint64_t> buffer_;  // size_ slots, allocated on first use
};

enum class ProgressState { kProbe, kReplicate, kSnapshot };
const char* ProgressStateName(ProgressState s);

struct Progress {
  explicit Progress(size_t max_inflight) : inflights(max_inflight) {}

  uint64_t match = 0;  // highest index known to be replicated
  uint64_t next = 0;   // next index to send
  ProgressState state = ProgressState::kProbe;
  uint64_t pending_snapshot = 0;  // index of the snapshot being sent (kSnapshot)
  bool recent_active = false;     // heard from within the last election timeout
  bool probe_sent = false;        // kProbe: a probe is out, pause until answered
  Inflights inflights;
  bool is_learner = false;

  void BecomeProbe();
  void BecomeReplicate();
  void BecomeSnapshot(uint64_t snapshot_index);
  // An acknowledgement up to n. Returns whether match moved.
  bool MaybeUpdate(uint64_t n);
  // A rejection of the MsgApp at `rejected`; `match_hint` is the follower's hint. Returns
  // whether next moved (false for stale rejections).
  bool MaybeDecrTo(uint64_t rejected, uint64_t match_hint);
  // Records that entries up to `last` were sent (pipelining / probe accounting).
  void SentEntries(uint64_t last, bool any);
  bool IsPaused() const;
  std::string ToString() const;

 private:
  void ResetState(ProgressState s);
};

enum class VoteResult { kPending, kLost, kWon };

class ProgressTracker {
 public:
  explicit ProgressTracker(size_t max_inflight) : max_inflight_(max_inflight) {}

  std::map<uint64_t, Progress> progress;  // every voter and learner
  std::set<uint64_t> voters;
  std::set<uint64_t> learners;

  Progress* Get(uint64_t id);
  const Progress* Get(uint64_t id) const;
  // Adds a member (voter or learner) with fresh progress, next = `next`.
  void Add(uint64_t id, bool learner, uint64_t next);
  void Remove(uint64_t id);
  void MakeVoter(uint64_t id);
  void MakeLearner(uint64_t id);

  // A single voter (whatever the learners): its own vote and ack are a quorum.
  bool IsSingleton() const { return voters.size() == 1; }
  // The largest index replicated on a majority of voters (0 with no voters).
  uint64_t Committed() const;
  // Whether a majority of voters has been active recently (this member counts).
  bool QuorumActive(uint64_t self) const;
  void ResetVotes() { votes_.clear(); }
  void RecordVote(uint64_t id, bool granted);
  VoteResult TallyVotes() const;
  std::pair<int, int> VoteCounts() const;  // granted, rejected (voters only)

  raftpb::ConfState ConfState() const;
  size_t max_inflight() const { return max_inflight_; }

 private:
  size_t max_inflight_;
  std::map<uint64_t, bool> votes_;
};

}  // namespace etcdw::raft
