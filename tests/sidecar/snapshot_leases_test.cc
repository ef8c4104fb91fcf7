// The snapshot leases against the Kubernetes API test server: what the full and delta leases
// hold after each report, the revision never lowered, the optimistic lock and its retry, the
// retry of a failed full lease update, and the start-of-leadership synchronisation from the
// store.
#include "etcdw/sidecar/snapshot_leases.h"

#include <gtest/gtest.h>

#include "etcdw/sidecar/local_store.h"
#include "support/await.h"
#include "support/files.h"
#include "support/kube_api_server.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

using namespace std::chrono_literals;
using testing::KubeApiServer;
using testing::KubeApiServerOptions;

constexpr char kNs[] = "shoot--test";

class SnapshotLeasesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    kube::KubeConfig kc;
    kc.server = api_.url();
    auto c = kube::KubeClient::Create(kc);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    auto s = NewLocalStore(scratch_.path() + "/store", "etcd-main");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    api_.Put(kNs, EmptyLease("full-snap"));
    api_.Put(kNs, EmptyLease("delta-snap"));
    options_.lease_namespace = kNs;
    options_.full_lease_name = "full-snap";
    options_.delta_lease_name = "delta-snap";
    options_.retry_period = 60s;
  }

  static nlohmann::json EmptyLease(const std::string& name) {
    return {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", name}, {"labels", {{"app", "etcd"}}}}},
            {"spec", nlohmann::json::object()}};
  }

  // Saves a snapshot object into the store (content is not read by the lease writer).
  SnapshotInfo Save(SnapshotKind kind, int64_t start, int64_t last, int64_t unix_seconds) {
    SnapshotInfo s = NewSnapshot(
        kind, start, last,
        std::chrono::system_clock::time_point(std::chrono::seconds(unix_seconds)), ".gz", false);
    const std::string src = scratch_.path() + "/payload";
    testsupport::WriteFile(src, "x");
    EXPECT_TRUE(store_->Save(s, src).ok());
    return s;
  }

  nlohmann::json Spec(const std::string& name) { return api_.Get(kNs, name).value()["spec"]; }
  std::string Holder(const std::string& name) {
    auto spec = Spec(name);
    return spec.contains("holderIdentity") && !spec["holderIdentity"].is_null()
               ? spec["holderIdentity"].get<std::string>()
               : "<none>";
  }
  int Patches() {
    int n = 0;
    for (const auto& r : api_.requests()) n += r.method == "PATCH" ? 1 : 0;
    return n;
  }

  KubeApiServer api_{KubeApiServerOptions()};
  testsupport::ScratchDir scratch_{"leases"};
  std::unique_ptr<kube::KubeClient> client_;
  std::unique_ptr<SnapStore> store_;
  SnapshotLeaseOptions options_;
  common::ManualClock clock_;
};

TEST_F(SnapshotLeasesTest, TheFullLeaseHoldsTheSnapshotsRevisionAndCreationTime) {
  SnapshotLeaseUpdater u(*client_, *store_, options_, clock_);
  const auto created = std::chrono::system_clock::time_point(std::chrono::seconds(1767225600)) +
                       std::chrono::microseconds(123456);
  ASSERT_TRUE(u.UpdateFullLease(42, created).ok());
  EXPECT_EQ(Holder("full-snap"), "42");
  EXPECT_EQ(Spec("full-snap")["renewTime"], "2026-01-01T00:00:00.123456Z");
  // Other fields stay; the write was a merge patch guarded by the resourceVersion read.
  EXPECT_EQ(api_.Get(kNs, "full-snap").value()["metadata"]["labels"]["app"], "etcd");
  const auto reqs = api_.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().method, "PATCH");
  EXPECT_EQ(reqs.back().content_type, "application/merge-patch+json");
  EXPECT_TRUE(nlohmann::json::parse(reqs.back().body)["metadata"].contains("resourceVersion"))
      << reqs.back().body;
}

TEST_F(SnapshotLeasesTest, TheFullLeaseRevisionIsNeverLowered) {
  SnapshotLeaseUpdater u(*client_, *store_, options_, clock_);
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1767225600));
  ASSERT_TRUE(u.UpdateFullLease(50, t0).ok());
  api_.ClearRequests();
  // A lower revision (an older snapshot reported late): nothing is written.
  ASSERT_TRUE(u.UpdateFullLease(40, t0 + 10s).ok());
  EXPECT_EQ(Holder("full-snap"), "50");
  EXPECT_EQ(Patches(), 0);
  // The same revision again: only the time moves.
  ASSERT_TRUE(u.UpdateFullLease(50, t0 + 20s).ok());
  EXPECT_EQ(Holder("full-snap"), "50");
  EXPECT_EQ(Spec("full-snap")["renewTime"], "2026-01-01T00:00:20.000000Z");
  ASSERT_TRUE(u.UpdateFullLease(60, t0 + 30s).ok());
  EXPECT_EQ(Holder("full-snap"), "60");
}

TEST_F(SnapshotLeasesTest, AConflictIsReadAgainAndRetried) {
  SnapshotLeaseUpdater u(*client_, *store_, options_, clock_);
  api_.FailNext(2, 409, "PATCH");
  ASSERT_TRUE(u.UpdateFullLease(7, clock_.WallNow()).ok());
  EXPECT_EQ(Holder("full-snap"), "7");
  EXPECT_EQ(Patches(), 3);
  int gets = 0;
  for (const auto& r : api_.requests()) gets += r.method == "GET" ? 1 : 0;
  EXPECT_EQ(gets, 3);  // each attempt reads the lease again
}

