// Differential tests of Lease: grant, revoke, keepalive, time-to-live, listing and expiry.
// Leases are granted with explicit IDs so that answers are comparable; remaining TTLs depend on
// each server's clock and are compared within a second.
#include <algorithm>
#include <cstdlib>

#include "diff_fixture.h"

namespace etcdw::testing {
namespace {

using etcdserverpb::LeaseKeepAliveRequest;
using etcdserverpb::LeaseKeepAliveResponse;
using etcdserverpb::LeaseTimeToLiveRequest;
using etcdserverpb::LeaseTimeToLiveResponse;

// A keepalive stream on one member.
class KeepAliveStream {
 public:
  explicit KeepAliveStream(Member& m) : stream_(m.client().lease->LeaseKeepAlive(&ctx_)) {}
  ~KeepAliveStream() {
    ctx_.TryCancel();
    stream_->Finish();
  }
  std::optional<LeaseKeepAliveResponse> KeepAlive(int64_t id) {
    LeaseKeepAliveRequest req;
    req.set_id(id);
    if (!stream_->Write(req)) return std::nullopt;
    LeaseKeepAliveResponse resp;
    if (!stream_->Read(&resp)) return std::nullopt;
    return resp;
  }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<LeaseKeepAliveRequest, LeaseKeepAliveResponse>> stream_;
};

class LeaseDiffTest : public DiffTest {
 protected:
  // TimeToLive on both: remaining TTLs may differ by a second (each server's own clock), keys
  // come in no particular order from etcd (a Go map).
  Outcome TimeToLive(int64_t id, bool keys) {
    LeaseTimeToLiveRequest r;
    r.set_id(id);
    r.set_keys(keys);
    int64_t ttl[2] = {0, 0};
    int i = 0;
    Outcome o = Same<LeaseTimeToLiveResponse>(
        [&](Client& c, grpc::ClientContext* ctx, LeaseTimeToLiveResponse* out) {
          return c.lease->LeaseTimeToLive(ctx, r, out);
        },
        "time to live " + r.ShortDebugString(),
        [&](Member&, LeaseTimeToLiveResponse* resp) {
          ttl[i++] = resp->ttl();
          if (resp->ttl() >= 0) resp->set_ttl(1);  // compared below; -1: unknown
          std::sort(resp->mutable_keys()->begin(), resp->mutable_keys()->end());
        });
    EXPECT_LE(std::abs(ttl[0] - ttl[1]), 1)
        << "remaining TTL: etcd " << ttl[0] << ", ours " << ttl[1];
    last_ttl_ = ttl[1];
    return o;
  }

  Outcome Leases() {
    return Same<etcdserverpb::LeaseLeasesResponse>(
        [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::LeaseLeasesResponse* out) {
          return c.lease->LeaseLeases(ctx, etcdserverpb::LeaseLeasesRequest(), out);
        },
        "leases",
        [this](Member&, etcdserverpb::LeaseLeasesResponse* r) {
          // A single member lists its leases by expiry; etcd's followers (which do not run
          // expiry) in no particular order: compare them as a set there.
          if (!Clustered()) return;
          std::sort(r->mutable_leases()->begin(), r->mutable_leases()->end(),
                    [](const auto& a, const auto& b) { return a.id() < b.id(); });
        });
  }

  // One keepalive on each member's stream, compared.
  // `ignore_revision`: while the servers expire leases on their own clocks, their revisions
  // may differ for a moment.
  void KeepAliveBoth(KeepAliveStream& a, KeepAliveStream& b, int64_t id,
                     bool ignore_revision = false) {
    auto ra = a.KeepAlive(id);
    auto rb = b.KeepAlive(id);
    ASSERT_TRUE(ra) << "etcd keepalive stream broke";
    ASSERT_TRUE(rb) << "etcd-wrapper keepalive stream broke";
    if (ignore_revision) {
      ra->mutable_header()->clear_revision();
      rb->mutable_header()->clear_revision();
    }
    EXPECT_EQ(Normalized(*ra), Normalized(*rb)) << "keepalive " << id;
    if (Verbose()) std::cerr << "[keepalive] " << id << " -> " << Normalized(*ra) << "\n";
  }

