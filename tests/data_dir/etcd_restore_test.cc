// RestoreDataDir with etcd's own snapshot format (a bbolt database with etcd's SHA-256 trailer):
// the snapshot etcd 3.4.23 made (support/etcd_fixture.h) restored and compared, change by change,
// with what the bbolt reader finds in its `key` bucket; the lease and compaction carried over; a
// started member serving it; damaged copies refused with nothing left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "etcd_backend.h"
#include "etcdw/bbolt/db.h"
#include "etcdw/bbolt/writer.h"
#include "etcdw/common/etcd_errors.h"
#include "etcdw/data_dir/data_dir.h"
#include "etcdw/member/etcd_server.h"
#include "etcdw/mvcc/etcd_export.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/storage/engine.h"
#include "support/await.h"
#include "support/etcd_fixture.h"
#include "support/files.h"
#include "support/local_member.h"
#include "support/scratch_dir.h"

namespace etcdw::data_dir {
namespace {

namespace fs = std::filesystem;
using testsupport::kEtcdFixtureCompactRevision;
using testsupport::kEtcdFixtureRevision;

constexpr char kUrl[] = "http://127.0.0.1:23991";
constexpr int64_t kTrailer = 32;
constexpr uint64_t kPage = 4096;

RestoreTarget Target() {
  return RestoreTarget{"restored", std::string("restored=") + kUrl, "tok", {kUrl}};
}
const std::string kIdentity = std::string("name: restored\ninitial-advertise-peer-urls: ") + kUrl +
                              "\ninitial-cluster: restored=" + kUrl +
                              "\ninitial-cluster-token: tok\n";

// One change of etcd's `key` bucket.
struct EtcdChange {
  int64_t main = 0;
  bool tombstone = false;
  mvccpb::KeyValue kv;
};

class EtcdRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(scratch_.path().empty());
    root_ = scratch_.path();
    snap_ = root_ + "/etcd.db";
    dst_ = root_ + "/dst";
    bytes_ = testsupport::EtcdFixtureSnapshot();
    ASSERT_EQ(bytes_.size() % 512, static_cast<size_t>(kTrailer));
    ASSERT_TRUE(testsupport::WriteFile(snap_, bytes_));
  }

