// ReadIndex (linearizable reads, the "safe" variant): the leader records its commit index and
// answers once a heartbeat round confirmed it is still leader; a single voter answers at once;
// followers forward the request; a new leader first commits an entry of its own term.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "raft/raft_test_util.h"

namespace etcdw::raft {
namespace {

using namespace rafttest;  // NOLINT(google-build-using-namespace)

Message ReadIndex(uint64_t id, const std::string& ctx) {
  return Msg({.type = raftpb::MSG_READ_INDEX, .from = id, .to = id, .entries = {E(0, 0, ctx)}});
}

// Whichever member asks, the answer is the leader's commit index at the time of the request.
TEST(ReadIndex, SafeFromAnyMember) {
  Network nt = Network::Of(3);
  nt.Send(Hup(1));
  struct Case {
    uint64_t id;
    int proposals;
    uint64_t want_index;
    std::string ctx;
  };
  std::vector<Case> cases = {{1, 10, 11, "ctx1"}, {2, 10, 21, "ctx2"}, {3, 10, 31, "ctx3"},
                             {1, 10, 41, "ctx4"}, {2, 10, 51, "ctx5"}, {3, 10, 61, "ctx6"}};
  for (const auto& c : cases) {
    for (int j = 0; j < c.proposals; ++j) nt.Send(Prop(1));
    nt.Send(ReadIndex(c.id, c.ctx));
    Raft& r = nt[c.id];
    ASSERT_EQ(r.read_states.size(), 1u) << c.ctx;
    EXPECT_EQ(r.read_states[0].index, c.want_index) << c.ctx;
    EXPECT_EQ(r.read_states[0].request_ctx, c.ctx);
    r.read_states.clear();
    for (uint64_t other : {1, 2, 3}) EXPECT_TRUE(nt[other].read_states.empty());
  }
}

TEST(ReadIndex, SingleMemberAnswersAtOnce) {
  auto r = NewRaft(1, {1});
  ASSERT_TRUE(r->Step(Hup(1)).ok());
  ASSERT_TRUE(r->Step(Prop(1)).ok());
  ReadMsgs(*r);
  ASSERT_TRUE(r->Step(ReadIndex(1, "ctx")).ok());
  ASSERT_EQ(r->read_states.size(), 1u);
  EXPECT_EQ(r->read_states[0].index, 2u);
  EXPECT_EQ(r->read_states[0].request_ctx, "ctx");
  EXPECT_TRUE(r->msgs.empty());
}

// A single voter with learners answers at once too: learners take no part in confirming
// leadership, so waiting for their heartbeat responses only delays (or, with learners down,
// blocks) reads.
TEST(ReadIndex, SingleVoterWithLearnersAnswersAtOnce) {
  auto r = NewRaft(1, {1}, {.learners = {2}});
  ASSERT_TRUE(r->Step(Hup(1)).ok());
  ASSERT_EQ(r->state(), StateType::kLeader);
  ReadMsgs(*r);
  ASSERT_TRUE(r->Step(ReadIndex(1, "ctx")).ok());
  ASSERT_EQ(r->read_states.size(), 1u);
  EXPECT_EQ(r->read_states[0].index, 1u);
}

// With several voters the answer waits for heartbeat responses from a quorum carrying the
// request's context; other responses, and learners' responses, do not count.
TEST(ReadIndex, WaitsForHeartbeatQuorum) {
  auto r = NewRaft(1, {1, 2, 3, 4, 5}, {.learners = {6}});
  r->BecomeCandidate();
  r->BecomeLeader();
  for (uint64_t id : {2, 3, 4, 5}) {
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP_RESP,
                             .from = id,
                             .to = 1,
                             .term = r->term(),
                             .index = r->log().LastIndex()}))
                    .ok());
  }
  ASSERT_EQ(r->log().committed(), 1u);
  ReadMsgs(*r);
  ASSERT_TRUE(r->Step(ReadIndex(1, "ctx")).ok());
  auto hbs = ReadMsgs(*r);
  ASSERT_EQ(hbs.size(), 5u);  // voters and the learner
  for (const auto& m : hbs) {
    EXPECT_EQ(m.type(), raftpb::MSG_HEARTBEAT);
    EXPECT_EQ(m.context(), "ctx");
  }
  EXPECT_TRUE(r->read_states.empty());
  // The commit index moves on meanwhile: the answer is still the index at request time.
  ASSERT_TRUE(r->Step(Prop(1)).ok());
  ASSERT_TRUE(
      r->Step(
           Msg({.type = raftpb::MSG_APP_RESP, .from = 2, .to = 1, .term = r->term(), .index = 2}))
          .ok());
  ASSERT_TRUE(
      r->Step(
           Msg({.type = raftpb::MSG_APP_RESP, .from = 3, .to = 1, .term = r->term(), .index = 2}))
          .ok());
  ASSERT_EQ(r->log().committed(), 2u);
  auto hb_resp = [&](uint64_t from, const std::string& ctx) {
    ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP,
                             .from = from,
                             .to = 1,
                             .term = r->term(),
                             .context = ctx}))
                    .ok());
  };
  hb_resp(6, "ctx");      // a learner
  hb_resp(2, "");         // an ordinary heartbeat
  hb_resp(3, "another");  // another request
  hb_resp(2, "ctx");
  hb_resp(2, "ctx");  // duplicates count once
  EXPECT_TRUE(r->read_states.empty());
  hb_resp(4, "ctx");
  ASSERT_EQ(r->read_states.size(), 1u);
  EXPECT_EQ(r->read_states[0].index, 1u);
  EXPECT_EQ(r->read_states[0].request_ctx, "ctx");
  hb_resp(5, "ctx");  // late: nothing more
  EXPECT_EQ(r->read_states.size(), 1u);
}

