// Leases through the client: reading, replacing, merge-patching and the read-change-write loop
// with its conflict retries; a Lease's JSON; MicroTime.
#include <chrono>

#include "kube_fixture.h"

namespace etcdw::kube {
namespace {

using nlohmann::json;

class LeaseTest : public KubeTest {
 protected:
  void SetUp() override {
    StartServer();
    json lease = LeaseObject("member", "etcd-0");
    lease["metadata"]["annotations"] = {{"owner", "druid"}};
    server_->Put(kNs, lease);
    client_ = NewClient(ConfigForServer());
    ASSERT_TRUE(client_);
    server_->ClearRequests();
  }
  std::string StoredRv() const {
    return server_->Get(kNs, "member").value()["metadata"]["resourceVersion"];
  }

  std::unique_ptr<KubeClient> client_;
};

TEST_F(LeaseTest, GetReadsTheNamedFieldsAndKeepsTheObject) {
  auto lease = client_->GetLease(kNs, "member");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->namespace_name, kNs);
  EXPECT_EQ(lease->name, "member");
  EXPECT_EQ(lease->resource_version, StoredRv());
  EXPECT_EQ(lease->holder_identity, "etcd-0");
  EXPECT_EQ(lease->renew_time, "2026-01-01T00:00:00.000000Z");
  EXPECT_EQ(lease->annotations, (std::map<std::string, std::string>{{"owner", "druid"}}));
  EXPECT_EQ(lease->object["spec"]["leaseDurationSeconds"], 40);
  EXPECT_EQ(lease->object, server_->Get(kNs, "member").value());
}

TEST_F(LeaseTest, UpdateReplacesTheObjectUnderANewResourceVersion) {
  auto lease = client_->GetLease(kNs, "member");
  ASSERT_TRUE(lease.ok());
  lease->object["spec"]["holderIdentity"] = "etcd-1";
  auto written = client_->UpdateLease(*lease);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->holder_identity, "etcd-1");
  EXPECT_NE(written->resource_version, lease->resource_version);
  EXPECT_EQ(written->resource_version, StoredRv());
  EXPECT_EQ(server_->Get(kNs, "member").value()["spec"]["holderIdentity"], "etcd-1");
  const auto put = server_->requests().back();
  EXPECT_EQ(put.method, "PUT");
  EXPECT_EQ(put.content_type, "application/json");
  EXPECT_EQ(json::parse(put.body)["metadata"]["resourceVersion"], lease->resource_version);
}

