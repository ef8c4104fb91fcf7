// The sidecar's restore of a backup whose full snapshot etcd itself took (gardener's sidecar
// backing up a plain etcd): the snapshot etcd 3.4.23 made (support/etcd_fixture.h), gzip-
// compressed and named as gardener names it, then a delta of ours on top, restored by
// RestoreFromBackup into a data directory that serves both.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "etcdw/data_dir/data_dir.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/sidecar/compression.h"
#include "etcdw/sidecar/delta.h"
#include "etcdw/sidecar/local_store.h"
#include "etcdw/sidecar/restorer.h"
#include "etcdw/storage/engine.h"
#include "support/delta_events.h"
#include "support/etcd_fixture.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

using testsupport::DeleteEvent;
using testsupport::PutEvent;

namespace fs = std::filesystem;
using testsupport::kEtcdFixtureRevision;

constexpr int64_t kFixtureLease = 0x694da21e44e6a909;  // the lease of the fixture's "leased"

TEST(RestorerEtcdTest, AnEtcdFullSnapshotAndOurDeltaRestoreTogether) {
  testsupport::ScratchDir scratch("restore-etcd");
  const std::string root = scratch.path();
  ASSERT_FALSE(root.empty());
  auto store = NewLocalStore(root + "/store", "v2");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const auto created = std::chrono::system_clock::now() - std::chrono::hours(1);

  const std::string plain = root + "/etcd.db", gz = root + "/etcd.db.gz";
  ASSERT_TRUE(testsupport::WriteFile(plain, testsupport::EtcdFixtureSnapshot()));
  ASSERT_TRUE(CompressFile(plain, gz, Compression::kGzip).ok());
  SnapshotInfo full =
      NewSnapshot(SnapshotKind::kFull, 0, kEtcdFixtureRevision, created, ".gz", false);
  EXPECT_EQ(full.snap_name.rfind("Full-00000000-00000307-", 0), 0u) << full.snap_name;
  ASSERT_TRUE((*store)->Save(full, gz).ok());

  DeltaWriter delta;
  delta.Add(
      PutEvent("after", "x", kEtcdFixtureRevision + 1, kFixtureLease, kEtcdFixtureRevision + 1, 1),
      created);
  delta.Add(DeleteEvent("k1", kEtcdFixtureRevision + 2), created);
  const std::string payload = root + "/delta";
  ASSERT_TRUE(testsupport::WriteFile(payload, delta.Finish()));
  const std::string payload_gz = payload + ".gz";
  ASSERT_TRUE(CompressFile(payload, payload_gz, Compression::kGzip).ok());
  SnapshotInfo incr =
      NewSnapshot(SnapshotKind::kIncr, kEtcdFixtureRevision + 1, kEtcdFixtureRevision + 2,
                  created + std::chrono::minutes(1), ".gz", false);
  ASSERT_TRUE((*store)->Save(incr, payload_gz).ok());

  auto listed = (*store)->List();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  SortSnapshots(*listed);
  LatestSet set = FindLatestSet(*listed);
  ASSERT_TRUE(set.full.has_value());
  ASSERT_EQ(set.deltas.size(), 1u);

  RestoreOptions o;
  o.target = {"t", "t=http://127.0.0.1:2380", "etcd-cluster", {"http://127.0.0.1:2380"}};
  o.temp_dir = root + "/restore.tmp";
  const std::string dir = root + "/data";
  Status st = RestoreFromBackup(**store, set, dir, o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  data_dir::DataDirCheck check = data_dir::CheckDataDir(dir, /*full=*/true);
  EXPECT_EQ(check.state, data_dir::DataDirState::kValid) << check.detail;
  EXPECT_EQ(check.revision, kEtcdFixtureRevision + 2);

  auto engine = storage::Engine::Open(dir + "/member/store", {});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto kv = mvcc::KvStore::Open(**engine);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  auto view = (*kv)->NewReadView();
  auto after = mvcc::RangeKeys(*view, mvcc::KeyRange::Single("after"), {});
  ASSERT_TRUE(after.ok() && after->kvs.size() == 1u);
  EXPECT_EQ(after->kvs[0].lease(), kFixtureLease);  // etcd's lease, carried over
  auto k1 = mvcc::RangeKeys(*view, mvcc::KeyRange::Single("k1"), {});
  ASSERT_TRUE(k1.ok());
  EXPECT_TRUE(k1->kvs.empty());
  auto k1_before =
      mvcc::RangeKeys(*view, mvcc::KeyRange::Single("k1"), {.rev = kEtcdFixtureRevision});
  ASSERT_TRUE(k1_before.ok() && k1_before->kvs.size() == 1u);
  EXPECT_EQ(k1_before->kvs[0].value(), "value-1");
  auto a = mvcc::RangeKeys(*view, mvcc::KeyRange::Single("a"), {});
  ASSERT_TRUE(a.ok() && a->kvs.size() == 1u);
  EXPECT_EQ(a->kvs[0].value(), "3");
}

}  // namespace
}  // namespace etcdw::sidecar