// Confirming a later request confirms the earlier ones too (the heartbeats carry the latest
// context).
TEST(ReadIndex, LaterConfirmationAnswersEarlierRequests) {
  auto r = NewRaft(1, {1, 2, 3});
  r->BecomeCandidate();
  r->BecomeLeader();
  ASSERT_TRUE(
      r->Step(
           Msg({.type = raftpb::MSG_APP_RESP, .from = 2, .to = 1, .term = r->term(), .index = 1}))
          .ok());
  ReadMsgs(*r);
  ASSERT_TRUE(r->Step(ReadIndex(1, "a")).ok());
  ASSERT_TRUE(r->Step(ReadIndex(1, "b")).ok());
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP,
                           .from = 3,
                           .to = 1,
                           .term = r->term(),
                           .context = "b"}))
                  .ok());
  ASSERT_EQ(r->read_states.size(), 2u);
  EXPECT_EQ(r->read_states[0].request_ctx, "a");
  EXPECT_EQ(r->read_states[1].request_ctx, "b");
}

// A follower forwards the request to its leader and gets the answer back; without a leader the
// request is dropped.
TEST(ReadIndex, FollowerForwards) {
  auto r = NewRaft(2, {1, 2, 3});
  EXPECT_FALSE(r->Step(ReadIndex(2, "ctx")).ok());
  EXPECT_TRUE(r->msgs.empty());
  r->BecomeFollower(1, 1);
  ASSERT_TRUE(r->Step(ReadIndex(2, "ctx")).ok());
  auto msgs = ReadMsgs(*r);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].type(), raftpb::MSG_READ_INDEX);
  EXPECT_EQ(msgs[0].to(), 1u);
  EXPECT_EQ(msgs[0].from(), 2u);
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_READ_INDEX_RESP,
                           .from = 1,
                           .to = 2,
                           .term = 1,
                           .index = 7,
                           .entries = {E(0, 0, "ctx")}}))
                  .ok());
  ASSERT_EQ(r->read_states.size(), 1u);
  EXPECT_EQ(r->read_states[0].index, 7u);
  EXPECT_EQ(r->read_states[0].request_ctx, "ctx");
}

// A new leader does not know the commit index of its term until it commits an entry in it: it
// postpones read requests until then, and answers them afterwards.
TEST(ReadIndex, NewLeaderPostponesUntilItCommitsInItsTerm) {
  struct Node {
    uint64_t id, committed, applied, compact;
  };
  std::vector<TestRaft> slots;
  for (const Node& n : std::vector<Node>{{1, 1, 1, 0}, {2, 2, 2, 2}, {3, 2, 2, 2}}) {
    auto s = std::make_unique<TestStorage>(std::vector<uint64_t>{1, 2, 3});
    ASSERT_TRUE(s->Append(Terms(1, {1, 1})).ok());
    s->SetHardState(HS(1, 0, n.committed));
    if (n.compact) {
      ASSERT_TRUE(s->Compact(n.compact).ok());
    }
    Config c = MakeConfig(n.id, s.get(), {});
    c.applied = n.applied;
    TestRaft t;
    t.storage = std::move(s);
    t.raft = std::make_unique<Raft>(c);
    slots.push_back(std::move(t));
  }
  Network nt(std::move(slots));
  nt.Ignore(raftpb::MSG_APP);  // 1 cannot commit in its term yet
  nt.Send(Hup(1));
  Raft& lead = nt[1];
  ASSERT_EQ(lead.state(), StateType::kLeader);
  nt.Send(ReadIndex(1, "ctx"));
  EXPECT_TRUE(lead.read_states.empty());
  nt.Recover();
  nt.Send(Msg({.type = raftpb::MSG_BEAT, .from = 1, .to = 1}));
  nt.Send(Prop(1));
  ASSERT_EQ(lead.log().committed(), 4u);
  EXPECT_EQ(lead.log().TermOrZero(4), lead.term());
  // The postponed request was answered once the entry of its term was committed, with the
  // commit index of that moment (3: the empty entry; the proposal committed later).
  ASSERT_EQ(lead.read_states.size(), 1u);
  EXPECT_GE(lead.read_states[0].index, 3u);
  EXPECT_EQ(lead.read_states[0].request_ctx, "ctx");
  nt.Send(ReadIndex(1, "ctx"));
  ASSERT_EQ(lead.read_states.size(), 2u);
  EXPECT_EQ(lead.read_states[1].index, 4u);
}

// A leader that loses leadership drops its pending reads (the callers retry).
TEST(ReadIndex, PendingReadsDroppedOnStepDown) {
  auto r = NewRaft(1, {1, 2, 3});
  r->BecomeCandidate();
  r->BecomeLeader();
  ASSERT_TRUE(
      r->Step(
           Msg({.type = raftpb::MSG_APP_RESP, .from = 2, .to = 1, .term = r->term(), .index = 1}))
          .ok());
  ASSERT_TRUE(r->Step(ReadIndex(1, "ctx")).ok());
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_APP, .from = 3, .to = 1, .term = 5})).ok());
  ASSERT_EQ(r->state(), StateType::kFollower);
  ASSERT_TRUE(r->Step(Msg({.type = raftpb::MSG_HEARTBEAT_RESP,
                           .from = 2,
                           .to = 1,
                           .term = 5,
                           .context = "ctx"}))
                  .ok());
  EXPECT_TRUE(r->read_states.empty());
}

}  // namespace
}  // namespace etcdw::raft
