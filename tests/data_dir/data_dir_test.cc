// The offline operations on a member's data directory (data_dir.h), against real members run
// in-process: restore from a snapshot and start on it, the offline store that replays delta
// snapshots, and the sanity and full checks against damage made behind the store's back.
#include "etcdw/data_dir/data_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <set>

#include "etcdw/cluster/membership.h"
#include "etcdw/common/clock.h"
#include "etcdw/common/etcd_errors.h"
#include "etcdw/member/etcd_server.h"
#include "etcdw/mvcc/etcd_export.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/mvcc/lease_table.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/mvcc/snapshot.h"
#include "etcdw/storage/engine.h"
#include "etcdw/storage/meta_records.h"
#include "etcdw/storage/raft_log.h"
#include "etcdw/storage/versioned_key.h"
#include "support/await.h"
#include "support/delta_events.h"
#include "support/files.h"
#include "support/local_member.h"
#include "support/scratch_dir.h"

namespace etcdw::data_dir {
namespace {

using testsupport::DeleteEvent;
using testsupport::PutEvent;

namespace fs = std::filesystem;
using storage::Column;

using testsupport::Await;

// The identity of the member a snapshot is restored into.
constexpr char kNewUrl[] = "http://127.0.0.1:23990";
constexpr char kNewToken[] = "restored-token";
const std::string kRestoredIdentity = std::string("name: restored\ninitial-advertise-peer-urls: ") +
                                      kNewUrl + "\ninitial-cluster: restored=" + kNewUrl +
                                      "\ninitial-cluster-token: " + kNewToken + "\n";

RestoreTarget NewTarget() {
  return RestoreTarget{"restored", std::string("restored=") + kNewUrl, kNewToken, {kNewUrl}};
}

std::vector<std::string> Serialized(const etcdserverpb::RangeResponse& r) {
  std::vector<std::string> out;
  for (const auto& kv : r.kvs()) out.push_back(kv.SerializeAsString());
  return out;
}

class DataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<testsupport::ScratchDir>("datadir");
    root_ = scratch_->path();
    ASSERT_FALSE(root_.empty());
    src_ = root_ + "/src";
    dst_ = root_ + "/dst";
    snap_ = root_ + "/snapshot.db";
  }
  void TearDown() override {
    server_.reset();
    scratch_.reset();
  }

  // The member of `dir`, started (support/local_member.h).
  Result<std::unique_ptr<member::EtcdServer>> OpenServer(const std::string& dir,
                                                         const std::string& identity) {
    return testsupport::StartLocalMember(dir, identity, clock_);
  }

