// Differential tests of what kube-apiserver sends (k8s.io/apiserver/pkg/storage/etcd3): its
// compaction through the "compact_rev_key" Txn, and its lists and counts.
#include "diff_fixture.h"

namespace etcdw::testing {
namespace {

using etcdserverpb::Compare;
using etcdserverpb::RangeRequest;
using etcdserverpb::TxnRequest;

TEST_F(DiffTest, KubeApiserverCompactionThroughCompactRevKeyMatchesEtcd) {
  StartBoth();
  // One round of kube-apiserver's compactor (compact.go): if the version of "compact_rev_key"
  // is still `t`, put `rev` there (raising its version) and compact at `rev` unless `rev` is 0
  // (the first round compacts nothing); otherwise read the key, whose version tells the newer
  // `t`. Both sides answer the same; returns the Txn's outcome.
  auto compact_round = [this](int64_t t, int64_t rev) {
    TxnRequest txn;
    *txn.add_compare() = CmpVersion("compact_rev_key", Compare::EQUAL, t);
    *txn.add_success() = OpPut("compact_rev_key", std::to_string(rev));
    *txn.add_failure() = OpRange("compact_rev_key");
    Outcome o = Txn(txn);
    if (o.ok() && o.response.find("succeeded: true") != std::string::npos && rev != 0) {
      Compact(rev);
    }
    return o;
  };
  for (int i = 0; i < 5; ++i) Put("/registry/pods/default/p" + std::to_string(i), "v1");
  // First round (t = 0, nothing to compact): the key is created, version 1.
  Outcome first = compact_round(0, 0);
  EXPECT_NE(first.response.find("succeeded: true"), std::string::npos) << first.ToString();
  const int64_t rev1 = SameRevision();
  for (int i = 0; i < 5; ++i) Put("/registry/pods/default/p" + std::to_string(i), "v2");
  // Next interval: compacts at the revision the previous round saw.
  compact_round(1, rev1);
  // Another apiserver still at t = 1 loses the compare and reads the key (version 2).
  Outcome stale = compact_round(1, SameRevision());
  EXPECT_EQ(stale.response.find("succeeded: true"), std::string::npos) << stale.ToString();
  EXPECT_NE(stale.response.find("version: 2"), std::string::npos) << stale.ToString();
  // Reads below the compaction fail as etcd's; at it and above they answer.
  Get("/registry/pods/", "/registry/pods0", rev1 - 1);
  Get("/registry/pods/", "/registry/pods0", rev1);
  // A round whose revision is already compacted: the Txn succeeds, the compaction is refused.
  compact_round(2, rev1);
  const int64_t rev3 = SameRevision();
  Delete("/registry/pods/default/p0");
  compact_round(3, rev3);
  Get("compact_rev_key");
  Get("/registry/pods/", "/registry/pods0", rev3);
}

// kube-apiserver's lists: pages (limit, keys after the last one, a fixed revision), counts
// (count_only over a prefix), and keys-only reads, at the current and at past revisions with
// deletions between them.
TEST_F(DiffTest, KubeApiserverListsAndCountsMatchEtcd) {
  StartBoth();
  for (int i = 0; i < 12; ++i) {
    Put("/registry/pods/ns" + std::to_string(i % 3) + "/p" + std::to_string(i), "v");
  }
  Put("/registry/services/s", "v");
  const int64_t before = SameRevision();
  Delete("/registry/pods/ns0/p3");
  Put("/registry/pods/ns1/p1", "v2");
  Delete("/registry/pods/ns2/", "/registry/pods/ns20");
  for (int64_t rev : {int64_t{0}, before, before + 1}) {
    for (int64_t limit : {0, 1, 4, 11, 12, 13}) {
      RangeRequest r = RangeReq("/registry/pods/", "/registry/pods0", rev);
      r.set_limit(limit);
      Range(r);
      r.set_keys_only(true);
      Range(r);
      r.set_count_only(true);
      Range(r);
      r.set_keys_only(false);
      Range(r);
      // A page after a key, as the apiserver continues a list.
      r = RangeReq("/registry/pods/ns1/p1\x01", "/registry/pods0", rev);
      r.set_limit(limit);
      Range(r);
      r.set_min_mod_revision(before);
      Range(r);
      r.set_count_only(true);
      Range(r);
      r.set_count_only(false);
      r.set_max_create_revision(5);
      r.set_keys_only(true);
      Range(r);
    }
  }
}

}  // namespace
}  // namespace etcdw::testing