  // Every change in the snapshot's `key` bucket, read with the bbolt reader.
  std::vector<EtcdChange> EtcdChanges() {
    std::vector<EtcdChange> out;
    auto db = bbolt::BoltDb::Open(snap_, static_cast<int64_t>(bytes_.size()) - kTrailer);
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    if (!db.ok()) return out;
    Status st = (*db)->ForEach({"key"}, [&](std::string_view k, std::string_view v, bool) {
      auto rev = internal::ParseEtcdRevisionKey(k);
      if (!rev.ok()) return rev.status();
      EtcdChange& c = out.emplace_back();
      c.main = rev->rev.main;
      c.tombstone = rev->tombstone;
      EXPECT_TRUE(c.kv.ParseFromArray(v.data(), static_cast<int>(v.size())));
      return Status::Ok();
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  bool NothingAt(const std::string& dir) {
    return !fs::exists(dir) && !fs::exists(dir + ".restoring");
  }

  testsupport::ScratchDir scratch_{"etcdrestore"};
  std::string root_, snap_, dst_, bytes_;
};

std::map<std::string, std::string> Serialized(const mvcc::RangeResult& r) {
  std::map<std::string, std::string> out;
  for (const auto& kv : r.kvs) out[kv.key()] = kv.SerializeAsString();
  return out;
}

TEST_F(EtcdRestoreTest, ParsesEtcdsRecordKeysAndLeases) {
  std::string k(8, '\0');
  k[7] = 5;
  k += '_';
  k += std::string(7, '\0') + '\x02';
  auto put = internal::ParseEtcdRevisionKey(k);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->rev, (mvcc::Revision{5, 2}));
  EXPECT_FALSE(put->tombstone);
  auto del = internal::ParseEtcdRevisionKey(k + "t");
  ASSERT_TRUE(del.ok());
  EXPECT_TRUE(del->tombstone);
  EXPECT_FALSE(internal::ParseEtcdRevisionKey(k + "x").ok());
  EXPECT_FALSE(internal::ParseEtcdRevisionKey(k.substr(0, 16)).ok());
  EXPECT_FALSE(internal::ParseEtcdRevisionKey("").ok());
  std::string no_sep = k;
  no_sep[8] = '-';
  EXPECT_FALSE(internal::ParseEtcdRevisionKey(no_sep).ok());

  // leasepb.Lease{ID: 300, TTL: 600, RemainingTTL: 17} with an unknown string field 9 between.
  const std::string lease("\x08\xac\x02\x10\xd8\x04\x4a\x02hi\x18\x11", 12);
  auto l = internal::ParseEtcdLease(lease);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->id, 300);
  EXPECT_EQ(l->ttl, 600);
  EXPECT_EQ(l->remaining_ttl, 17);
  EXPECT_FALSE(internal::ParseEtcdLease(lease.substr(0, 2)).ok());            // a cut varint
  EXPECT_FALSE(internal::ParseEtcdLease(std::string("\x4a\x05hi", 4)).ok());  // a cut string
  EXPECT_FALSE(internal::ParseEtcdLease(std::string("\x0a\x01x", 3)).ok());   // ID not a varint
  EXPECT_FALSE(internal::ParseEtcdLease(std::string("\x0b", 1)).ok());        // a group
}

TEST_F(EtcdRestoreTest, RestoresEveryChangeAtEveryUncompactedRevision) {
  Status st = RestoreDataDir(snap_, dst_, Target(), false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(fs::exists(dst_ + ".restoring"));
  DataDirCheck check = CheckDataDir(dst_, /*full=*/true);
  EXPECT_EQ(check.state, DataDirState::kValid) << check.detail;
  EXPECT_EQ(check.revision, kEtcdFixtureRevision);

  const std::vector<EtcdChange> changes = EtcdChanges();
  ASSERT_EQ(changes.size(), 306u);
  auto engine = storage::Engine::Open(dst_ + "/member/store", {});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto kv = mvcc::KvStore::Open(**engine);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_EQ((*kv)->Rev(), kEtcdFixtureRevision);
  EXPECT_EQ((*kv)->CompactRev(), kEtcdFixtureCompactRevision);
  EXPECT_EQ((*kv)->FinishedCompactRev(), kEtcdFixtureCompactRevision);
  auto view = (*kv)->NewReadView();
  const mvcc::KeyRange all =
      mvcc::KeyRange::FromRequest(std::string(1, '\0'), std::string(1, '\0'));

  // Every version etcd holds, record by record.
  for (const EtcdChange& c : changes) {
    if (c.tombstone) continue;
    auto mine = (*kv)->ReadVersion(c.kv.key(), c.main);
    ASSERT_TRUE(mine.ok()) << c.main << ": " << mine.status().ToString();
    EXPECT_EQ(mine->SerializeAsString(), c.kv.SerializeAsString()) << c.main;
  }
  // The state at every revision from the compaction on, replayed from etcd's changes (which,
  // below the compaction revision, are the newest version of each key etcd kept).
  std::map<std::string, std::string> expected;
  size_t next = 0;
  for (int64_t rev = 1; rev <= kEtcdFixtureRevision; ++rev) {
    for (; next < changes.size() && changes[next].main <= rev; ++next) {
      if (changes[next].tombstone) {
        expected.erase(changes[next].kv.key());
      } else {
        expected[changes[next].kv.key()] = changes[next].kv.SerializeAsString();
      }
    }
    auto got = mvcc::RangeKeys(*view, all, {.rev = rev});
    if (rev < kEtcdFixtureCompactRevision) {
      EXPECT_EQ(got.status(), errors::Compacted()) << rev;
      continue;
    }
    ASSERT_TRUE(got.ok()) << rev << ": " << got.status().ToString();
    EXPECT_EQ(Serialized(*got), expected) << "at revision " << rev;
    EXPECT_EQ(got->count, static_cast<int64_t>(expected.size())) << rev;
  }

  // What the fixture was written to hold.
  auto current = mvcc::RangeKeys(*view, all, {});
  ASSERT_TRUE(current.ok());
  EXPECT_EQ(current->count, 303);  // a, leased, bin\x01key, k1..k300
  std::map<std::string, mvccpb::KeyValue> by_key;
  for (const auto& k : current->kvs) by_key[k.key()] = k;
  EXPECT_EQ(by_key["a"].value(), "3");
  EXPECT_EQ(by_key["a"].create_revision(), 2);
  EXPECT_EQ(by_key["a"].mod_revision(), 4);
  EXPECT_EQ(by_key["a"].version(), 2);
  EXPECT_EQ(by_key.count("b"), 0u);
  auto b_at_4 = mvcc::RangeKeys(*view, mvcc::KeyRange::Single("b"), {.rev = 4});
  ASSERT_TRUE(b_at_4.ok());
  ASSERT_EQ(b_at_4->kvs.size(), 1u);
  EXPECT_EQ(b_at_4->kvs[0].value(), "2");
  EXPECT_EQ(std::string("vx"), by_key[std::string("bin\x01key", 7)].value());
  EXPECT_EQ(by_key[std::string("bin\x01key", 7)].mod_revision(), 7);
  for (int i = 1; i <= 300; ++i) {
    const mvccpb::KeyValue& k = by_key["k" + std::to_string(i)];
    EXPECT_EQ(k.value(), "value-" + std::to_string(i));
    EXPECT_EQ(k.mod_revision(), 7 + i);
  }
  const int64_t lease = by_key["leased"].lease();
  ASSERT_NE(lease, 0);
  auto info = (*kv)->leases().Get(lease);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->ttl, testsupport::kEtcdFixtureLeaseTtl);
  auto attached = mvcc::LeaseTable::AttachedKeys(**engine, lease);
  ASSERT_TRUE(attached.ok());
  EXPECT_EQ(*attached, std::vector<std::string>{"leased"});
}

TEST_F(EtcdRestoreTest, AStartedMemberServesItAsANewCluster) {
  ASSERT_TRUE(RestoreDataDir(snap_, dst_, Target(), false).ok());
  auto server = testsupport::StartLocalMember(dst_, kIdentity);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  member::EtcdServer& s = **server;
  EXPECT_EQ(s.kv().Rev(), kEtcdFixtureRevision);
  EXPECT_EQ(s.MemberList().members_size(), 1);

  etcdserverpb::RangeRequest get;
  get.set_key("leased");
  auto got = testsupport::Await<etcdserverpb::RangeResponse>([&](auto cb) { s.Range(get, cb); });
  ASSERT_TRUE(got.ok() && got->kvs_size() == 1);
  etcdserverpb::LeaseTimeToLiveRequest ttl;
  ttl.set_id(got->kvs(0).lease());
  ttl.set_keys(true);
  auto lease = testsupport::Await<etcdserverpb::LeaseTimeToLiveResponse>(
      [&](auto cb) { s.LeaseTimeToLive(ttl, cb); });
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->grantedttl(), testsupport::kEtcdFixtureLeaseTtl);
  EXPECT_GT(lease->ttl(), 0);
  ASSERT_EQ(lease->keys_size(), 1);
  EXPECT_EQ(lease->keys(0), "leased");