  int64_t last_ttl_ = 0;
};

TEST_F(LeaseDiffTest, GrantRulesMatchEtcd) {
  StartBoth();
  Leases();  // none yet
  Outcome o = LeaseGrant(100, 60);
  LeaseGrant(101, 1);  // raised to the minimum TTL (2s with default timing)
  LeaseGrant(102, 0);
  LeaseGrant(103, -5);
  o = LeaseGrant(104, 9000000001);
  EXPECT_EQ(o.message, "etcdserver: too large lease TTL");
  EXPECT_EQ(o.code, grpc::StatusCode::OUT_OF_RANGE);
  LeaseGrant(105, 9000000000);
  o = LeaseGrant(100, 9000000001);  // the TTL is checked first
  EXPECT_EQ(o.message, "etcdserver: too large lease TTL");
  o = LeaseGrant(100, 30);
  EXPECT_EQ(o.message, "etcdserver: lease already exists");
  EXPECT_EQ(o.code, grpc::StatusCode::FAILED_PRECONDITION);
  LeaseGrant(-7, 30);
  for (int64_t id : {101, 102, 103}) {
    TimeToLive(id, false);
    LeaseRevoke(id);
  }
  TimeToLive(100, false);
  EXPECT_GE(last_ttl_, 58);
  TimeToLive(105, false);
  Leases();  // by expiry: -7, 100, 105
  SameRevision();

  // The server picks an ID when none is given.
  int64_t picked[2];
  int i = 0;
  for (Member* m : both()) {
    etcdserverpb::LeaseGrantRequest r;
    r.set_ttl(40);
    etcdserverpb::LeaseGrantResponse resp;
    auto st = m->client().lease->LeaseGrant(Ctx().get(), r, &resp);
    ASSERT_TRUE(st.ok()) << m->label() << ": " << st.error_message();
    EXPECT_GT(resp.id(), 0) << m->label();
    EXPECT_EQ(resp.ttl(), 40) << m->label();
    picked[i++] = resp.id();
  }
  for (int j = 0; j < 2; ++j) {
    etcdserverpb::LeaseRevokeRequest r;
    r.set_id(picked[j]);
    etcdserverpb::LeaseRevokeResponse resp;
    auto st = both()[j]->client().lease->LeaseRevoke(Ctx().get(), r, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
  Leases();
}

TEST_F(LeaseDiffTest, RevokeDeletesAttachedKeysInOneRevision) {
  StartBoth();
  LeaseGrant(1, 600);
  LeaseGrant(2, 600);
  Put("k3", "v", 1);
  Put("k1", "v", 1);
  Put("k2", "v", 1);
  Put("k4", "v", 2);
  Put("other", "v");
  Put("k2", "detached");  // no lease any more
  TimeToLive(1, true);
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("k", "l", 0, /*prev_kv=*/true));
  w.Next("created");
  Outcome o = LeaseRevoke(1);
  auto r = w.Next("deletions of the revoked lease's keys");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->events_size(), 2);
  for (const auto& ev : r->events()) EXPECT_EQ(ev.kv().mod_revision(), r->header().revision());
  Get(kZero, kZero);
  o = LeaseRevoke(1);
  EXPECT_EQ(o.message, "etcdserver: requested lease not found");
  EXPECT_EQ(o.code, grpc::StatusCode::NOT_FOUND);
  LeaseRevoke(12345);
  TimeToLive(1, true);
  Leases();
  // A lease without keys: revoking it creates no revision.
  LeaseGrant(3, 600);
  LeaseRevoke(3);
  LeaseRevoke(2);
  w.Next("deletion of k4");
  Get(kZero, kZero);
  w.ExpectNothingPending("end");
  SameRevision();
}

TEST_F(LeaseDiffTest, AttachmentFollowsTheLatestPut) {
  StartBoth();
  LeaseGrant(1, 600);
  LeaseGrant(2, 600);
  Put("a", "1", 1);
  Put("b", "1", 1);
  Put("c", "1", 1);
  TimeToLive(1, true);
  Put("a", "2", 2);  // moves to lease 2
  Delete("b");       // no longer attached
  etcdserverpb::TxnRequest t;
  *t.add_success() = OpPut("d", "1", 2);
  *t.add_success() = OpPut("c", "2");  // detached
  Txn(t);
  TimeToLive(1, true);
  TimeToLive(2, true);
  TimeToLive(2, false);
  TimeToLive(999, true);  // unknown: TTL -1
  LeaseRevoke(1);
  Get(kZero, kZero);
  LeaseRevoke(2);
  Get(kZero, kZero);
}

TEST_F(LeaseDiffTest, KeepAliveMatchesEtcd) {
  StartBoth();
  LeaseGrant(10, 30);
  LeaseGrant(11, 1);
  Put("a", "1", 10);
  KeepAliveStream a(etcd()), b(ours());
  KeepAliveBoth(a, b, 10);
  KeepAliveBoth(a, b, 11);
  KeepAliveBoth(a, b, 999);  // unknown: TTL 0
  KeepAliveBoth(a, b, 0);
  LeaseRevoke(10);
  KeepAliveBoth(a, b, 10);  // revoked: TTL 0
  KeepAliveBoth(a, b, 11);
  TimeToLive(11, false);
}

TEST_F(LeaseDiffTest, ExpiryDeletesKeysLikeEtcd) {
  StartBoth();
  LeaseGrant(30, 1);  // 2s
  LeaseGrant(31, 1);  // 2s, kept alive
  Put("x/1", "v", 30);
  Put("x/2", "v", 30);
  Put("y", "v", 31);
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("x/", "x0", 0, true));
  w.Next("created");
  KeepAliveStream a(etcd()), b(ours());
  // Expiry runs on each server's own clock; keep lease 31 alive meanwhile. The deletions are
  // compared exactly: with no other writes they happen at the same revision on both.
  std::optional<etcdserverpb::WatchResponse> ea, eb;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((!ea || !eb) && std::chrono::steady_clock::now() < deadline) {
    KeepAliveBoth(a, b, 31, /*ignore_revision=*/true);
    if (!ea) ea = w.etcd().Next(std::chrono::milliseconds(250));
    if (!eb) eb = w.ours().Next(std::chrono::milliseconds(250));
  }
  ASSERT_TRUE(ea) << "etcd did not expire the lease";
  ASSERT_TRUE(eb) << "etcd-wrapper did not expire the lease";
  EXPECT_EQ(Normalized(*ea), Normalized(*eb));
  EXPECT_EQ(ea->events_size(), 2);
  Get(kZero, kZero);  // y survives
  TimeToLive(30, true);
  KeepAliveBoth(a, b, 30);
  Leases();
  LeaseRevoke(31);
  Get(kZero, kZero);
}

// State survives a restart as in etcd: revisions, compaction, history, leases (renewed to their
// TTL plus an election timeout when the member leads again), alarms and member identity.
TEST_F(LeaseDiffTest, RestartKeepsStateLikeEtcd) {
  StartBoth();
  const uint64_t ids[2] = {MemberId(etcd()), MemberId(ours())};
  LeaseGrant(1, 60);
  LeaseGrant(2, 30);
  Put("a", "1", 1);
  Put("b", "1");
  Put("b", "2");
  Put("b", "3");
  Delete("b");
  Put("c", "1", 2);
  Compact(4);
  Alarm(etcdserverpb::AlarmRequest::ACTIVATE, etcdserverpb::NOSPACE);
  RestartBoth();
  EXPECT_EQ(MemberId(etcd()), ids[0]);
  EXPECT_EQ(MemberId(ours()), ids[1]);
  SameRevision();
  Get(kZero, kZero);
  Get("b", "", 3);  // compacted
  Get("b", "", 4);
  Get("b", "", 5);
  HashKV(0);
  TimeToLive(1, true);
  EXPECT_GE(last_ttl_, 59);
  TimeToLive(2, true);
  Leases();
  Alarm(etcdserverpb::AlarmRequest::GET, etcdserverpb::NONE);
  Outcome o = Put("d", "1");
  EXPECT_EQ(o.message, "etcdserver: mvcc: database space exceeded");
  Alarm(etcdserverpb::AlarmRequest::DEACTIVATE, etcdserverpb::NOSPACE);
  Put("d", "1");
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch(kZero, kZero, 4, /*prev_kv=*/true));
  w.NextN(2, "history from before the restart");
  w.Send(CreateWatch(kZero, kZero, 3));
  w.NextN(2, "compacted before the restart");
  LeaseRevoke(1);
  w.Next("revocation after the restart");
  SameRevision();
}

}  // namespace
}  // namespace etcdw::testing