  void Start(const std::string& dir, const std::string& identity = "name: t\n") {
    server_.reset();
    auto s = OpenServer(dir, identity);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  // Destroying the member closes its store and releases the store's lock.
  void StopServer() { server_.reset(); }

  int64_t Put(const std::string& k, const std::string& v, int64_t lease = 0) {
    etcdserverpb::PutRequest r;
    r.set_key(k);
    r.set_value(v);
    r.set_lease(lease);
    auto resp = Await<etcdserverpb::PutResponse>([&](auto cb) { server_->Put(r, cb); });
    EXPECT_TRUE(resp.ok()) << resp.status().ToString();
    return resp.ok() ? resp->header().revision() : 0;
  }
  void Delete(const std::string& k) {
    etcdserverpb::DeleteRangeRequest r;
    r.set_key(k);
    auto resp =
        Await<etcdserverpb::DeleteRangeResponse>([&](auto cb) { server_->DeleteRange(r, cb); });
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    ASSERT_EQ(resp->deleted(), 1);
  }
  void GrantLease(int64_t id) {
    etcdserverpb::LeaseGrantRequest g;
    g.set_id(id);
    g.set_ttl(100);
    auto r = Await<etcdserverpb::LeaseGrantResponse>([&](auto cb) { server_->LeaseGrant(g, cb); });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  void Compact(int64_t rev) {
    etcdserverpb::CompactionRequest c;
    c.set_revision(rev);
    c.set_physical(true);
    auto r = Await<etcdserverpb::CompactionResponse>([&](auto cb) { server_->Compact(c, cb); });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  Result<etcdserverpb::RangeResponse> RangeAll(int64_t rev = 0) {
    etcdserverpb::RangeRequest r;
    r.set_key(std::string(1, '\0'));
    r.set_range_end(std::string(1, '\0'));
    r.set_revision(rev);
    return Await<etcdserverpb::RangeResponse>([&](auto cb) { server_->Range(r, cb); });
  }
  std::optional<mvccpb::KeyValue> Get(const std::string& k, int64_t rev = 0) {
    etcdserverpb::RangeRequest r;
    r.set_key(k);
    r.set_revision(rev);
    auto resp = Await<etcdserverpb::RangeResponse>([&](auto cb) { server_->Range(r, cb); });
    EXPECT_TRUE(resp.ok()) << resp.status().ToString();
    if (!resp.ok() || resp->kvs_size() == 0) return std::nullopt;
    return resp->kvs(0);
  }
  std::vector<std::string> LeaseKeys(int64_t id) {
    etcdserverpb::LeaseTimeToLiveRequest r;
    r.set_id(id);
    r.set_keys(true);
    auto resp = Await<etcdserverpb::LeaseTimeToLiveResponse>(
        [&](auto cb) { server_->LeaseTimeToLive(r, cb); });
    EXPECT_TRUE(resp.ok()) << resp.status().ToString();
    if (!resp.ok() || resp->ttl() < 0) return {"<no lease>"};
    return {resp->keys().begin(), resp->keys().end()};
  }

  // Several revisions, deletions, a lease with two keys and a compaction to revision 4;
  // leaves the member running. Returns the final revision (11).
  int64_t WriteHistory() {
    EXPECT_EQ(Put("a", "1"), 2);
    EXPECT_EQ(Put("b", "1"), 3);
    EXPECT_EQ(Put("a", "2"), 4);
    Delete("b");  // 5
    GrantLease(77);
    EXPECT_EQ(Put("l1", "x", 77), 6);
    EXPECT_EQ(Put("l2", "y", 77), 7);
    EXPECT_EQ(Put("c", "1"), 8);
    EXPECT_EQ(Put("a", "3"), 9);
    Compact(4);
    EXPECT_EQ(Put("d", "1"), 10);
    Delete("c");  // 11
    EXPECT_EQ(server_->kv().Rev(), 11);
    return 11;
  }

  // Writes the running member's state to `path` through its snapshot API.
  void SaveSnapshot(const std::string& path) {
    auto snap = Await<std::pair<std::shared_ptr<mvcc::SnapshotFileStream>, uint64_t>>(
        [&](auto cb) { server_->OpenSnapshot(cb); });
    ASSERT_TRUE(snap.ok()) << snap.status().ToString();
    std::ofstream out(path, std::ios::binary);
    std::string buf;
    while (true) {
      buf.clear();
      auto more = snap->first->Next(buf, 1 << 20);
      ASSERT_TRUE(more.ok()) << more.status().ToString();
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      if (!*more) break;
    }
    out.close();
    ASSERT_EQ(fs::file_size(path), snap->second);
  }

  // A copy of the stopped source directory, changed through the storage engine directly.
  std::string DamagedCopy(const std::string& name,
                          const std::function<void(storage::Engine&, storage::Batch&)>& damage) {
    const std::string dir = root_ + "/" + name;
    fs::copy(src_, dir, fs::copy_options::recursive);
    auto e = storage::Engine::Open(dir + "/member/store", {});
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok()) return dir;
    storage::Batch b(**e);
    damage(**e, b);
    EXPECT_TRUE((*e)->Write(b, /*sync=*/true).ok());
    return dir;
  }

  bool NothingAt(const std::string& dir) {
    return !fs::exists(dir) && !fs::exists(dir + ".restoring");
  }

  common::ManualClock clock_;
  std::unique_ptr<testsupport::ScratchDir> scratch_;  // removed by TearDown
  std::string root_, src_, dst_, snap_;
  std::unique_ptr<member::EtcdServer> server_;
};

// ---------------------------------------------------------------------------------------------
// RestoreDataDir

TEST_F(DataDirTest, RestoredMemberServesTheSnapshotsStateAsANewCluster) {
  Start(src_);
  const int64_t rev = WriteHistory();
  auto all = RangeAll();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->kvs_size(), 4);  // a, d, l1, l2
  auto at5 = RangeAll(5);
  ASSERT_TRUE(at5.ok());
  const uint64_t old_cluster = server_->cluster_id();
  SaveSnapshot(snap_);
  StopServer();

  ASSERT_TRUE(RestoreDataDir(snap_, dst_, NewTarget(), false).ok());
  EXPECT_FALSE(fs::exists(dst_ + ".restoring"));
  DataDirCheck before_start = CheckDataDir(dst_, true);
  EXPECT_EQ(before_start.state, DataDirState::kValid) << before_start.detail;
  EXPECT_EQ(before_start.revision, rev);

  Start(dst_, kRestoredIdentity);
  EXPECT_EQ(server_->kv().Rev(), rev);
  EXPECT_EQ(server_->kv().CompactRev(), 4);
  auto restored_all = RangeAll();
  ASSERT_TRUE(restored_all.ok());
  EXPECT_EQ(Serialized(*restored_all), Serialized(*all));  // create/mod revisions, versions
  // History since the compaction is there, and nothing before it.
  auto restored_at5 = RangeAll(5);
  ASSERT_TRUE(restored_at5.ok());
  EXPECT_EQ(Serialized(*restored_at5), Serialized(*at5));
  auto at3 = RangeAll(3);
  ASSERT_FALSE(at3.ok());
  EXPECT_EQ(at3.status(), errors::Compacted());
  EXPECT_EQ(LeaseKeys(77), (std::vector<std::string>{"l1", "l2"}));

  // One member, the new one, in a new cluster.
  const uint64_t id = cluster::ComputeMemberId({kNewUrl}, kNewToken);
  EXPECT_EQ(server_->member_id(), id);
  EXPECT_EQ(server_->cluster_id(), cluster::ComputeClusterId({id}));
  EXPECT_NE(server_->cluster_id(), old_cluster);
  auto members = server_->MemberList();
  ASSERT_EQ(members.members_size(), 1);
  EXPECT_EQ(members.members(0).id(), id);
  EXPECT_EQ(members.members(0).name(), "restored");
  ASSERT_EQ(members.members(0).peerurls_size(), 1);
  EXPECT_EQ(members.members(0).peerurls(0), kNewUrl);

  EXPECT_EQ(Put("new", "v"), rev + 1);
  EXPECT_EQ(Get("a")->mod_revision(), 9);

  // The first start made the directory an ordinary one: the restore record is gone and a
  // restart (which ignores the initial-cluster settings) finds the same member and data.
  StopServer();
  {
    auto e = storage::Engine::Open(dst_ + "/member/store", {});
    ASSERT_TRUE(e.ok());
    auto marker = cluster::LoadRestoredIdentity(**e);
    ASSERT_TRUE(marker.ok());
    EXPECT_FALSE(marker->has_value());
  }
  Start(dst_, kRestoredIdentity);
  EXPECT_EQ(server_->member_id(), id);
  EXPECT_EQ(server_->kv().Rev(), rev + 1);
  EXPECT_EQ(server_->MemberList().members_size(), 1);
}

// The export (mvcc/etcd_export.h) with a sort memory so small that the versions below the
// compaction are sorted in many spilled runs, restored by RestoreDataDir: the same store, every
// key at every revision from the compaction on, the leases and their keys, the revisions.
TEST_F(DataDirTest, EtcdExportWithSpilledSortRunsRestoresEveryRevision) {
  Start(src_);
  std::mt19937 rng(5);
  GrantLease(91);
  for (int i = 0; i < 300; ++i) {
    Put("k/" + std::to_string(rng() % 200), std::string(1 + rng() % 300, 'a' + i % 26),
        i % 17 == 0 ? 91 : 0);
    if (i % 23 == 0) {  // a transaction: several changes in one revision
      etcdserverpb::TxnRequest t;
      for (int j = 0; j < 3; ++j) {
        auto* put = t.add_success()->mutable_request_put();
        put->set_key("t/" + std::to_string(i) + "/" + std::to_string(j));
        put->set_value(std::string(5000 * j, 'x'));
      }
      ASSERT_TRUE(Await<etcdserverpb::TxnResponse>([&](auto cb) { server_->Txn(t, cb); }).ok());
    }
  }
  Delete("t/0/1");
  const int64_t compacted = Put("k/mid", "m");
  Compact(compacted);
  for (int i = 0; i < 50; ++i) Put("k/" + std::to_string(rng() % 200), "after");
  Delete("k/mid");
  const int64_t last = server_->kv().Rev();
  std::vector<std::vector<std::string>> want;
  for (int64_t rev = compacted; rev <= last; ++rev) {
    auto r = RangeAll(rev);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    want.push_back(Serialized(*r));
  }
  const std::vector<std::string> leased = LeaseKeys(91);
  ASSERT_GT(leased.size(), 5u);
  StopServer();

  {
    auto engine = storage::Engine::Open(src_ + "/member/store", {});
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    auto pinned = (*engine)->GetSnapshot();
    mvcc::EtcdExportOptions opts;
    opts.sort_memory = 2048;
    opts.members = {{0x1234, "old", {"http://127.0.0.1:1"}, {}, false}};
    opts.cluster_version = "3.5.0";
    auto summary = mvcc::ExportEtcdBackend(**engine, *pinned, snap_, opts);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    EXPECT_EQ(summary->revision, last);
    EXPECT_EQ(summary->compact_revision, compacted);
    EXPECT_GE(summary->sort_runs, 3u);
    EXPECT_GT(summary->compacted_changes, 150u);
    EXPECT_EQ(summary->leases, 1u);
    EXPECT_EQ(fs::file_size(snap_), summary->db_bytes);
    ASSERT_TRUE(mvcc::AppendSha256Trailer(snap_).ok());
    // The runs are gone; an existing file is not overwritten.
    for (const auto& e : fs::directory_iterator(root_)) {
      EXPECT_EQ(e.path().filename().string().find(".sort-"), std::string::npos) << e.path();
    }
    auto twice = mvcc::ExportEtcdBackend(**engine, *pinned, snap_, opts);
    EXPECT_EQ(twice.status().code(), Code::kAlreadyExists);
    EXPECT_EQ(fs::file_size(snap_) % 512, 32u);
  }
  ASSERT_TRUE(RestoreDataDir(snap_, dst_, NewTarget(), false).ok());
  Start(dst_, kRestoredIdentity);
  EXPECT_EQ(server_->kv().Rev(), last);
  EXPECT_EQ(server_->kv().CompactRev(), compacted);
  for (int64_t rev = compacted; rev <= last; ++rev) {
    auto r = RangeAll(rev);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Serialized(*r), want[static_cast<size_t>(rev - compacted)]) << "revision " << rev;
  }
  EXPECT_FALSE(RangeAll(compacted - 1).ok());
  EXPECT_EQ(LeaseKeys(91), leased);
}

