// The applier's report of the entries that start a leader's term (ApplierDeps::on_term_entry):
// it comes after the batch's lease revocations have reached the lessor, so a lessor promoted
// then cannot renew a lease whose revocation an earlier term committed (the fault campaign found
// a new leader doing so when it promoted its lessor at the leadership change).
#include "etcdw/member/applier.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "etcdw/common/clock.h"
#include "etcdw/common/etcd_errors.h"
#include "etcdw/member/alarm_store.h"
#include "etcdw/member/lessor.h"
#include "etcdw/member/quota.h"
#include "etcdw/member/server_metrics.h"
#include "etcdw/member/watch_hub.h"
#include "etcdw/mvcc/compactor.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/storage/engine.h"

namespace etcdw::member {
namespace {

raftpb::Entry EntryOf(uint64_t index, uint64_t term, const internalpb::Request* req) {
  raftpb::Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_type(raftpb::ENTRY_NORMAL);
  if (req != nullptr) e.set_data(req->SerializeAsString());
  return e;
}

class ApplierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::EngineOptions o;
    o.in_memory = true;
    engine_ = std::move(storage::Engine::Open("/mem/applier", o)).value();
    kv_ = std::move(mvcc::KvStore::Open(*engine_)).value();
    ASSERT_TRUE(alarms_.Load(*engine_).ok());
    hub_ = std::make_unique<WatchHub>(*kv_, WatchHubOptions{});
    quota_ = std::make_unique<Quota>(*engine_, -1);
    ApplierDeps d;
    d.kv = kv_.get();
    d.lessor = &lessor_;
    d.alarms = &alarms_;
    d.hub = hub_.get();
    d.waits = &waits_;
    d.quota = quota_.get();
    d.metrics = &metrics_;
    d.on_term_entry = [this](uint64_t term) {
      terms_.push_back(term);
      // What EtcdServer does for the term it leads: take over expiry, then a renewal may come.
      lessor_.Promote(kv_->leases().List(), std::chrono::milliseconds(0));
      renewals_.push_back(lessor_.Renew(kLease).status());
    };
    applier_ = std::make_unique<Applier>(d);
  }

  static constexpr int64_t kLease = 5;
  common::ManualClock clock_;
  std::unique_ptr<storage::Engine> engine_;
  std::unique_ptr<mvcc::KvStore> kv_;
  Lessor lessor_{clock_};
  AlarmStore alarms_;
  std::unique_ptr<WatchHub> hub_;
  WaitRegistry waits_;
  std::unique_ptr<Quota> quota_;
  ServerMetrics metrics_;
  std::unique_ptr<Applier> applier_;
  std::vector<uint64_t> terms_;
  std::vector<Status> renewals_;
};

TEST_F(ApplierTest, ATermsFirstEntryIsReportedAfterTheRevocationsBeforeIt) {
  internalpb::Request grant;
  grant.set_id(1);
  grant.mutable_lease_grant()->set_id(kLease);
  grant.mutable_lease_grant()->set_ttl(10);
  ASSERT_TRUE(applier_->Apply({EntryOf(1, 1, nullptr), EntryOf(2, 1, &grant)}).ok());
  ASSERT_EQ(terms_, std::vector<uint64_t>{1});
  EXPECT_TRUE(renewals_.back().ok()) << "the lease granted after term 1 started renews";

  // Term 1's leader revoked the lease; the next leader's first entry is in the same batch.
  internalpb::Request revoke;
  revoke.set_id(2);
  revoke.mutable_lease_revoke()->set_id(kLease);
  ASSERT_TRUE(applier_->Apply({EntryOf(3, 1, &revoke), EntryOf(4, 2, nullptr)}).ok());
  ASSERT_EQ(terms_, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(renewals_.back(), errors::LeaseNotFound()) << "a revoked lease was renewed";
  EXPECT_FALSE(kv_->leases().Get(kLease).has_value());

  // Entries with data report nothing.
  internalpb::Request other = grant;
  other.set_id(3);
  other.mutable_lease_grant()->set_id(kLease + 1);
  ASSERT_TRUE(applier_->Apply({EntryOf(5, 2, &other)}).ok());
  EXPECT_EQ(terms_.size(), 2u);
}

}  // namespace
}  // namespace etcdw::member
