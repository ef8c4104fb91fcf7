#include "etcdw/raft/raft.h"

#include <algorithm>
#include <stdexcept>

#include "etcdw/common/logging.h"
#include "fatal.h"

namespace etcdw::raft {

using raftpb::Message;
using raftpb::MessageType;

namespace {

raftpb::Message Msg(MessageType type, uint64_t to) {
  raftpb::Message m;
  m.set_type(type);
  m.set_to(to);
  return m;
}
}  // namespace

Status ErrProposalDropped() { return Status(Code::kUnavailable, "raft proposal dropped"); }

bool IsLocalMessage(MessageType t) {
  return t == raftpb::MSG_HUP || t == raftpb::MSG_BEAT || t == raftpb::MSG_UNREACHABLE ||
         t == raftpb::MSG_SNAP_STATUS || t == raftpb::MSG_CHECK_QUORUM;
}

bool IsResponseMessage(MessageType t) {
  return t == raftpb::MSG_APP_RESP || t == raftpb::MSG_VOTE_RESP ||
         t == raftpb::MSG_HEARTBEAT_RESP || t == raftpb::MSG_UNREACHABLE ||
         t == raftpb::MSG_PRE_VOTE_RESP;
}

MessageType VoteResponseType(MessageType t) {
  switch (t) {
    case raftpb::MSG_VOTE:
      return raftpb::MSG_VOTE_RESP;
    case raftpb::MSG_PRE_VOTE:
      return raftpb::MSG_PRE_VOTE_RESP;
    default:
      Fatal("not a vote message: " + std::to_string(t));
  }
}

const char* MessageTypeName(MessageType t) { return raftpb::MessageType_Name(t).c_str(); }

const char* StateName(StateType s) {
  switch (s) {
    case StateType::kFollower:
      return "StateFollower";
    case StateType::kCandidate:
      return "StateCandidate";
    case StateType::kLeader:
      return "StateLeader";
    case StateType::kPreCandidate:
      return "StatePreCandidate";
  }
  return "?";
}

Status Config::Validate() const {
  if (id == kNone) return InvalidArgument("raft: cannot use none as id");
  if (heartbeat_tick <= 0) return InvalidArgument("raft: heartbeat tick must be greater than 0");
  if (election_tick <= heartbeat_tick) {
    return InvalidArgument("raft: election tick must be greater than heartbeat tick");
  }
  if (!storage) return InvalidArgument("raft: storage cannot be nil");
  if (max_inflight_msgs == 0)
    return InvalidArgument("raft: max inflight messages must be greater than 0");
  return Status::Ok();
}

Raft::Raft(const Config& c)
    : id_(c.id),
      log_(c.storage, c.max_committed_size_per_ready),
      prs_(c.max_inflight_msgs),
      max_msg_size_(c.max_size_per_msg),
      max_uncommitted_size_(c.max_uncommitted_entries_size),
      check_quorum_(c.check_quorum),
      pre_vote_(c.pre_vote),
      disable_proposal_forwarding_(c.disable_proposal_forwarding),
      election_timeout_(c.election_tick),
      heartbeat_timeout_(c.heartbeat_tick),
      rng_(c.seed ^ (c.id * 0x9E3779B97F4A7C15ULL)) {
  Status st = c.Validate();
  if (!st.ok()) Fatal(st.message());
  auto init = c.storage->InitialState();
  if (!init.ok()) Fatal("initial state: " + init.status().ToString());
  const auto& [hs, cs] = init.value();
  for (uint64_t v : cs.voters()) prs_.Add(v, false, log_.LastIndex() + 1);
  for (uint64_t l : cs.learners()) prs_.Add(l, true, log_.LastIndex() + 1);
  if (hs.term() != 0 || hs.vote() != 0 || hs.commit() != 0) {
    if (hs.commit() < log_.committed() || hs.commit() > log_.LastIndex()) {
      Fatal("hard state commit " + std::to_string(hs.commit()) + " is out of range [" +
            std::to_string(log_.committed()) + ", " + std::to_string(log_.LastIndex()) + "]");
    }
    log_.CommitTo(hs.commit());
    term_ = hs.term();
    vote_ = hs.vote();
  }
  if (c.applied > 0) log_.AppliedTo(c.applied);
  BecomeFollower(term_, kNone);
}

raftpb::HardState Raft::hard_state() const {
  raftpb::HardState hs;
  hs.set_term(term_);
  hs.set_vote(vote_);
  hs.set_commit(log_.committed());
  return hs;
}

bool Raft::promotable() const {
  const Progress* pr = prs_.Get(id_);
  return pr && !pr->is_learner && !log_.UnstableSnapshot();
}

// ---------------------------------------------------------------------------------------------
// State transitions

void Raft::ResetRandomizedElectionTimeout() {
  std::uniform_int_distribution<int> d(0, election_timeout_ - 1);
  randomized_election_timeout_ = election_timeout_ + d(rng_);
}

void Raft::Reset(uint64_t term) {
  if (term_ != term) {
    term_ = term;
    vote_ = kNone;
  }
  lead_ = kNone;
  election_elapsed_ = 0;
  heartbeat_elapsed_ = 0;
  ResetRandomizedElectionTimeout();
  AbortLeaderTransfer();
  prs_.ResetVotes();
  uint64_t last = log_.LastIndex();
  for (auto& [id, pr] : prs_.progress) {
    bool learner = pr.is_learner;
    pr = Progress(prs_.max_inflight());
    pr.is_learner = learner;
    pr.next = last + 1;
    if (id == id_) pr.match = last;
  }
  pending_conf_index_ = 0;
  uncommitted_size_ = 0;
  reads_.clear();
  read_queue_.clear();
  // Read requests waiting for a commit in the old term are dropped; their callers retry.
  pending_read_index_msgs_.clear();
}

void Raft::BecomeFollower(uint64_t term, uint64_t lead) {
  Reset(term);
  lead_ = lead;
  state_ = StateType::kFollower;
}

void Raft::BecomeCandidate() {
  if (state_ == StateType::kLeader) Fatal("invalid transition [leader -> candidate]");
  Reset(term_ + 1);
  vote_ = id_;
  state_ = StateType::kCandidate;
}

void Raft::BecomePreCandidate() {
  if (state_ == StateType::kLeader) Fatal("invalid transition [leader -> pre-candidate]");
  // A pre-candidate changes neither its term nor its vote.
  prs_.ResetVotes();
  lead_ = kNone;
  state_ = StateType::kPreCandidate;
}

void Raft::BecomeLeader() {
  if (state_ == StateType::kFollower) Fatal("invalid transition [follower -> leader]");
  Reset(term_);
  lead_ = id_;
  state_ = StateType::kLeader;
  if (Progress* self = prs_.Get(id_)) self->BecomeReplicate();
  // Conf changes in the uncommitted tail may be pending: refuse new ones until it is applied.
  pending_conf_index_ = log_.LastIndex();
  // An empty entry of the new term: committing it commits everything before it.
  raftpb::Entry empty;
  if (!AppendEntries({empty})) Fatal("empty entry was dropped");
  log::Info("raft became leader", {log::Hex("id", id_), log::F("term", term_)});
}

// ---------------------------------------------------------------------------------------------
// Ticks

void Raft::Tick() {
  if (state_ == StateType::kLeader) {
    TickHeartbeat();
  } else {
    TickElection();
  }
}

void Raft::TickElection() {
  ++election_elapsed_;
  if (promotable() && PastElectionTimeout()) {
    election_elapsed_ = 0;
    (void)Step(Msg(raftpb::MSG_HUP, kNone));  // local: cannot fail
  }
}

void Raft::TickHeartbeat() {
  ++heartbeat_elapsed_;
  ++election_elapsed_;
  if (election_elapsed_ >= election_timeout_) {
    election_elapsed_ = 0;
    if (check_quorum_) (void)Step(Msg(raftpb::MSG_CHECK_QUORUM, kNone));
    // A transfer that did not finish within an election timeout is abandoned.
    if (state_ == StateType::kLeader && lead_transferee_ != kNone) AbortLeaderTransfer();
  }
  if (state_ != StateType::kLeader) return;
  if (heartbeat_elapsed_ >= heartbeat_timeout_) {
    heartbeat_elapsed_ = 0;
    (void)Step(Msg(raftpb::MSG_BEAT, kNone));
  }
}

// ---------------------------------------------------------------------------------------------
// Elections

bool Raft::HasUnappliedConfChanges() const {
  if (log_.applied() >= log_.committed()) return false;
  auto ents = log_.Slice(log_.applied() + 1, log_.committed() + 1, UINT64_MAX);
  if (!ents.ok()) Fatal("reading unapplied entries: " + ents.status().ToString());
  for (const auto& e : ents.value()) {
    if (e.type() == raftpb::ENTRY_CONF_CHANGE) return true;
  }
  return false;
}

void Raft::Hup(CampaignType t) {
  if (state_ == StateType::kLeader) return;
  if (!promotable()) return;
  if (HasUnappliedConfChanges()) {
    log::Warn("raft cannot campaign: configuration changes are still to be applied",
              {log::Hex("id", id_), log::F("term", term_)});
    return;
  }
  Campaign(t);
}

void Raft::Campaign(CampaignType t) {
  uint64_t term;
  MessageType vote_msg;
  if (t == CampaignType::kPreElection) {
    BecomePreCandidate();
    vote_msg = raftpb::MSG_PRE_VOTE;
    term = term_ + 1;  // the term it would campaign in
  } else {
    BecomeCandidate();
    vote_msg = raftpb::MSG_VOTE;
    term = term_;
  }
  // Its own vote first: a single voter wins at once.
  if (Poll(id_, VoteResponseType(vote_msg), true) == VoteResult::kWon) {
    if (t == CampaignType::kPreElection) {
      Campaign(CampaignType::kElection);
    } else {
      BecomeLeader();
    }
    return;
  }
  for (uint64_t id : prs_.voters) {
    if (id == id_) continue;
    Message m = Msg(vote_msg, id);
    m.set_term(term);
    m.set_index(log_.LastIndex());
    m.set_log_term(log_.LastTerm());
    if (t == CampaignType::kTransfer) m.set_context(kCampaignTransfer);
    Send(std::move(m));
  }
}

VoteResult Raft::Poll(uint64_t id, MessageType t, bool granted) {
  prs_.RecordVote(id, granted);
  return prs_.TallyVotes();
}

// ---------------------------------------------------------------------------------------------
// Step

Status Raft::Step(const Message& m) {
  // Malformed input from a peer is refused before it can touch any state.
  ETCDW_RETURN_IF_ERROR(Validate(m));
  // Term bookkeeping first.
  if (m.term() == 0) {
    // local message (or a forwarded proposal / read index)
  } else if (m.term() > term_) {
    if (m.type() == raftpb::MSG_VOTE || m.type() == raftpb::MSG_PRE_VOTE) {
      bool force = m.context() == kCampaignTransfer;
      bool in_lease = check_quorum_ && lead_ != kNone && election_elapsed_ < election_timeout_;
      // With check-quorum, a member that heard from a leader recently ignores vote requests
      // of higher terms: a disruptive candidate cannot depose a healthy leader.
      if (!force && in_lease) return Status::Ok();
    }
    // A pre-vote never changes our term, nor does a granted pre-vote's answer, which carries
    // the future term (the term moves when the election starts).
    const bool keeps_term =
        m.type() == raftpb::MSG_PRE_VOTE || (m.type() == raftpb::MSG_PRE_VOTE_RESP && !m.reject());
    if (!keeps_term) {
      // Only a leader sends these: it is the leader of the new term.
      const bool from_leader = m.type() == raftpb::MSG_APP || m.type() == raftpb::MSG_HEARTBEAT ||
                               m.type() == raftpb::MSG_SNAP;
      BecomeFollower(m.term(), from_leader ? m.from() : kNone);
    }
  } else if (m.term() < term_) {
    if ((check_quorum_ || pre_vote_) &&
        (m.type() == raftpb::MSG_HEARTBEAT || m.type() == raftpb::MSG_APP)) {
      // A stale leader (partitioned, or behind a pre-vote-blocked election) learns our term from
      // this response and steps down, instead of being ignored forever.
      Send(Msg(raftpb::MSG_APP_RESP, m.from()));
    } else if (m.type() == raftpb::MSG_PRE_VOTE) {
      Message r = Msg(raftpb::MSG_PRE_VOTE_RESP, m.from());
      r.set_term(term_);
      r.set_reject(true);
      Send(std::move(r));
    }
    return Status::Ok();  // otherwise ignored
  }

  switch (m.type()) {
    case raftpb::MSG_HUP:
      Hup(pre_vote_ ? CampaignType::kPreElection : CampaignType::kElection);
      return Status::Ok();
    case raftpb::MSG_VOTE:
    case raftpb::MSG_PRE_VOTE: {
      bool can_vote = vote_ == m.from() || (vote_ == kNone && lead_ == kNone) ||
                      (m.type() == raftpb::MSG_PRE_VOTE && m.term() > term_);
      if (can_vote && log_.IsUpToDate(m.index(), m.log_term())) {
        Message r = Msg(VoteResponseType(m.type()), m.from());
        r.set_term(m.term());  // the candidate's term, so it counts the vote
        Send(std::move(r));
        if (m.type() == raftpb::MSG_VOTE) {
          election_elapsed_ = 0;
          vote_ = m.from();
        }
      } else {
        Message r = Msg(VoteResponseType(m.type()), m.from());
        r.set_term(term_);
        r.set_reject(true);
        Send(std::move(r));
      }
      return Status::Ok();
    }
    default:
      break;
  }
  switch (state_) {
    case StateType::kLeader:
      return StepLeader(m);
    case StateType::kCandidate:
    case StateType::kPreCandidate:
      return StepCandidate(m);
    case StateType::kFollower:
      return StepFollower(m);
  }
  return Status::Ok();
}

Status Raft::StepLeader(const Message& m) {
  switch (m.type()) {
    case raftpb::MSG_BEAT:
      BcastHeartbeat();
      return Status::Ok();
    case raftpb::MSG_CHECK_QUORUM:
      if (!prs_.QuorumActive(id_)) {
        log::Warn("raft leader stepped down: no quorum active",
                  {log::Hex("id", id_), log::F("term", term_)});
        BecomeFollower(term_, kNone);
      }
      for (auto& [id, pr] : prs_.progress) {
        if (id != id_) pr.recent_active = false;
      }
      return Status::Ok();
    case raftpb::MSG_PROP: {
      if (!prs_.Get(id_)) return ErrProposalDropped();  // removed from the configuration
      if (lead_transferee_ != kNone) return ErrProposalDropped();
      std::vector<raftpb::Entry> es(m.entries().begin(), m.entries().end());
      for (size_t i = 0; i < es.size(); ++i) {
        if (es[i].type() != raftpb::ENTRY_CONF_CHANGE) continue;
        if (pending_conf_index_ > log_.applied()) {
          // One membership change at a time: refuse it by turning it into a no-op entry.
          log::Info("raft ignoring a configuration change while one is pending",
                    {log::Hex("id", id_), log::F("pending-index", pending_conf_index_)});
          es[i] = raftpb::Entry();
        } else {
          pending_conf_index_ = log_.LastIndex() + i + 1;
        }
      }
      if (!AppendEntries(std::move(es))) return ErrProposalDropped();
      BcastAppend();
      return Status::Ok();
    }
    case raftpb::MSG_READ_INDEX:
      HandleReadIndexAsLeader(m);
      return Status::Ok();
    default:
      break;
  }

  Progress* pr = prs_.Get(m.from());
  if (!pr) return Status::Ok();  // from a removed member
  switch (m.type()) {
    case raftpb::MSG_APP_RESP: {
      pr->recent_active = true;
      if (m.reject()) {
        uint64_t next_probe = m.reject_hint();
        if (m.log_term() > 0) {
          // Skip the follower's whole conflicting term at once.
          next_probe = log_.FindConflictByTerm(m.reject_hint(), m.log_term()).first;
        }
        if (pr->MaybeDecrTo(m.index(), next_probe)) {
          if (pr->state == ProgressState::kReplicate) pr->BecomeProbe();
          SendAppend(m.from());
        }
      } else {
        bool was_paused = pr->IsPaused();
        // An acknowledged probe also counts when it does not move match (the follower was
        // already up to date): it ends probing.
        if (pr->MaybeUpdate(m.index()) ||
            (pr->match == m.index() && pr->state == ProgressState::kProbe)) {
          if (pr->state == ProgressState::kProbe) {
            pr->BecomeReplicate();
          } else if (pr->state == ProgressState::kSnapshot && pr->match + 1 >= log_.FirstIndex()) {
            // The snapshot (or entries received meanwhile) caught it up enough to replicate.
            pr->BecomeProbe();
            pr->BecomeReplicate();
          } else if (pr->state == ProgressState::kReplicate) {
            pr->inflights.FreeLE(m.index());
          }
          if (MaybeCommit()) {
            ReleasePendingReadIndexMessages();
            BcastAppend();
          } else if (was_paused) {
            SendAppend(m.from());
          }
          // Keep the pipeline full.
          while (MaybeSendAppend(m.from(), false)) {
          }
          if (m.from() == lead_transferee_ && pr->match == log_.LastIndex()) {
            SendTimeoutNow(m.from());
          }
        }
      }
      return Status::Ok();
    }
    case raftpb::MSG_HEARTBEAT_RESP: {
      pr->recent_active = true;
      pr->probe_sent = false;
      // A heartbeat round trip frees one slot of a full window, so a lost MsgApp cannot stall
      // replication forever.
      if (pr->state == ProgressState::kReplicate && pr->inflights.Full())
        pr->inflights.FreeFirstOne();
      // A probing follower is probed even when it seems up to date: its answer is what moves it
      // back to replicate (otherwise it would stay one-message-at-a-time until the next
      // proposal).
      if (pr->match < log_.LastIndex() || pr->state == ProgressState::kProbe) {
        SendAppend(m.from());
      }
      if (m.context().empty()) return Status::Ok();
      auto it = reads_.find(m.context());
      if (it == reads_.end()) return Status::Ok();
      it->second.acks.insert(m.from());
      size_t acks = 0;
      for (uint64_t v : prs_.voters) acks += it->second.acks.count(v);
      if (acks < prs_.voters.size() / 2 + 1) return Status::Ok();
      // Confirmed: answer this request and every earlier one.
      while (!read_queue_.empty()) {
        std::string ctx = read_queue_.front();
        read_queue_.pop_front();
        PendingRead pending = std::move(reads_[ctx]);
        reads_.erase(ctx);
        RespondToReadIndex(pending.req, pending.index);
        if (ctx == m.context()) break;
      }
      return Status::Ok();
    }
    case raftpb::MSG_SNAP_STATUS:
      if (pr->state != ProgressState::kSnapshot) return Status::Ok();
      if (!m.reject()) {
        pr->BecomeProbe();
      } else {
        // The snapshot did not arrive: probe from where it was known to be.
        pr->pending_snapshot = 0;
        pr->BecomeProbe();
      }
      // Wait for a heartbeat response before probing again.
      pr->probe_sent = true;
      return Status::Ok();
    case raftpb::MSG_UNREACHABLE:
      if (pr->state == ProgressState::kReplicate) pr->BecomeProbe();
      return Status::Ok();
    case raftpb::MSG_TRANSFER_LEADER: {
      if (pr->is_learner) return Status::Ok();
      uint64_t transferee = m.from();
      if (lead_transferee_ != kNone) {
        if (lead_transferee_ == transferee) return Status::Ok();  // already in progress
        AbortLeaderTransfer();
      }
      if (transferee == id_) return Status::Ok();  // already leader
      election_elapsed_ = 0;  // the transfer must finish within an election timeout
      lead_transferee_ = transferee;
      if (pr->match == log_.LastIndex()) {
        SendTimeoutNow(transferee);
      } else {
        SendAppend(transferee);
      }
      return Status::Ok();
    }
    default:
      return Status::Ok();
  }
}

Status Raft::StepCandidate(const Message& m) {
  MessageType my_vote_resp =
      state_ == StateType::kPreCandidate ? raftpb::MSG_PRE_VOTE_RESP : raftpb::MSG_VOTE_RESP;
  switch (m.type()) {
    case raftpb::MSG_PROP:
      return ErrProposalDropped();
    case raftpb::MSG_APP:
      BecomeFollower(m.term(), m.from());
      HandleAppendEntries(m);
      return Status::Ok();
    case raftpb::MSG_HEARTBEAT:
      BecomeFollower(m.term(), m.from());
      HandleHeartbeat(m);
      return Status::Ok();
    case raftpb::MSG_SNAP:
      BecomeFollower(m.term(), m.from());
      HandleSnapshot(m);
      return Status::Ok();
    case raftpb::MSG_TIMEOUT_NOW:
      return Status::Ok();  // a candidate ignores it
    default:
      break;
  }
  if (m.type() == my_vote_resp) {
    switch (Poll(m.from(), m.type(), !m.reject())) {
      case VoteResult::kWon:
        if (state_ == StateType::kPreCandidate) {
          Campaign(CampaignType::kElection);
        } else {
          BecomeLeader();
          BcastAppend();
        }
        break;
      case VoteResult::kLost:
        // A rejected pre-vote may carry a higher term; a lost vote keeps ours.
        BecomeFollower(term_, kNone);
        break;
      case VoteResult::kPending:
        break;
    }
  }
  return Status::Ok();
}

Status Raft::StepFollower(const Message& m) {
  switch (m.type()) {
    case raftpb::MSG_PROP:
      if (lead_ == kNone || disable_proposal_forwarding_) return ErrProposalDropped();
      Forward(m);
      return Status::Ok();
    case raftpb::MSG_APP:
      election_elapsed_ = 0;
      lead_ = m.from();
      HandleAppendEntries(m);
      return Status::Ok();
    case raftpb::MSG_HEARTBEAT:
      election_elapsed_ = 0;
      lead_ = m.from();
      HandleHeartbeat(m);
      return Status::Ok();
    case raftpb::MSG_SNAP:
      election_elapsed_ = 0;
      lead_ = m.from();
      HandleSnapshot(m);
      return Status::Ok();
    case raftpb::MSG_TRANSFER_LEADER:
      if (lead_ == kNone) return Status::Ok();
      Forward(m);
      return Status::Ok();
    case raftpb::MSG_TIMEOUT_NOW:
      // Leadership transfer: campaign at once, without pre-vote (no partition to recover from).
      Hup(CampaignType::kTransfer);
      return Status::Ok();
    case raftpb::MSG_READ_INDEX:
      if (lead_ == kNone) return ErrProposalDropped();
      Forward(m);
      return Status::Ok();
    case raftpb::MSG_READ_INDEX_RESP:
      if (m.entries_size() != 1) return Status::Ok();
      read_states.push_back(ReadState{m.index(), m.entries(0).data()});
      return Status::Ok();
    default:
      return Status::Ok();
  }
}

// ---------------------------------------------------------------------------------------------
// Replication

Status Raft::Validate(const Message& m) {
  switch (m.type()) {
    case raftpb::MSG_PROP:
      if (m.entries_size() == 0) return InvalidArgument("raft: proposal without entries");
      break;
    case raftpb::MSG_VOTE:
    case raftpb::MSG_PRE_VOTE:
    case raftpb::MSG_VOTE_RESP:
    case raftpb::MSG_PRE_VOTE_RESP:
      // Always sent with a term; without one they would be taken for local messages.
      if (m.term() == 0) return InvalidArgument("raft: vote message without a term");
      break;
    case raftpb::MSG_APP:
      // Entries must directly follow (index, log_term): the log code relies on it.
      for (int i = 0; i < m.entries_size(); ++i) {
        if (m.entries(i).index() != m.index() + 1 + static_cast<uint64_t>(i)) {
          return InvalidArgument("raft: MsgApp entries are not contiguous after its index");
        }
      }
      break;
    default:
      break;
  }
  return Status::Ok();
}

void Raft::Forward(const Message& m) {
  Message fwd = m;
  fwd.set_to(lead_);
  fwd.set_term(0);  // Send stamps our term where the message type carries one
  Send(std::move(fwd));
}

void Raft::Send(Message m) {
  if (m.from() == kNone) m.set_from(id_);
  MessageType t = m.type();
  if (t == raftpb::MSG_VOTE || t == raftpb::MSG_VOTE_RESP || t == raftpb::MSG_PRE_VOTE ||
      t == raftpb::MSG_PRE_VOTE_RESP) {
    if (m.term() == 0) Fatal("vote message sent without a term");
  } else {
    if (m.term() != 0) Fatal("term set on a non-vote message");
    // Proposals and read requests forwarded to the leader travel without a term: the leader
    // treats them as local.
    if (t != raftpb::MSG_PROP && t != raftpb::MSG_READ_INDEX) m.set_term(term_);
  }
  msgs.push_back(std::move(m));
}

bool Raft::MaybeSendAppend(uint64_t to, bool send_if_empty) {
  Progress* pr = prs_.Get(to);
  if (!pr || pr->IsPaused()) return false;
  Message m = Msg(raftpb::MSG_APP, to);
  auto term = log_.Term(pr->next - 1);
  auto ents = log_.Entries(pr->next, max_msg_size_);
  if (ents.ok() && ents->empty() && !send_if_empty) return false;
  if (!term.ok() || !ents.ok()) {
    // The entries the follower needs are compacted: send a snapshot instead.
    if (!pr->recent_active) return false;
    auto snap = log_.Snapshot();
    if (!snap.ok()) {
      if (snap.status().code() == Code::kUnavailable) return false;  // try again later
      Fatal("snapshot: " + snap.status().ToString());
    }
    if (snap->metadata().index() == 0) Fatal("need a non-empty snapshot");
    m.set_type(raftpb::MSG_SNAP);
    *m.mutable_snapshot() = snap.value();
    pr->BecomeSnapshot(snap->metadata().index());
    log::Info("raft sending snapshot",
              {log::Hex("to", to), log::F("snapshot-index", snap->metadata().index())});
  } else {
    m.set_index(pr->next - 1);
    m.set_log_term(term.value());
    for (auto& e : ents.value()) *m.add_entries() = std::move(e);
    m.set_commit(log_.committed());
    uint64_t last = m.entries_size() ? m.entries(m.entries_size() - 1).index() : 0;
    pr->SentEntries(last, m.entries_size() > 0);
  }
  Send(std::move(m));
  return true;
}

void Raft::BcastAppend() {
  for (auto& [id, pr] : prs_.progress) {
    if (id != id_) SendAppend(id);
  }
}

void Raft::SendHeartbeat(uint64_t to, const std::string& ctx) {
  // A follower must not commit beyond what it has: send at most its match index.
  const Progress* pr = prs_.Get(to);
  Message m = Msg(raftpb::MSG_HEARTBEAT, to);
  m.set_commit(std::min(pr ? pr->match : 0, log_.committed()));
  if (!ctx.empty()) m.set_context(ctx);
  Send(std::move(m));
}

void Raft::BcastHeartbeat() {
  std::string ctx = read_queue_.empty() ? std::string() : read_queue_.back();
  BcastHeartbeatWithCtx(ctx);
}

void Raft::BcastHeartbeatWithCtx(const std::string& ctx) {
  for (auto& [id, pr] : prs_.progress) {
    if (id != id_) SendHeartbeat(id, ctx);
  }
}

void Raft::SendTimeoutNow(uint64_t to) { Send(Msg(raftpb::MSG_TIMEOUT_NOW, to)); }

bool Raft::MaybeCommit() { return log_.MaybeCommit(prs_.Committed(), term_); }

bool Raft::AppendEntries(std::vector<raftpb::Entry> es) {
  uint64_t li = log_.LastIndex();
  uint64_t size = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    es[i].set_term(term_);
    es[i].set_index(li + 1 + i);
    size += es[i].data().size();
  }
  // Bound the uncommitted tail so an unreachable quorum cannot grow memory without limit. An
  // entry always fits when nothing is uncommitted (however large), and empty entries always fit.
  if (max_uncommitted_size_ > 0 && uncommitted_size_ > 0 && size > 0 &&
      uncommitted_size_ + size > max_uncommitted_size_) {
    return false;
  }
  uncommitted_size_ += size;
  li = log_.Append(es);
  if (Progress* self = prs_.Get(id_)) self->MaybeUpdate(li);
  MaybeCommit();
  return true;
}