// A store whose revision log names a version the Keys column lacks is not exported: DataLoss
// naming the revision, and no file left behind.
TEST_F(DataDirTest, EtcdExportRefusesInconsistentRecordsAndLeavesNothing) {
  Start(src_);
  ASSERT_EQ(Put("a", "1"), 2);
  ASSERT_EQ(Put("b", "1"), 3);
  StopServer();
  auto engine = storage::Engine::Open(src_ + "/member/store", {});
  ASSERT_TRUE(engine.ok());
  storage::Batch b(**engine);
  b.Delete(Column::kKeys, storage::MakeVersionedKey("b", 3));
  ASSERT_TRUE((*engine)->Write(b, true).ok());
  auto pinned = (*engine)->GetSnapshot();
  auto summary = mvcc::ExportEtcdBackend(**engine, *pinned, snap_, {});
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), Code::kDataLoss);
  EXPECT_NE(summary.status().message().find("at revision 3"), std::string::npos)
      << summary.status().ToString();
  EXPECT_FALSE(fs::exists(snap_));
}

TEST_F(DataDirTest, RestoredDirectoryStartsOnlyAsTheMemberItWasMadeFor) {
  Start(src_);
  ASSERT_EQ(Put("k", "v"), 2);
  SaveSnapshot(snap_);
  StopServer();
  ASSERT_TRUE(RestoreDataDir(snap_, dst_, NewTarget(), false).ok());

  auto other_token = OpenServer(
      dst_, "name: restored\ninitial-advertise-peer-urls: " + std::string(kNewUrl) +
                "\ninitial-cluster: restored=" + kNewUrl + "\ninitial-cluster-token: other\n");
  ASSERT_FALSE(other_token.ok());
  EXPECT_EQ(other_token.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(other_token.status().message().find(
                "restored from a snapshot for member " +
                cluster::IdToHex(cluster::ComputeMemberId({kNewUrl}, kNewToken))),
            std::string::npos)
      << other_token.status().ToString();

  auto joining = OpenServer(dst_, kRestoredIdentity + "initial-cluster-state: existing\n");
  ASSERT_FALSE(joining.ok());
  EXPECT_EQ(joining.status().code(), Code::kFailedPrecondition);

  // The refusals changed nothing: the right settings still start it.
  Start(dst_, kRestoredIdentity);
  EXPECT_EQ(Get("k")->value(), "v");
}

TEST_F(DataDirTest, RestoreRefusesAnExistingDirectory) {
  Start(src_);
  Put("k", "v");
  SaveSnapshot(snap_);
  StopServer();
  ASSERT_TRUE(fs::create_directory(dst_));
  Status st = RestoreDataDir(snap_, dst_, NewTarget(), false);
  EXPECT_EQ(st.code(), Code::kAlreadyExists) << st.ToString();
  EXPECT_TRUE(fs::is_empty(dst_));
  EXPECT_FALSE(fs::exists(dst_ + ".restoring"));
}

TEST_F(DataDirTest, RestoreRefusesADamagedSnapshotAndLeavesNothing) {
  Start(src_);
  WriteHistory();
  SaveSnapshot(snap_);
  StopServer();
  const std::string damaged = root_ + "/damaged.db";
  fs::copy_file(snap_, damaged);
  ASSERT_TRUE(testsupport::FlipByte(damaged, fs::file_size(damaged) / 2));

  Status st = RestoreDataDir(damaged, dst_, NewTarget(), false);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("SHA-256"), std::string::npos) << st.ToString();
  EXPECT_TRUE(NothingAt(dst_));

  // A stale temporary directory from an interrupted restore is no obstacle, and is cleaned.
  ASSERT_TRUE(fs::create_directories(dst_ + ".restoring/member"));
  Status missing = RestoreDataDir(root_ + "/none.db", dst_, NewTarget(), false);
  EXPECT_EQ(missing.code(), Code::kNotFound) << missing.ToString();
  EXPECT_TRUE(fs::exists(dst_ + ".restoring")) << "a refused call removes nothing";

  // A truncated file fails on its structure even when the hash check is skipped.
  const std::string truncated = root_ + "/truncated.db";
  fs::copy_file(snap_, truncated);
  fs::resize_file(truncated, fs::file_size(truncated) - 600);
  st = RestoreDataDir(truncated, dst_, NewTarget(), true);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_TRUE(NothingAt(dst_));
}