  etcdserverpb::PutRequest put;
  put.set_key("after");
  put.set_value("v");
  auto r = testsupport::Await<etcdserverpb::PutResponse>([&](auto cb) { s.Put(put, cb); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->header().revision(), kEtcdFixtureRevision + 1);
}

// etcd 3.5 and 3.6 keep the same buckets and add records to `meta`: the Raft term beside the
// consistent index, the confState (JSON) and, in 3.6, the storageVersion. Debian bookworm has
// no etcd 3.5 or 3.6, so their layout is made here: etcd 3.4's snapshot copied bucket by bucket
// with those records added (and clusterVersion 3.6.0). It restores to the same state.
TEST_F(EtcdRestoreTest, TheMetaRecordsOfEtcd35And36AreReadAlike) {
  auto src = bbolt::BoltDb::Open(snap_, static_cast<int64_t>(bytes_.size()) - kTrailer);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const std::string newer = root_ + "/etcd36.db";
  auto w = bbolt::BoltWriter::Create(newer);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<std::string> buckets;
  ASSERT_TRUE((*src)
                  ->ForEach({},
                            [&](std::string_view name, std::string_view, bool) {
                              buckets.emplace_back(name);
                              return Status::Ok();
                            })
                  .ok());
  ASSERT_GE(buckets.size(), 8u);
  const std::string term("\0\0\0\0\0\0\0\x07", 8);
  for (const std::string& name : buckets) {
    std::map<std::string, std::string> entries;
    ASSERT_TRUE((*src)
                    ->ForEach({name},
                              [&](std::string_view k, std::string_view v, bool) {
                                entries.emplace(std::string(k), std::string(v));
                                return Status::Ok();
                              })
                    .ok());
    if (name == "meta") {
      entries["term"] = term;
      entries["confState"] = R"({"voters":[10276657743932975437],"auto_leave":false})";
      entries["storageVersion"] = "3.6.0";
    }
    if (name == "cluster") entries["clusterVersion"] = "3.6.0";
    ASSERT_TRUE((*w)->BeginBucket(name).ok());
    for (const auto& [k, v] : entries) ASSERT_TRUE((*w)->Put(k, v).ok());
  }
  ASSERT_TRUE((*w)->Finish().ok());
  ASSERT_TRUE(mvcc::AppendSha256Trailer(newer).ok());
  auto db = bbolt::BoltDb::Open(newer, static_cast<int64_t>(fs::file_size(newer)) - kTrailer);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto stored_version = (*db)->Get({"meta"}, "storageVersion");
  ASSERT_TRUE(stored_version.ok() && stored_version->has_value());

  // Both restore; the newer one to the same keys and revisions, its term read.
  const std::string dst34 = root_ + "/from34", dst36 = root_ + "/from36";
  ASSERT_TRUE(RestoreDataDir(snap_, dst34, Target(), false).ok());
  Status st = RestoreDataDir(newer, dst36, Target(), false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto state = [](const std::string& dir) {
    auto engine = storage::Engine::Open(dir + "/member/store", {});
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    auto kv = mvcc::KvStore::Open(**engine);
    EXPECT_TRUE(kv.ok()) << kv.status().ToString();
    auto view = (*kv)->NewReadView();
    const mvcc::KeyRange all =
        mvcc::KeyRange::FromRequest(std::string(1, '\0'), std::string(1, '\0'));
    std::map<int64_t, std::map<std::string, std::string>> by_rev;
    for (int64_t rev = (*kv)->CompactRev(); rev <= (*kv)->Rev(); ++rev) {
      auto got = mvcc::RangeKeys(*view, all, {.rev = rev});
      EXPECT_TRUE(got.ok()) << rev;
      if (got.ok()) by_rev[rev] = Serialized(*got);
    }
    return by_rev;
  };
  const auto want = state(dst34);
  EXPECT_EQ(want.size(),
            static_cast<size_t>(kEtcdFixtureRevision - kEtcdFixtureCompactRevision + 1));
  EXPECT_TRUE(state(dst36) == want);
  auto scratch_store = storage::Engine::Open(root_ + "/scratch-store", {});
  ASSERT_TRUE(scratch_store.ok());
  auto summary = internal::ImportEtcdBackend(**db, **scratch_store);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->term, 7u);
  EXPECT_EQ(summary->cluster_version, "3.6.0");
}

TEST_F(EtcdRestoreTest, ADamagedSnapshotFailsTheHashCheckAndLeavesNothing) {
  ASSERT_TRUE(testsupport::FlipByte(snap_, 10 * kPage + 100));
  Status st = RestoreDataDir(snap_, dst_, Target(), false);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("SHA-256"), std::string::npos) << st.ToString();
  EXPECT_TRUE(NothingAt(dst_));
}