void Raft::ReduceUncommittedSize(const std::vector<raftpb::Entry>& ents) {
  if (uncommitted_size_ == 0) return;  // followers, and leaders with nothing in flight
  uint64_t size = 0;
  for (const auto& e : ents) size += e.data().size();
  // Entries of an earlier term were never counted: never go below zero.
  uncommitted_size_ = size > uncommitted_size_ ? 0 : uncommitted_size_ - size;
}

void Raft::HandleAppendEntries(const Message& m) {
  if (m.index() < log_.committed()) {
    Message r = Msg(raftpb::MSG_APP_RESP, m.from());
    r.set_index(log_.committed());
    Send(std::move(r));
    return;
  }
  std::vector<raftpb::Entry> ents(m.entries().begin(), m.entries().end());
  if (auto last = log_.MaybeAppend(m.index(), m.log_term(), m.commit(), ents)) {
    Message r = Msg(raftpb::MSG_APP_RESP, m.from());
    r.set_index(*last);
    Send(std::move(r));
    return;
  }
  // Reject with a hint: the largest index <= m.index whose term is <= m.log_term, so the
  // leader can skip the conflicting term instead of probing one entry at a time.
  uint64_t hint_index = std::min(m.index(), log_.LastIndex());
  auto [hi, ht] = log_.FindConflictByTerm(hint_index, m.log_term());
  Message r = Msg(raftpb::MSG_APP_RESP, m.from());
  r.set_index(m.index());
  r.set_reject(true);
  r.set_reject_hint(hi);
  r.set_log_term(ht);
  Send(std::move(r));
}