TEST_F(DataDirTest, SkipHashCheckAcceptsABadTrailerOnly) {
  Start(src_);
  const int64_t rev = WriteHistory();
  SaveSnapshot(snap_);
  StopServer();
  ASSERT_TRUE(testsupport::FlipByte(snap_, fs::file_size(snap_) - 1));
  Status st = RestoreDataDir(snap_, dst_, NewTarget(), false);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_TRUE(NothingAt(dst_));

  ASSERT_TRUE(RestoreDataDir(snap_, dst_, NewTarget(), true).ok());
  DataDirCheck c = CheckDataDir(dst_, true);
  EXPECT_EQ(c.state, DataDirState::kValid) << c.detail;
  EXPECT_EQ(c.revision, rev);
}

TEST_F(DataDirTest, RestoreRefusesATargetOutsideItsInitialCluster) {
  Start(src_);
  Put("k", "v");
  SaveSnapshot(snap_);
  StopServer();
  RestoreTarget t = NewTarget();
  t.name = "elsewhere";
  Status st = RestoreDataDir(snap_, dst_, t, false);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_TRUE(NothingAt(dst_));
  t = NewTarget();
  t.initial_advertise_peer_urls = {"http://127.0.0.1:1"};
  st = RestoreDataDir(snap_, dst_, t, false);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  t = NewTarget();
  t.initial_cluster = std::string("restored=") + kNewUrl + ",other=" + kNewUrl;
  st = RestoreDataDir(snap_, dst_, t, false);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_TRUE(NothingAt(dst_));
}

// ---------------------------------------------------------------------------------------------
// OfflineStore