TEST_F(LeaseTest, MergePatchChangesOnlyWhatItNamesAndIsConditionalWithAResourceVersion) {
  auto patched = client_->MergePatchLease(
      kNs, "member", {{"metadata", {{"annotations", {{"full-snapshot-revision", "42"}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ(patched->annotations.at("full-snapshot-revision"), "42");
  EXPECT_EQ(patched->annotations.at("owner"), "druid");
  EXPECT_EQ(patched->holder_identity, "etcd-0");
  EXPECT_EQ(server_->requests().back().content_type, "application/merge-patch+json");

  json stale = {{"metadata", {{"resourceVersion", "1"}}}, {"spec", {{"holderIdentity", "x"}}}};
  EXPECT_EQ(client_->MergePatchLease(kNs, "member", stale).status().code(), Code::kAborted);
  json fresh = stale;
  fresh["metadata"]["resourceVersion"] = StoredRv();
  auto taken = client_->MergePatchLease(kNs, "member", fresh);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->holder_identity, "x");
  EXPECT_EQ(client_->MergePatchLease(kNs, "member", json::array()).status().code(),
            Code::kInvalidArgument);
}

TEST_F(LeaseTest, ModifyRetriesAnInjectedConflictAfterReadingAgain) {
  server_->FailNext(1, 409, "PUT");
  int calls = 0;
  auto r = client_->ModifyLease(kNs, "member", [&](Lease& l) {
    ++calls;
    l.holder_identity = "etcd-2";
    l.renew_time = "2026-11-27T17:44:36.123456Z";
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(Methods(), "GET PUT GET PUT");
  const json stored = server_->Get(kNs, "member").value();
  EXPECT_EQ(stored["spec"]["holderIdentity"], "etcd-2");
  EXPECT_EQ(stored["spec"]["renewTime"], "2026-11-27T17:44:36.123456Z");
  EXPECT_EQ(stored["spec"]["leaseDurationSeconds"], 40) << "fields not named are kept";
  EXPECT_EQ(r->resource_version, StoredRv());
}

TEST_F(LeaseTest, ModifyKeepsAChangeSomeoneElseMadeBetweenReadAndWrite) {
  int calls = 0;
  auto r = client_->ModifyLease(kNs, "member", [&](Lease& l) {
    if (++calls == 1) {
      // Another writer annotates the lease after our read: our PUT must not undo that.
      json theirs = server_->Get(kNs, "member").value();
      theirs["metadata"]["annotations"]["delta-snapshot-revision"] = "7";
      server_->Put(kNs, theirs);
    }
    l.annotations["full-snapshot-revision"] = "9";
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(calls, 2);
  const json annotations = server_->Get(kNs, "member").value()["metadata"]["annotations"];
  EXPECT_EQ(annotations, (json{{"owner", "druid"},
                               {"delta-snapshot-revision", "7"},
                               {"full-snapshot-revision", "9"}}));
}

TEST_F(LeaseTest, ModifyMayEditTheObjectAndMayDecideNotToWrite) {
  auto r = client_->ModifyLease(kNs, "member", [](Lease& l) {
    l.object["spec"]["leaseDurationSeconds"] = 15;
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(server_->Get(kNs, "member").value()["spec"]["leaseDurationSeconds"], 15);

  server_->ClearRequests();
  const std::string rv = StoredRv();
  auto untouched = client_->ModifyLease(kNs, "member", [](Lease& l) {
    l.holder_identity = "not written";
    return false;
  });
  ASSERT_TRUE(untouched.ok());
  EXPECT_EQ(untouched->holder_identity, "etcd-0");
  EXPECT_EQ(Methods(), "GET");
  EXPECT_EQ(StoredRv(), rv);
}

TEST_F(LeaseTest, ModifyGivesUpAfterItsAttemptsAndRetriesOnlyConflicts) {
  server_->FailNext(10, 409, "PUT");
  const auto take = [](Lease& l) {
    l.holder_identity = "x";
    return true;
  };
  auto r = client_->ModifyLease(kNs, "member", take, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAborted);
  EXPECT_NE(r.status().message().find("the object has been modified"), std::string::npos);
  EXPECT_NE(r.status().message().find("gave up after 3 attempts"), std::string::npos);
  EXPECT_EQ(Methods(), "GET PUT GET PUT GET PUT");

  server_ = nullptr;  // a fresh server without the remaining faults
  SetUp();
  server_->FailNext(1, 500, "PUT");
  auto failed = client_->ModifyLease(kNs, "member", take);
  EXPECT_EQ(failed.status().code(), Code::kUnavailable);
  EXPECT_EQ(Methods(), "GET PUT");
  EXPECT_EQ(client_->ModifyLease(kNs, "missing", [](Lease&) { return true; }).status().code(),
            Code::kNotFound);
  EXPECT_EQ(client_
                ->ModifyLease(
                    kNs, "member", [](Lease&) { return true; }, 0)
                .status()
                .code(),
            Code::kInvalidArgument);
}

TEST(LeaseJsonTest, TheNamedFieldsAndWhatIsRefused) {
  auto lease = LeaseFromJson(json::parse(R"({"kind":"Lease","metadata":{"name":"l",
      "namespace":"ns","resourceVersion":"5","annotations":{"a":"b"}},
      "spec":{"holderIdentity":null}})"));
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->name, "l");
  EXPECT_EQ(lease->namespace_name, "ns");
  EXPECT_EQ(lease->resource_version, "5");
  EXPECT_EQ(lease->holder_identity, std::nullopt);
  EXPECT_EQ(lease->renew_time, std::nullopt);
  EXPECT_EQ(lease->annotations.at("a"), "b");

  for (const char* bad :
       {R"([])", R"({"kind":"Pod","metadata":{"name":"l"}})", R"({})",
        R"({"metadata":{"namespace":"ns"}})", R"({"metadata":{"name":"l","annotations":{"a":1}}})",
        R"({"metadata":{"name":"l"},"spec":{"holderIdentity":3}})",
        R"({"metadata":{"name":"l"},"spec":[]})"}) {
    auto r = LeaseFromJson(json::parse(bad));
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(LeaseJsonTest, PathsAndMicroTime) {
  EXPECT_EQ(LeasePath("ns"), "/apis/coordination.k8s.io/v1/namespaces/ns/leases");
  EXPECT_EQ(LeasePath("ns", "l"), "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l");

  using std::chrono::microseconds;
  using std::chrono::nanoseconds;
  using std::chrono::seconds;
  using TimePoint = std::chrono::system_clock::time_point;
  const TimePoint t(seconds(1795801476));
  EXPECT_EQ(MicroTime(t + microseconds(123456)), "2026-11-27T17:44:36.123456Z");
  EXPECT_EQ(MicroTime(t), "2026-11-27T17:44:36.000000Z");
  EXPECT_EQ(MicroTime(t + std::chrono::duration_cast<TimePoint::duration>(nanoseconds(999999))),
            "2026-11-27T17:44:36.000999Z")
      << "below a microsecond is cut, not rounded";
  EXPECT_EQ(MicroTime(TimePoint()), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(MicroTime(TimePoint() - microseconds(1)), "1969-12-31T23:59:59.999999Z");
  EXPECT_EQ(MicroTime(TimePoint(seconds(951782400))), "2000-02-29T00:00:00.000000Z");
}

}  // namespace
}  // namespace etcdw::kube