TEST_F(EtcdRestoreTest, WithoutTheHashCheckAPageDamageIsNamed) {
  // The root bucket's leaf page (7) no longer reads as a leaf or branch page.
  ASSERT_TRUE(testsupport::FlipByte(snap_, 7 * kPage + 8, 0x40));
  EXPECT_EQ(RestoreDataDir(snap_, dst_, Target(), false).code(), Code::kDataLoss);
  Status st = RestoreDataDir(snap_, dst_, Target(), true);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("page 7"), std::string::npos) << st.ToString();
  EXPECT_TRUE(NothingAt(dst_));
}

TEST_F(EtcdRestoreTest, ATruncatedSnapshotFailsEitherWay) {
  fs::resize_file(snap_, bytes_.size() - kPage);  // still 32 past a multiple of 512
  Status st = RestoreDataDir(snap_, dst_, Target(), false);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("SHA-256"), std::string::npos) << st.ToString();
  st = RestoreDataDir(snap_, dst_, Target(), true);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.ToString();
  EXPECT_TRUE(NothingAt(dst_));
}

TEST_F(EtcdRestoreTest, ADatabaseWithoutTrailerNeedsSkipHashCheck) {
  ASSERT_TRUE(testsupport::WriteFile(snap_, bytes_.substr(0, bytes_.size() - kTrailer)));
  Status st = RestoreDataDir(snap_, dst_, Target(), false);
  EXPECT_EQ(st.code(), Code::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("snapshot missing hash but --skip-hash-check=false"),
            std::string::npos)
      << st.ToString();
  EXPECT_TRUE(NothingAt(dst_));
  st = RestoreDataDir(snap_, dst_, Target(), true);
  ASSERT_TRUE(st.ok()) << st.ToString();
  DataDirCheck check = CheckDataDir(dst_, /*full=*/true);
  EXPECT_EQ(check.state, DataDirState::kValid) << check.detail;
  EXPECT_EQ(check.revision, kEtcdFixtureRevision);
}

TEST_F(EtcdRestoreTest, SkipHashCheckIgnoresABadTrailerOnly) {
  ASSERT_TRUE(testsupport::FlipByte(snap_, bytes_.size() - 1));
  EXPECT_EQ(RestoreDataDir(snap_, dst_, Target(), false).code(), Code::kDataLoss);
  Status st = RestoreDataDir(snap_, dst_, Target(), true);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(CheckDataDir(dst_, true).revision, kEtcdFixtureRevision);
}

}  // namespace
}  // namespace etcdw::data_dir