TEST_F(DataDirTest, OfflineStoreAppliesRevisionsThatAMemberThenServes) {
  Start(src_);
  ASSERT_EQ(Put("a", "1"), 2);
  GrantLease(77);
  ASSERT_EQ(Put("l", "1", 77), 3);
  StopServer();

  auto db = OfflineStore::Open(src_);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  OfflineStore& s = **db;
  EXPECT_EQ(s.Rev(), 3);
  // A known lease is attached; an unknown one is dropped and reported.
  ASSERT_TRUE(s.ApplyRevision({PutEvent("x", "1", 4, 77), PutEvent("y", "1", 4, 999)}).ok());
  EXPECT_EQ(s.orphaned_lease_keys(), std::vector<std::string>{"y"});
  ASSERT_TRUE(s.ApplyRevision({DeleteEvent("a", 5), PutEvent("x", "2", 5)}).ok());
  ASSERT_TRUE(s.ApplyRevision({PutEvent("l", "2", 6, 77)}).ok());
  EXPECT_EQ(s.Rev(), 6);

  // Refused revisions change nothing.
  Status st = s.ApplyRevision({PutEvent("p", "1", 8)});
  EXPECT_EQ(st.message(),
            "mismatched event revision while applying delta snapshot, expected 7 but applied 8");
  st = s.ApplyRevision({PutEvent("p", "1", 7), PutEvent("q", "1", 8)});
  EXPECT_EQ(st.message(),
            "mismatched event revision while applying delta snapshot, expected 7 but applied 8");
  st = s.ApplyRevision({DeleteEvent("missing", 7)});  // changes nothing: not this store's past
  EXPECT_FALSE(st.ok());
  st = s.ApplyRevision({PutEvent("z", "1", 7), DeleteEvent("z", 7)});
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  st = s.ApplyRevision({});
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_EQ(s.Rev(), 6);
  EXPECT_EQ(s.orphaned_lease_keys().size(), 1u);
  ASSERT_TRUE(s.Close().ok());
  EXPECT_EQ(s.Rev(), 6);
  EXPECT_EQ(s.ApplyRevision({PutEvent("p", "1", 7)}).code(), Code::kFailedPrecondition);

  DataDirCheck c = CheckDataDir(src_, true);
  EXPECT_EQ(c.state, DataDirState::kValid) << c.detail;
  EXPECT_EQ(c.revision, 6);

  Start(src_);
  EXPECT_EQ(server_->kv().Rev(), 6);
  auto x = Get("x");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->value(), "2");
  EXPECT_EQ(x->create_revision(), 4);
  EXPECT_EQ(x->mod_revision(), 5);
  EXPECT_EQ(x->version(), 2);
  EXPECT_EQ(x->lease(), 0);
  auto x4 = Get("x", 4);
  ASSERT_TRUE(x4);
  EXPECT_EQ(x4->lease(), 77);
  EXPECT_EQ(Get("y")->lease(), 0);
  EXPECT_FALSE(Get("a"));
  EXPECT_TRUE(Get("a", 4));
  EXPECT_FALSE(Get("p"));
  auto l = Get("l");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->version(), 2);
  EXPECT_EQ(l->lease(), 77);
  EXPECT_EQ(LeaseKeys(77), std::vector<std::string>{"l"});  // x left the lease at 5
  EXPECT_EQ(Put("after", "v"), 7);
}

TEST_F(DataDirTest, OfflineStoreOpensOnlyAStoreNobodyHolds) {
  EXPECT_EQ(OfflineStore::Open(src_).status().code(), Code::kNotFound);
  Start(src_);
  Put("k", "v");
  auto busy = OfflineStore::Open(src_);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), Code::kFailedPrecondition) << busy.status().ToString();
  StopServer();
  auto db = OfflineStore::Open(src_);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ((*db)->Rev(), 2);
  // Closed by its destructor, which releases the store.
  db->reset();
  Start(src_);
  EXPECT_EQ(Get("k")->value(), "v");
}

TEST_F(DataDirTest, OfflineStoreWorksOnARestoredDirectoryBeforeItsFirstStart) {
  Start(src_);
  const int64_t rev = WriteHistory();
  SaveSnapshot(snap_);
  StopServer();
  ASSERT_TRUE(RestoreDataDir(snap_, dst_, NewTarget(), false).ok());
  {
    auto db = OfflineStore::Open(dst_);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_TRUE((*db)->ApplyRevision({PutEvent("l1", "z", rev + 1, 77)}).ok());
    ASSERT_TRUE((*db)->Close().ok());
  }
  // The bootstrap entries are still applied (the applied index stayed 0).
  Start(dst_, kRestoredIdentity);
  EXPECT_EQ(server_->MemberList().members_size(), 1);
  EXPECT_EQ(server_->kv().Rev(), rev + 1);
  EXPECT_EQ(Get("l1")->version(), 2);
  EXPECT_EQ(LeaseKeys(77), (std::vector<std::string>{"l1", "l2"}));
}

// ---------------------------------------------------------------------------------------------
// CheckDataDir

TEST_F(DataDirTest, CheckAcceptsAValidDirectoryInBothModes) {
  Start(src_);
  const int64_t rev = WriteHistory();
  StopServer();
  for (bool full : {false, true}) {
    DataDirCheck c = CheckDataDir(src_, full);
    EXPECT_EQ(c.state, DataDirState::kValid) << c.detail;
    EXPECT_EQ(c.detail, "");
    EXPECT_EQ(c.revision, rev);
    EXPECT_EQ(c.unapplied_entries, 0u);
  }
  // The check leaves the directory as a member needs it.
  Start(src_);
  EXPECT_EQ(server_->kv().Rev(), rev);
}