void Raft::HandleHeartbeat(const Message& m) {
  log_.CommitTo(m.commit());
  Message r = Msg(raftpb::MSG_HEARTBEAT_RESP, m.from());
  r.set_context(m.context());
  Send(std::move(r));
}

void Raft::HandleSnapshot(const Message& m) {
  Message r = Msg(raftpb::MSG_APP_RESP, m.from());
  if (Restore(m.snapshot())) {
    log::Info("raft restored snapshot",
              {log::Hex("id", id_), log::F("index", m.snapshot().metadata().index()),
               log::F("term", m.snapshot().metadata().term())});
    r.set_index(log_.LastIndex());
  } else {
    r.set_index(log_.committed());
  }
  Send(std::move(r));
}

bool Raft::Restore(const raftpb::Snapshot& s) {
  const auto& md = s.metadata();
  if (md.index() <= log_.committed()) return false;
  if (state_ != StateType::kFollower) {
    // Defense in depth: only followers install snapshots.
    BecomeFollower(term_ + 1, kNone);
    return false;
  }
  bool found = false;
  for (uint64_t v : md.conf_state().voters()) found |= v == id_;
  for (uint64_t l : md.conf_state().learners()) found |= l == id_;
  if (!found) return false;  // a snapshot of a configuration without this member
  if (log_.MatchTerm(md.index(), md.term())) {
    // Already have the entries: just fast-forward the commit index.
    log_.CommitTo(md.index());
    return false;
  }
  log_.Restore(s);
  // The membership comes from the snapshot.
  prs_.progress.clear();
  prs_.voters.clear();
  prs_.learners.clear();
  for (uint64_t v : md.conf_state().voters()) prs_.Add(v, false, log_.LastIndex() + 1);
  for (uint64_t l : md.conf_state().learners()) prs_.Add(l, true, log_.LastIndex() + 1);
  if (Progress* self = prs_.Get(id_)) self->MaybeUpdate(self->next - 1);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Membership

raftpb::ConfState Raft::ApplyConfChange(const raftpb::ConfChange& cc) {
  uint64_t id = cc.node_id();
  if (id != kNone) {
    switch (cc.type()) {
      case raftpb::CONF_CHANGE_ADD_NODE:
        if (prs_.Get(id)) {
          prs_.MakeVoter(id);  // promotes a learner; no-op for a voter
        } else {
          prs_.Add(id, false, log_.LastIndex());
        }
        break;
      case raftpb::CONF_CHANGE_ADD_LEARNER_NODE:
        if (prs_.Get(id)) {
          prs_.MakeLearner(id);
        } else {
          prs_.Add(id, true, log_.LastIndex());
        }
        break;
      case raftpb::CONF_CHANGE_REMOVE_NODE:
        prs_.Remove(id);
        break;
      default:  // CONF_CHANGE_UPDATE_NODE (new URLs): no Raft effect
        break;
    }
  }
  raftpb::ConfState cs = prs_.ConfState();
  if (state_ != StateType::kLeader) return cs;
  const Progress* self = prs_.Get(id_);
  if (!self || self->is_learner) {
    // This leader was removed (or demoted): step down so the others elect a new one.
    BecomeFollower(term_, kNone);
    return cs;
  }
  if (lead_transferee_ != kNone && !prs_.voters.count(lead_transferee_)) AbortLeaderTransfer();
  // The quorum may have changed: commit what it allows, and feed any new member.
  if (MaybeCommit()) {
    BcastAppend();
  } else {
    for (auto& [pid, pr] : prs_.progress) {
      if (pid != id_) MaybeSendAppend(pid, false);
    }
  }
  return cs;
}

Status Raft::Bootstrap(const std::vector<raftpb::ConfChange>& peers) {
  if (peers.empty()) return InvalidArgument("raft: must provide at least one peer to bootstrap");
  if (log_.LastIndex() != 0) return FailedPrecondition("raft: can't bootstrap a nonempty log");
  BecomeFollower(1, kNone);
  std::vector<raftpb::Entry> ents;
  for (size_t i = 0; i < peers.size(); ++i) {
    raftpb::Entry& e = ents.emplace_back();
    e.set_type(raftpb::ENTRY_CONF_CHANGE);
    e.set_term(1);
    e.set_index(i + 1);
    e.set_data(peers[i].SerializeAsString());
  }
  log_.Append(ents);
  log_.CommitTo(ents.size());
  for (const auto& cc : peers) ApplyConfChange(cc);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// ReadIndex

bool Raft::CommittedEntryInCurrentTerm() const {
  return log_.TermOrZero(log_.committed()) == term_;
}

void Raft::RespondToReadIndex(const Message& req, uint64_t index) {
  if (req.from() == kNone || req.from() == id_) {
    read_states.push_back(ReadState{index, req.entries(0).data()});
    return;
  }
  Message r = Msg(raftpb::MSG_READ_INDEX_RESP, req.from());
  r.set_index(index);
  *r.mutable_entries() = req.entries();
  Send(std::move(r));
}

void Raft::HandleReadIndexAsLeader(const Message& m) {
  if (m.entries_size() != 1) return;
  // A single voter is a quorum by itself (learners never confirm leadership).
  if (prs_.IsSingleton()) {
    RespondToReadIndex(m, log_.committed());
    return;
  }
  // A new leader does not know the commit index of its term until it commits an entry of
  // its own: postpone the request until then.
  if (!CommittedEntryInCurrentTerm()) {
    pending_read_index_msgs_.push_back(m);
    return;
  }
  const std::string& ctx = m.entries(0).data();
  if (reads_.count(ctx)) return;
  PendingRead& p = reads_[ctx];
  p.req = m;
  p.index = log_.committed();
  p.acks.insert(id_);
  read_queue_.push_back(ctx);
  BcastHeartbeatWithCtx(ctx);
}

void Raft::ReleasePendingReadIndexMessages() {
  if (!CommittedEntryInCurrentTerm()) return;
  auto pending = std::move(pending_read_index_msgs_);
  pending_read_index_msgs_.clear();
  for (const auto& m : pending) HandleReadIndexAsLeader(m);
}

}  // namespace etcdw::raft
