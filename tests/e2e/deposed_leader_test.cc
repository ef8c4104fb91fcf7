// A leader that others have replaced without its knowing must not renew leases: the new leader's
// lessor runs expiry from its own promotion on, so a renewal the old one answered could let a
// lease expire before the TTL its client was told (the fault campaign found this after a paused
// leader resumed; EtcdServer::RenewAsLeader now confirms leadership with a ReadIndex round). Here
// the scene is forced: the leader is cut off from the others through the peer proxy and paused
// at once, so that it neither steps down nor hears of its successor; once another leads, it
// resumes, still believing itself leader of its term, and a client asks it to renew.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>
#include <vector>

#include "await.h"
#include "e2e/peer_proxy.h"
#include "servers.h"

namespace etcdw::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testsupport::WaitUntil;

// One keep-alive on a stream of its own to `m`: the TTL answered, or -1 when no answer came
// within `timeout` or the stream failed.
int64_t KeepAliveOnce(Member& m, int64_t lease, milliseconds timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  auto stream = m.client().lease->LeaseKeepAlive(&ctx);
  etcdserverpb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse resp;
  if (!stream->Write(req) || !stream->Read(&resp)) return -1;
  ctx.TryCancel();
  return resp.ttl();
}

uint64_t LeaderSeenBy(Member& m) {
  etcdserverpb::StatusRequest req;
  etcdserverpb::StatusResponse resp;
  if (!m.client().maintenance->Status(Ctx(milliseconds(500)).get(), req, &resp).ok()) return 0;
  return resp.leader();
}

// Three members whose peer links run through a proxy, and their leader: the member that will be
// replaced without its knowing.
class DeposedLeaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(proxy_.ok());
    for (int i = 0; i < kMembers; ++i) {
      cluster_.member(i).set_advertised_peer_port(proxy_.port(i));
      proxy_.SetTarget(i, cluster_.member(i).peer_port());
    }
    ASSERT_TRUE(cluster_.StartAll()) << cluster_.LogTails();
    old_ = cluster_.WaitForLeader();
    ASSERT_GE(old_, 0) << cluster_.LogTails();
    for (int i = 0; i < kMembers; ++i) {
      etcdserverpb::StatusRequest req;
      etcdserverpb::StatusResponse resp;
      ASSERT_TRUE(cluster_.member(i).client().maintenance->Status(Ctx().get(), req, &resp).ok());
      ids_.push_back(resp.header().member_id());
      proxy_.SetMemberId(i, ids_.back());
      if (i != old_) others_.push_back(i);
    }
  }

  // Whether one of the others reports a leader other than the old one; waits up to 20 s.
  bool OthersElectANewLeader() {
    return WaitUntil(
        [&] {
          for (int i : others_) {
            const uint64_t leader = LeaderSeenBy(cluster_.member(i));
            if (leader != 0 && leader != ids_[static_cast<size_t>(old_)]) return true;
          }
          return false;
        },
        seconds(20), milliseconds(20));
  }

  static constexpr int kMembers = 3;
  PeerProxy proxy_{kMembers};
  TestCluster cluster_{kMembers};
  int old_ = -1;  // the leader at the start
  std::vector<uint64_t> ids_;
  std::vector<int> others_;
};

TEST_F(DeposedLeaderTest, ALeaderReplacedWithoutItsKnowingRenewsNoLease) {
  Member& deposed = cluster_.member(old_);

  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(30);
  etcdserverpb::LeaseGrantResponse granted;
  ASSERT_TRUE(deposed.client().lease->LeaseGrant(Ctx().get(), grant, &granted).ok());
  ASSERT_EQ(KeepAliveOnce(deposed, granted.id(), seconds(5)), 30) << "the leader renews";
  // The client's channel is connected before the pause.

  proxy_.Cut({old_}, others_);
  deposed.process().Signal(SIGSTOP);
  const bool replaced = OthersElectANewLeader();
  deposed.process().Signal(SIGCONT);
  ASSERT_TRUE(replaced) << "the others elected no leader\n" << cluster_.LogTails();

  // Cut off, it can neither confirm its leadership nor reach the new leader: no renewal.
  EXPECT_LT(KeepAliveOnce(deposed, granted.id(), seconds(3)), 1)
      << "a leader replaced without its knowing renewed a lease\n"
      << cluster_.LogTails();

  // Healed, it follows the new leader, and renewals through it reach that leader.
  proxy_.Heal();
  Member& other = cluster_.member(others_[0]);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const uint64_t leader = LeaderSeenBy(deposed);
        return leader != 0 && leader != ids_[static_cast<size_t>(old_)] &&
               leader == LeaderSeenBy(other);
      },
      seconds(20), milliseconds(50)))
      << cluster_.LogTails();
  EXPECT_EQ(KeepAliveOnce(deposed, granted.id(), seconds(5)), 30) << cluster_.LogTails();
}

// Paused past a lease's TTL while the new leader keeps it alive, the old leader finds it expired
// when it resumes. Its revocation must not reach the log: the lease is the new leader's to end.
// (Before the fix, the revocation went to the new leader whenever the old one had learned of it
// by then, so this failed in some runs, not all: the resumed member's ticker and its Raft loop
// race.)
TEST_F(DeposedLeaderTest, ALeaderReplacedWithoutItsKnowingRevokesNoLeaseItFindsExpired) {
  Member& deposed = cluster_.member(old_);
  Member& other = cluster_.member(others_[0]);
  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(2);
  etcdserverpb::LeaseGrantResponse granted;
  ASSERT_TRUE(deposed.client().lease->LeaseGrant(Ctx().get(), grant, &granted).ok());
  ASSERT_TRUE(deposed.client().Put("held", "v", granted.id()).ok());

  deposed.process().Signal(SIGSTOP);
  const bool replaced = OthersElectANewLeader();
  if (!replaced) deposed.process().Signal(SIGCONT);
  ASSERT_TRUE(replaced) << "the others elected no leader\n" << cluster_.LogTails();
  // Kept alive through another member for 3 s, past the old leader's deadline for it.
  auto keep_alive_for = [&](milliseconds how_long) {
    const auto until = std::chrono::steady_clock::now() + how_long;
    while (std::chrono::steady_clock::now() < until) {
      if (KeepAliveOnce(other, granted.id(), seconds(1)) < 1) return false;
      std::this_thread::sleep_for(milliseconds(200));
    }
    return true;
  };
  const bool kept = keep_alive_for(seconds(3));
  deposed.process().Signal(SIGCONT);
  ASSERT_TRUE(kept) << "the new leader did not keep the lease alive\n" << cluster_.LogTails();

  // Still kept alive, the lease and its key stay while the old leader catches up.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(keep_alive_for(milliseconds(200))) << "the lease ended while it was kept alive\n"
                                                   << cluster_.LogTails();
    etcdserverpb::RangeResponse r;
    ASSERT_TRUE(other.client().Get("held", &r).ok());
    ASSERT_EQ(r.kvs_size(), 1) << "the key of a lease kept alive is gone\n" << cluster_.LogTails();
  }
  const uint64_t new_leader = LeaderSeenBy(other);
  EXPECT_TRUE(WaitUntil([&] { return LeaderSeenBy(deposed) == new_leader; }, seconds(10),
                        milliseconds(50)));
}

}  // namespace
}  // namespace etcdw::testing