TEST_F(DataDirTest, CheckReportsMissingDirectoriesAndStructure) {
  for (bool full : {false, true}) {
    EXPECT_EQ(CheckDataDir(root_ + "/missing", full).state, DataDirState::kNotExist);
  }
  const std::string d = root_ + "/d";
  ASSERT_TRUE(fs::create_directory(d));
  EXPECT_EQ(CheckDataDir(d, false).state, DataDirState::kInvalidStruct);
  ASSERT_TRUE(fs::create_directory(d + "/member"));
  EXPECT_EQ(CheckDataDir(d, false).state, DataDirState::kInvalidStruct);
  ASSERT_TRUE(fs::create_directory(d + "/member/store"));
  DataDirCheck c = CheckDataDir(d, true);
  EXPECT_EQ(c.state, DataDirState::kInvalidStruct);
  EXPECT_NE(c.detail, "");
  // Nothing was created by looking.
  EXPECT_TRUE(fs::is_empty(d + "/member/store"));
  std::ofstream(root_ + "/file") << "x";
  EXPECT_EQ(CheckDataDir(root_ + "/file", false).state, DataDirState::kInvalidStruct);
}

TEST_F(DataDirTest, CheckReportsAStoreInUseAsLocked) {
  Start(src_);
  Put("k", "v");
  for (bool full : {false, true}) {
    DataDirCheck c = CheckDataDir(src_, full);
    EXPECT_EQ(c.state, DataDirState::kLocked) << c.detail;
  }
  // The member still works: the check did not take or break its lock.
  EXPECT_EQ(Put("k", "w"), 3);
  StopServer();
  {
    auto e = storage::Engine::Open(src_ + "/member/store", {});
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(CheckDataDir(src_, false).state, DataDirState::kLocked);
  }
  EXPECT_EQ(CheckDataDir(src_, false).state, DataDirState::kValid);
}