TEST_F(SnapshotLeasesTest, ALeaseWrittenBySomeoneElseBetweenReadAndWriteIsStillRenewed) {
  SnapshotLeaseUpdater u(*client_, *store_, options_, clock_);
  // Every request waits 200 ms before it is handled. Another writer changes the lease 300 ms
  // after our read arrived: after it was answered, before our patch is handled. The patch
  // carries the resourceVersion read, fails with 409, and the lease is read and patched again.
  api_.SetDelay(200ms);
  std::thread other([&] {
    testsupport::WaitUntil([&] { return !api_.requests().empty(); });
    std::this_thread::sleep_for(300ms);
    nlohmann::json l = api_.Get(kNs, "full-snap").value();
    l["metadata"]["annotations"]["other-writer"] = "was here";
    api_.Put(kNs, l);
  });
  Status st = u.UpdateFullLease(9, clock_.WallNow());
  other.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Holder("full-snap"), "9");
  EXPECT_EQ(api_.Get(kNs, "full-snap").value()["metadata"]["annotations"]["other-writer"],
            "was here");
  EXPECT_EQ(Patches(), 2);
}

TEST_F(SnapshotLeasesTest, TheDeltaLeaseHoldsTheLatestDeltaOrZero) {
  SnapshotLeaseUpdater u(*client_, *store_, options_, clock_);
  // No snapshot at all: "0".
  ASSERT_TRUE(u.UpdateDeltaLease().ok());
  EXPECT_EQ(Holder("delta-snap"), "0");
  Save(SnapshotKind::kFull, 0, 30, 1767225600);
  Save(SnapshotKind::kIncr, 31, 35, 1767225700);
  Save(SnapshotKind::kIncr, 36, 42, 1767225800);
  clock_.Advance(5s);
  ASSERT_TRUE(u.UpdateDeltaLease().ok());
  EXPECT_EQ(Holder("delta-snap"), "42");
  EXPECT_EQ(Spec("delta-snap")["renewTime"], kube::MicroTime(clock_.WallNow()));
  // A newer full snapshot without deltas: the revision stays, the time moves (a heartbeat).
  Save(SnapshotKind::kFull, 0, 50, 1767225900);
  clock_.Advance(5s);
  ASSERT_TRUE(u.UpdateDeltaLease().ok());
  EXPECT_EQ(Holder("delta-snap"), "42");
  EXPECT_EQ(Spec("delta-snap")["renewTime"], kube::MicroTime(clock_.WallNow()));
}

TEST_F(SnapshotLeasesTest, ReportsAreWrittenByTheUpdatersThreadAndAFailedFullUpdateIsRetried) {
  SnapshotLeaseUpdater u(*client_, *store_, options_, clock_);
  u.Start();
  SnapshotInfo full = Save(SnapshotKind::kFull, 0, 77, 1767225600);
  api_.FailNext(1, 500, "GET");
  u.FullSnapshotTaken(full);
  // The first try fails; nothing more happens until the retry period has passed.
  ASSERT_TRUE(testsupport::WaitUntil([&] { return api_.requests().size() >= 1; }));
  const uint64_t looks = clock_.Looks();
  ASSERT_TRUE(testsupport::WaitUntil([&] { return clock_.Looks() > looks + 5; }));
  EXPECT_EQ(Holder("full-snap"), "<none>");
  clock_.Advance(options_.retry_period);
  EXPECT_TRUE(testsupport::WaitUntil([&] { return Holder("full-snap") == "77"; }));
  u.DeltaPeriodPassed();
  EXPECT_TRUE(testsupport::WaitUntil([&] { return Holder("delta-snap") == "0"; }));
  u.Stop();
}

TEST_F(SnapshotLeasesTest, SyncSetsBothLeasesFromTheStore) {
  Save(SnapshotKind::kFull, 0, 30, 1767225600);
  Save(SnapshotKind::kIncr, 31, 44, 1767225700);
  SnapshotLeaseUpdater u(*client_, *store_, options_, clock_);
  u.Start();
  u.Sync();
  EXPECT_TRUE(testsupport::WaitUntil([&] { return Holder("full-snap") == "30"; }));
  EXPECT_TRUE(testsupport::WaitUntil([&] { return Holder("delta-snap") == "44"; }));
  EXPECT_EQ(Spec("full-snap")["renewTime"], "2026-01-01T00:00:00.000000Z");
}

TEST_F(SnapshotLeasesTest, AMissingLeaseIsAnErrorAndIsNotCreated) {
  options_.full_lease_name = "absent";
  SnapshotLeaseUpdater u(*client_, *store_, options_, clock_);
  Status st = u.UpdateFullLease(5, clock_.WallNow());
  EXPECT_EQ(st.code(), Code::kNotFound) << st.ToString();
  EXPECT_NE(st.message().find("full snapshot lease absent"), std::string::npos) << st.ToString();
  EXPECT_FALSE(api_.Get(kNs, "absent").has_value());
}

TEST_F(SnapshotLeasesTest, AHolderThatIsNotARevisionIsReported) {
  nlohmann::json l = EmptyLease("full-snap");
  l["spec"]["holderIdentity"] = "someone";
  api_.Put(kNs, l);
  SnapshotLeaseUpdater u(*client_, *store_, options_, clock_);
  Status st = u.UpdateFullLease(5, clock_.WallNow());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("\"someone\", which is not a revision"), std::string::npos)
      << st.ToString();
  EXPECT_EQ(Holder("full-snap"), "someone");
}

}  // namespace
}  // namespace etcdw::sidecar