TEST_F(DataDirTest, CheckReportsAStoreHeldByAnotherProcessAsLocked) {
  Start(src_);
  Put("k", "v");
  StopServer();
  // The child takes RocksDB's lock (an fcntl write lock on LOCK) with async-signal-safe calls
  // only, as a forked child of a threaded process must.
  int ready[2], release[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  const std::string lock_file = src_ + "/member/store/LOCK";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = open(lock_file.c_str(), O_RDWR);
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    char ok = (fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0) ? '1' : '0';
    (void)!write(ready[1], &ok, 1);
    (void)!read(release[0], &ok, 1);
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  EXPECT_EQ(ok, '1');
  DataDirCheck c = CheckDataDir(src_, false);
  EXPECT_EQ(c.state, DataDirState::kLocked) << c.detail;
  EXPECT_EQ(OfflineStore::Open(src_).status().code(), Code::kFailedPrecondition);
  ASSERT_EQ(write(release[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  for (int fd : {ready[0], ready[1], release[0], release[1]}) close(fd);
  EXPECT_EQ(CheckDataDir(src_, false).state, DataDirState::kValid);
}

TEST_F(DataDirTest, FullCheckFindsAFlippedByteInATableFile) {
  Start(src_);
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string v(2000, ' ');
    for (char& ch : v) ch = static_cast<char>(rng());  // incompressible
    Put("key" + std::to_string(i), v);
  }
  StopServer();  // flushes: the data is in table files
  std::string biggest;
  uintmax_t size = 0;
  for (const auto& f : fs::directory_iterator(src_ + "/member/store")) {
    if (f.path().extension() == ".sst" && f.file_size() > size) {
      size = f.file_size();
      biggest = f.path().string();
    }
  }
  ASSERT_GT(size, 100000u) << "no table file holds the data";
  ASSERT_EQ(CheckDataDir(src_, true).state, DataDirState::kValid);
  // In a data block in the middle of the file, away from the blocks a start reads.
  ASSERT_TRUE(testsupport::FlipByte(biggest, size / 3));
  DataDirCheck full = CheckDataDir(src_, true);
  EXPECT_EQ(full.state, DataDirState::kCorrupt);
  EXPECT_NE(full.detail.find("checksum"), std::string::npos) << full.detail;
  // A sanity check reads no key, so that its cost does not grow with the data (gardener's reads
  // none of bbolt's data pages either): it passes. The member's start after this clean stop loads
  // the key index it saved and reads no key either; a read of a key in the damaged block fails
  // (RocksDB checks every block it reads), as does a start that rebuilds the index (after an
  // unclean stop, when the wrapper also asks for the full check).
  EXPECT_EQ(CheckDataDir(src_, false).state, DataDirState::kValid);
  auto engine = storage::Engine::Open(src_ + "/member/store", {});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto kv = mvcc::KvStore::Open(**engine);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  ASSERT_TRUE((*kv)->loaded_saved_index());
  int damaged = 0;
  for (int i = 0; i < 200; ++i) {
    auto view = (*kv)->NewReadView();
    auto r = view->FindNewest("key" + std::to_string(i));
    ASSERT_TRUE(r.has_value());
    if (!r->ok()) {
      EXPECT_EQ(r->status().code(), Code::kDataLoss) << r->status().ToString();
      ++damaged;
    }
  }
  EXPECT_GT(damaged, 0) << "no read found the flipped byte";
  auto rebuilt = mvcc::KvStore::Open(**engine, {.use_saved_index = false});
  ASSERT_FALSE(rebuilt.ok());
  EXPECT_EQ(rebuilt.status().code(), Code::kDataLoss) << rebuilt.status().ToString();
}

TEST_F(DataDirTest, FullCheckFindsMvccInconsistencies) {
  Start(src_);
  WriteHistory();
  StopServer();
  struct Case {
    const char* name;
    std::function<void(storage::Engine&, storage::Batch&)> damage;
    const char* expect;  // in the detail
  };
  const std::vector<Case> cases = {
      {"revision-record-deleted",
       [](storage::Engine&, storage::Batch& b) {
         b.Delete(Column::kRevisions, mvcc::EncodeRevisionKey({9, 0}));  // put a=3
       },
       "revision 9 has no revision log record"},
      {"version-deleted",
       [](storage::Engine&, storage::Batch& b) {
         b.Delete(Column::kKeys, storage::MakeVersionedKey("d", 10));
       },
       "revision log record 10.0 (put of key \"d\") has no matching key version"},
      {"version-above-current-revision",
       [](storage::Engine&, storage::Batch& b) {
         b.Put(Column::kKeys, storage::MakeVersionedKey("z", 50), "");
       },
       "outside [1, current revision 11]"},
      {"lease-record-deleted",
       [](storage::Engine&, storage::Batch& b) {
         b.Delete(Column::kLeases, mvcc::LeaseTable::RecordKey(77));
       },
       "which does not exist"},
      {"lease-attachment-deleted",
       [](storage::Engine&, storage::Batch& b) {
         b.Delete(Column::kLeases, mvcc::LeaseTable::AttachmentPrefix(77) + "l2");
       },
       "missing from the lease's attached keys"},
      {"version-below-compaction-kept",
       [](storage::Engine&, storage::Batch& b) {
         b.Put(Column::kRevisions, mvcc::EncodeRevisionKey({2, 0}), "pa");
       },
       "below the finished compaction revision 4"},
      {"saved-key-index-disagrees",
       [](storage::Engine& e, storage::Batch& b) {
         // A copy of the key index saved at the current revision, but of other keys.
         mvcc::KeyIndex other;
         mvcc::KeyChanges changes;
         changes["zz"] = mvcc::KeyMeta{1, 1, 1, 0};
         other.Apply(changes, mvcc::ReadStoreMeta(e).value().rev);
         other.StageSave(b);
       },
       "the key index saved at revision 11 does not match the keys in the store"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = DamagedCopy(c.name, c.damage);
    DataDirCheck full = CheckDataDir(dir, true);
    EXPECT_EQ(full.state, DataDirState::kCorrupt);
    EXPECT_NE(full.detail.find(c.expect), std::string::npos) << full.detail;
  }
  // Sanity does not read the MVCC data.
  EXPECT_EQ(CheckDataDir(root_ + "/revision-record-deleted", false).state, DataDirState::kValid);
}

TEST_F(DataDirTest, BothChecksFindDamagedMetadataRecords) {
  Start(src_);
  for (int i = 0; i < 5; ++i) Put("k", std::to_string(i));
  StopServer();
  const std::string short_rev = DamagedCopy("short-rev", [](storage::Engine&, storage::Batch& b) {
    b.Put(Column::kMeta, storage::meta::kCurrentRev.key, "123");
  });
  const std::string compaction_ahead = DamagedCopy("compaction-ahead", [](storage::Engine&,
                                                                          storage::Batch& b) {
    b.Put(Column::kMeta, storage::meta::kScheduledCompactRev.key, storage::EncodeFixed64BE(1000));
  });
  for (bool full : {false, true}) {
    DataDirCheck c = CheckDataDir(short_rev, full);
    EXPECT_EQ(c.state, DataDirState::kCorrupt) << full;
    EXPECT_NE(c.detail.find("is corrupt"), std::string::npos) << c.detail;
    c = CheckDataDir(compaction_ahead, full);
    EXPECT_EQ(c.state, DataDirState::kCorrupt) << full;
    EXPECT_NE(c.detail.find("compaction records are inconsistent"), std::string::npos) << c.detail;
  }
}

TEST_F(DataDirTest, EveryMetaRecordAMemberWritesIsDeclared) {
  Start(src_);
  WriteHistory();
  etcdserverpb::AlarmRequest alarm;
  alarm.set_action(etcdserverpb::AlarmRequest::ACTIVATE);
  alarm.set_memberid(server_->member_id());
  alarm.set_alarm(etcdserverpb::NOSPACE);
  ASSERT_TRUE(Await<etcdserverpb::AlarmResponse>([&](auto cb) { server_->Alarm(alarm, cb); }).ok());
  StopServer();  // a clean stop also saves the key index
  std::set<const storage::meta::Record*> seen;
  {
    auto e = storage::Engine::Open(src_ + "/member/store", {});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    auto it = (*e)->NewIterator(Column::kMeta);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const storage::meta::Record* r = storage::meta::Find(it->key());
      EXPECT_NE(r, nullptr) << "undeclared: " << storage::meta::Printable(it->key());
      seen.insert(r);
    }
  }
  namespace meta = storage::meta;
  for (const meta::Record* r :
       {&meta::kCurrentRev, &meta::kConsistentIndex, &meta::kScheduledCompactRev,
        &meta::kFinishedCompactRev, &meta::kClusterId, &meta::kClusterMembers, &meta::kAlarms,
        &meta::kLocalMemberId, &meta::kKeyIndexHead, &meta::kKeyIndexChunks}) {
    EXPECT_TRUE(seen.count(r)) << "not written: " << r->key;
  }
  EXPECT_EQ(CheckDataDir(src_, true).state, DataDirState::kValid);
  // A record nothing declares is reported by the full check, naming it.
  const std::string dir = DamagedCopy("undeclared", [](storage::Engine&, storage::Batch& b) {
    b.Put(Column::kMeta, std::string("cluster/\x02", 9), "");
  });
  DataDirCheck full = CheckDataDir(dir, true);
  EXPECT_EQ(full.state, DataDirState::kCorrupt);
  EXPECT_NE(full.detail.find("meta record \"cluster/\\x02\" is not one this version knows"),
            std::string::npos)
      << full.detail;
  EXPECT_EQ(CheckDataDir(dir, false).state, DataDirState::kValid);
  // An auth record the member could not load, too.
  const std::string bad_user = DamagedCopy("auth", [](storage::Engine&, storage::Batch& b) {
    b.Put(Column::kMeta, meta::KeyIn(meta::kAuthUsers, "alice"), "\x0a\x03bob");
  });
  full = CheckDataDir(bad_user, true);
  EXPECT_EQ(full.state, DataDirState::kCorrupt);
  EXPECT_NE(full.detail.find("meta record \"auth/user/alice\" is corrupt"), std::string::npos)
      << full.detail;
}

TEST_F(DataDirTest, CheckJudgesTheRaftStateAgainstTheAppliedIndex) {
  Start(src_);
  for (int i = 0; i < 20; ++i) Put("k", std::to_string(i));
  StopServer();
  uint64_t applied = 0;
  {
    auto e = storage::Engine::Open(src_ + "/member/store", {});
    ASSERT_TRUE(e.ok());
    auto kv = mvcc::KvStore::Open(**e);
    ASSERT_TRUE(kv.ok());
    applied = (*kv)->ConsistentIndex();
  }
  ASSERT_GT(applied, 10u);
  auto set_applied = [](uint64_t index) {
    return [index](storage::Engine&, storage::Batch& b) {
      b.Put(Column::kMeta, storage::meta::kConsistentIndex.key, storage::EncodeFixed64BE(index));
    };
  };
  // Committed entries the store has not applied yet: valid, and counted.
  const std::string behind = DamagedCopy("behind", set_applied(applied - 3));
  for (bool full : {false, true}) {
    DataDirCheck c = CheckDataDir(behind, full);
    EXPECT_EQ(c.state, DataDirState::kValid) << c.detail;
    EXPECT_EQ(c.unapplied_entries, 3u);
  }
  // Applied beyond the end of the log: entries the log lost.
  const std::string ahead = DamagedCopy("ahead", set_applied(applied + 5));
  DataDirCheck c = CheckDataDir(ahead, false);
  EXPECT_EQ(c.state, DataDirState::kCorrupt);
  EXPECT_NE(
      c.detail.find("applied index " + std::to_string(applied + 5) + " beyond the last log entry"),
      std::string::npos)
      << c.detail;

  // Changes to the log's hard state, as the next start would read it.
  auto with_hard_state = [&](const std::string& name,
                             const std::function<void(raftpb::HardState&)>& change) {
    const std::string dir = root_ + "/" + name;
    fs::copy(src_, dir, fs::copy_options::recursive);
    storage::RaftLog log(dir + "/member/wal");
    EXPECT_TRUE(log.Open(nullptr).ok());
    raftpb::HardState hs = log.hard_state();
    change(hs);
    EXPECT_TRUE(log.Append({}, &hs, /*sync=*/true).ok());
    return dir;
  };
  // Applied beyond the durable commit index but within the log: the commit index is synced only
  // with entries, and whatever was applied was committed.
  const std::string lagging =
      with_hard_state("lagging-commit", [&](raftpb::HardState& hs) { hs.set_commit(applied - 4); });
  for (bool full : {false, true}) {
    c = CheckDataDir(lagging, full);
    EXPECT_EQ(c.state, DataDirState::kValid) << c.detail;
    EXPECT_EQ(c.unapplied_entries, 0u);
  }
  // Entries of a term above the hard state's: only the full check reads the entries.
  const std::string old_term =
      with_hard_state("old-term", [](raftpb::HardState& hs) { hs.set_term(0); });
  EXPECT_EQ(CheckDataDir(old_term, false).state, DataDirState::kValid);
  c = CheckDataDir(old_term, true);
  EXPECT_EQ(c.state, DataDirState::kCorrupt);
  EXPECT_NE(c.detail.find("outside ["), std::string::npos) << c.detail;

  // A damaged byte in the middle of the log's records: both checks verify the checksums.
  const std::string garbled = root_ + "/garbled";
  fs::copy(src_, garbled, fs::copy_options::recursive);
  for (const auto& f : fs::directory_iterator(garbled + "/member/wal")) {
    const std::string data = testsupport::ReadFile(f.path());
    ASSERT_TRUE(testsupport::FlipByte(f.path(), data.find_last_not_of('\0') / 2, 0x41));
  }
  for (bool full : {false, true}) {
    c = CheckDataDir(garbled, full);
    EXPECT_EQ(c.state, DataDirState::kCorrupt) << c.detail;
  }
}

}  // namespace
}  // namespace etcdw::data_dir
