// The readers of etcd's WAL and the translation of its entries on records written here the way
// etcd 3.4 writes them (an encoder of our own, below): the CRC chain across files, a rewritten
// tail, a missing file, a broken chain; v2 member publications, conf changes, auth requests with
// their users (plain passwords hashed), names our requests cannot hold refused.
#include "etcd_wal.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "etcd_entries.h"
#include "etcdw/common/hash.h"
#include "etcdw/common/password_hash.h"
#include "etcdw/etcd_wal.pb.h"
#include "etcdw/internal.pb.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::data_dir::internal {
namespace {

namespace fs = std::filesystem;

// Writes WAL files as etcd's encoder does: frames of length | padding marker, records whose CRC
// chains over every record's data, each file starting with a crc record and the metadata.
class EtcdWalWriter {
 public:
  explicit EtcdWalWriter(std::string dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }

  void StartFile(uint64_t seq, uint64_t index) {
    Flush();
    char name[64];
    std::snprintf(name, sizeof name, "%016llx-%016llx.wal", static_cast<unsigned long long>(seq),
                  static_cast<unsigned long long>(index));
    path_ = dir_ + "/" + name;
    etcdwal::Record crc;
    crc.set_type(4);
    crc.set_crc(crc_);
    Frame(crc.SerializeAsString());
    etcdwal::Metadata m;
    m.set_node_id(0xa1);
    m.set_cluster_id(0xc1);
    Add(1, m.SerializeAsString());
  }
  void Add(int64_t type, const std::string& data) {
    crc_ = common::Crc32c(crc_, data);
    etcdwal::Record r;
    r.set_type(type);
    r.set_crc(crc_);
    r.set_data(data);
    Frame(r.SerializeAsString());
  }
  void Entry(uint64_t index, uint64_t term, const std::string& data = "", int64_t type = 0) {
    etcdwal::Entry e;
    e.set_index(index);
    e.set_term(term);
    e.set_type(type);
    e.set_data(data);
    Add(2, e.SerializeAsString());
  }
  void State(uint64_t term, uint64_t vote, uint64_t commit) {
    etcdwal::HardState hs;
    hs.set_term(term);
    hs.set_vote(vote);
    hs.set_commit(commit);
    Add(3, hs.SerializeAsString());
  }
  void Flush() {
    if (!path_.empty())
      ASSERT_TRUE(testsupport::WriteFile(path_, bytes_ + std::string(4096, '\0')));
    bytes_.clear();
  }
  const std::string& path() const { return path_; }

 private:
  void Frame(const std::string& rec) {
    const uint64_t pad = (8 - rec.size() % 8) % 8;
    uint64_t frame = rec.size();
    if (pad != 0) frame |= (0x80 | pad) << 56;
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<char>(frame >> (8 * i)));
    bytes_ += rec + std::string(pad, '\0');
  }

  std::string dir_;
  std::string path_;
  std::string bytes_;
  uint32_t crc_ = 0;
};

std::string Put(const std::string& k, const std::string& v) {
  etcdwal::InternalRaftRequest r;
  r.mutable_header()->set_id(77);
  r.mutable_put()->set_key(k);
  r.mutable_put()->set_value(v);
  return r.SerializeAsString();
}

class EtcdWalTest : public ::testing::Test {
 protected:
  testsupport::ScratchDir scratch_{"etcd-wal"};
  std::string dir_ = scratch_.path() + "/wal";
};

TEST_F(EtcdWalTest, ReadsAcrossFilesAndKeepsTheRewrittenTail) {
  EtcdWalWriter w(dir_);
  w.StartFile(0, 0);
  etcdwal::WalSnapshot s0;
  w.Add(5, s0.SerializeAsString());
  for (uint64_t i = 1; i <= 3; ++i) w.Entry(i, 1, Put("k", std::to_string(i)));
  w.State(1, 0xa1, 3);
  w.Entry(4, 1, Put("lost", "x"));
  w.StartFile(1, 4);
  w.State(1, 0xa1, 3);
  // A new leader's entries from index 4 replace the old term's 4.
  w.Entry(4, 2, Put("k", "4"));
  w.Entry(5, 2);
  w.State(2, 0xa1, 5);
  w.Flush();

  auto wal = ReadEtcdWal(dir_);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  EXPECT_EQ(wal->files.size(), 2u);
  EXPECT_EQ(wal->member_id, 0xa1u);
  EXPECT_EQ(wal->cluster_id, 0xc1u);
  ASSERT_EQ(wal->entries.size(), 5u);
  EXPECT_EQ(wal->entries[3].term, 2u);
  EXPECT_EQ(wal->entries[3].data, Put("k", "4"));
  EXPECT_EQ(wal->hard_state.term, 2u);
  EXPECT_EQ(wal->hard_state.commit, 5u);
  EXPECT_EQ(wal->TermOf(4), 2u);
  EXPECT_EQ(wal->TermOf(0), 0u);
  EXPECT_FALSE(wal->TermOf(6).has_value());

  // Read for a takeover whose backend applied up to 3: the entries up to 3 keep their index and
  // term but not their data.
  auto tail = ReadEtcdWal(dir_, /*keep_data_after=*/3);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  ASSERT_EQ(tail->entries.size(), 5u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(tail->entries[i].index, i + 1);
    EXPECT_EQ(tail->entries[i].term, 1u);
    EXPECT_TRUE(tail->entries[i].data.empty()) << i;
  }
  EXPECT_EQ(tail->entries[3].data, Put("k", "4"));
  EXPECT_EQ(tail->TermOf(3), 1u);
}

TEST_F(EtcdWalTest, AMissingFileOrABrokenChainIsAnError) {
  EtcdWalWriter w(dir_);
  w.StartFile(0, 0);
  w.Entry(1, 1, Put("a", "1"));
  w.StartFile(1, 1);
  w.Entry(2, 1, Put("b", "2"));
  w.StartFile(2, 2);
  w.Entry(3, 1, Put("c", "3"));
  w.Flush();
  ASSERT_TRUE(ReadEtcdWal(dir_).ok());

  // The middle file gone: the sequence has a gap.
  const std::string middle = dir_ + "/0000000000000001-0000000000000001.wal";
  const std::string saved = testsupport::ReadFile(middle);
  fs::remove(middle);
  auto gap = ReadEtcdWal(dir_);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("a file is missing"), std::string::npos)
      << gap.status().message();

  // The middle file from another log: its records do not continue the chain.
  EtcdWalWriter other(scratch_.path() + "/other");
  other.StartFile(1, 1);
  other.Entry(2, 1, Put("b", "2"));
  other.Flush();
  fs::copy_file(other.path(), middle);
  auto broken = ReadEtcdWal(dir_);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), Code::kDataLoss);
  EXPECT_NE(broken.status().message().find("0000000000000001-0000000000000001.wal"),
            std::string::npos)
      << broken.status().message();
  ASSERT_TRUE(testsupport::WriteFile(middle, saved));
  EXPECT_TRUE(ReadEtcdWal(dir_).ok());
}

TEST(EtcdEntriesTest, TranslatesRequestsPublicationsAndConfChanges) {
  EtcdEntryStats stats;
  auto put = TranslateEtcdEntry({10, 3, 0, Put("k", "v")}, stats);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->index(), 10u);
  EXPECT_EQ(put->term(), 3u);
  internalpb::Request req;
  ASSERT_TRUE(req.ParseFromString(put->data()));
  EXPECT_EQ(req.id(), 77u);
  EXPECT_EQ(req.put().key(), "k");
  EXPECT_EQ(req.put().value(), "v");

  // etcd 3.4 publishes a member's attributes as a bare v2 PUT.
  etcdwal::V2Request v2;
  v2.set_id(5);
  v2.set_method("PUT");
  v2.set_path("/0/members/da3e7ee5fd863a36/attributes");
  v2.set_val(R"({"name":"m0","clientURLs":["http://127.0.0.1:2379"]})");
  auto pub = TranslateEtcdEntry({11, 3, 0, v2.SerializeAsString()}, stats);
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  ASSERT_TRUE(req.ParseFromString(pub->data()));
  EXPECT_EQ(req.member_attributes().id(), 0xda3e7ee5fd863a36u);
  EXPECT_EQ(req.member_attributes().name(), "m0");
  ASSERT_EQ(req.member_attributes().client_urls_size(), 1);

  // The cluster version (v2 PUT of /0/version): nothing we store, an empty entry.
  v2.set_path("/0/version");
  v2.set_val("3.4.0");
  auto version = TranslateEtcdEntry({12, 3, 0, v2.SerializeAsString()}, stats);
  ASSERT_TRUE(version.ok());
  EXPECT_TRUE(version->data().empty());
  EXPECT_EQ(stats.skipped_v2, 1u);

  etcdwal::ConfChange cc;
  cc.set_type(0);
  cc.set_node_id(0xb2);
  cc.set_id(9);
  cc.set_context(R"({"id":178,"peerURLs":["http://10.0.0.2:2380"],"isLearner":true})");
  auto add = TranslateEtcdEntry({13, 3, 1, cc.SerializeAsString()}, stats);
  ASSERT_TRUE(add.ok()) << add.status().ToString();
  EXPECT_EQ(add->type(), raftpb::ENTRY_CONF_CHANGE);
  raftpb::ConfChange ours;
  ASSERT_TRUE(ours.ParseFromString(add->data()));
  EXPECT_EQ(ours.type(), raftpb::CONF_CHANGE_ADD_NODE);
  EXPECT_EQ(ours.node_id(), 0xb2u);
  auto m = cluster::Member::Parse(ours.context());
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->id, 178u);
  EXPECT_EQ(m->peer_urls, std::vector<std::string>{"http://10.0.0.2:2380"});
  EXPECT_TRUE(m->is_learner);

  // A promotion: ours is an ADD_NODE without a member record.
  cc.set_context(R"({"id":178,"peerURLs":["http://10.0.0.2:2380"],"isPromote":true})");
  auto promote = TranslateEtcdEntry({14, 3, 1, cc.SerializeAsString()}, stats);
  ASSERT_TRUE(promote.ok());
  ASSERT_TRUE(ours.ParseFromString(promote->data()));
  EXPECT_TRUE(ours.context().empty());
  EXPECT_EQ(stats.conf_changes, 2u);
  EXPECT_EQ(stats.requests, 2u);
  EXPECT_EQ(stats.member_attributes, 1u);
}

TEST(EtcdEntriesTest, RefusesWhatDoesNotDecode) {
  EtcdEntryStats stats;
  auto garbage = TranslateEtcdEntry({21, 1, 0, std::string("\xff\xff\xff", 3)}, stats);
  EXPECT_EQ(garbage.status().code(), Code::kDataLoss);
  EXPECT_NE(garbage.status().message().find("entry 21"), std::string::npos);

  auto v2cc = TranslateEtcdEntry({22, 1, 2, "x"}, stats);
  EXPECT_EQ(v2cc.status().code(), Code::kDataLoss);

  etcdwal::ConfChange cc;
  cc.set_node_id(5);
  cc.set_context("{not json");
  auto bad = TranslateEtcdEntry({23, 1, 1, cc.SerializeAsString()}, stats);
  EXPECT_EQ(bad.status().code(), Code::kDataLoss);
  EXPECT_NE(bad.status().message().find("entry 23"), std::string::npos);
}

// An InternalRaftRequest as etcd 3.4 logs a client's request: a header with the request's ID
// and the client's user and auth revision.
etcdwal::InternalRaftRequest As(const std::string& user, uint64_t auth_revision) {
  etcdwal::InternalRaftRequest r;
  r.mutable_header()->set_id(88);
  r.mutable_header()->set_username(user);
  r.mutable_header()->set_auth_revision(auth_revision);
  return r;
}

// `r` translated at index 30 into our request (bcrypt cost 4: the cheapest).
internalpb::Request Translated(const etcdwal::InternalRaftRequest& r, EtcdEntryStats& stats) {
  auto e = TranslateEtcdEntry({30, 2, 0, r.SerializeAsString()}, stats, common::kMinBcryptCost);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  internalpb::Request req;
  EXPECT_TRUE(e.ok() && !e->data().empty() && req.ParseFromString(e->data()));
  return req;
}

TEST(EtcdEntriesTest, TranslatesEveryAuthChangeWithItsUser) {
  EtcdEntryStats stats;
  // etcd 3.4 logs the plain password: hashed here, never carried.
  etcdwal::InternalRaftRequest add = As("root", 7);
  add.mutable_auth_user_add()->set_name("alice");
  add.mutable_auth_user_add()->set_password("alicepw");
  internalpb::Request req = Translated(add, stats);
  EXPECT_EQ(req.id(), 88u);
  EXPECT_EQ(req.auth().username(), "root");
  EXPECT_EQ(req.auth().revision(), 7u);
  EXPECT_EQ(req.user_add().name(), "alice");
  EXPECT_TRUE(req.user_add().password().empty());
  EXPECT_EQ(req.user_add().hashedpassword().substr(0, 7), "$2a$04$");
  EXPECT_TRUE(common::PasswordMatches(req.user_add().hashedpassword(), "alicepw"));
  EXPECT_FALSE(common::PasswordMatches(req.user_add().hashedpassword(), "alicepW"));
  // etcd 3.5 logs the hash: kept as it is.
  add.mutable_auth_user_add()->clear_password();
  add.mutable_auth_user_add()->set_hashed_password("$2a$10$hash");
  EXPECT_EQ(Translated(add, stats).user_add().hashedpassword(), "$2a$10$hash");
  // A user without a password gets no hash.
  add.mutable_auth_user_add()->clear_hashed_password();
  add.mutable_auth_user_add()->mutable_options()->set_no_password(true);
  req = Translated(add, stats);
  EXPECT_TRUE(req.user_add().options().no_password());
  EXPECT_TRUE(req.user_add().hashedpassword().empty());

  etcdwal::InternalRaftRequest change = As("root", 8);
  change.mutable_auth_user_change_password()->set_name("alice");
  change.mutable_auth_user_change_password()->set_password("newpw");
  req = Translated(change, stats);
  EXPECT_EQ(req.user_change_password().name(), "alice");
  EXPECT_TRUE(req.user_change_password().password().empty());
  EXPECT_TRUE(common::PasswordMatches(req.user_change_password().hashedpassword(), "newpw"));

  etcdwal::InternalRaftRequest r = As("root", 9);
  r.mutable_auth_user_delete()->set_name("bob");
  EXPECT_EQ(Translated(r, stats).user_delete().name(), "bob");
  r = As("root", 9);
  r.mutable_auth_user_grant_role()->set_user("alice");
  r.mutable_auth_user_grant_role()->set_role("reader");
  req = Translated(r, stats);
  EXPECT_EQ(req.user_grant_role().user(), "alice");
  EXPECT_EQ(req.user_grant_role().role(), "reader");
  r = As("root", 9);
  r.mutable_auth_user_revoke_role()->set_user("alice");
  r.mutable_auth_user_revoke_role()->set_role("reader");
  req = Translated(r, stats);
  EXPECT_EQ(req.user_revoke_role().name(), "alice");
  EXPECT_EQ(req.user_revoke_role().role(), "reader");
  r = As("root", 9);
  r.mutable_auth_role_add()->set_name("reader");
  EXPECT_EQ(Translated(r, stats).role_add().name(), "reader");
  r = As("root", 9);
  r.mutable_auth_role_delete()->set_name("reader");
  EXPECT_EQ(Translated(r, stats).role_delete().role(), "reader");
  r = As("root", 9);
  authpb::Permission* perm = r.mutable_auth_role_grant_permission()->mutable_perm();
  r.mutable_auth_role_grant_permission()->set_name("reader");
  perm->set_permtype(authpb::Permission::READWRITE);
  perm->set_key(std::string("p\xff", 2));  // keys are any bytes
  perm->set_range_end("q");
  req = Translated(r, stats);
  EXPECT_EQ(req.role_grant_permission().name(), "reader");
  EXPECT_EQ(req.role_grant_permission().perm().SerializeAsString(), perm->SerializeAsString());
  r = As("root", 9);
  r.mutable_auth_role_revoke_permission()->set_role("reader");
  r.mutable_auth_role_revoke_permission()->set_key("p");
  r.mutable_auth_role_revoke_permission()->set_range_end("q");
  req = Translated(r, stats);
  EXPECT_EQ(req.role_revoke_permission().role(), "reader");
  EXPECT_EQ(req.role_revoke_permission().key(), "p");
  EXPECT_EQ(req.role_revoke_permission().range_end(), "q");
  r = As("root", 9);
  r.mutable_auth_enable();
  EXPECT_TRUE(Translated(r, stats).has_auth_enable());
  r = As("root", 10);
  r.mutable_auth_disable();
  req = Translated(r, stats);
  EXPECT_TRUE(req.has_auth_disable());
  EXPECT_EQ(req.auth().revision(), 10u);
  EXPECT_EQ(stats.auth_requests, 13u);
  EXPECT_EQ(stats.requests, 13u);
}

TEST(EtcdEntriesTest, EveryRequestCarriesItsUserAndNoHeaderIsNoUser) {
  EtcdEntryStats stats;
  etcdwal::InternalRaftRequest put = As("alice", 12);
  put.mutable_put()->set_key("k");
  internalpb::Request req = Translated(put, stats);
  EXPECT_EQ(req.put().key(), "k");
  EXPECT_EQ(req.auth().username(), "alice");
  EXPECT_EQ(req.auth().revision(), 12u);
  // A client without a token: etcd logs an empty user, and refuses it while auth is enabled.
  etcdwal::InternalRaftRequest revoke = As("", 0);
  revoke.mutable_lease_revoke()->set_id(5);
  req = Translated(revoke, stats);
  EXPECT_TRUE(req.has_auth());
  EXPECT_TRUE(req.auth().username().empty());
  EXPECT_EQ(req.auth().revision(), 0u);
  // No header at all (etcd before 3.0): etcd judges it as no user, and so do we.
  etcdwal::InternalRaftRequest bare;
  bare.set_id(4);
  bare.mutable_delete_range()->set_key("k");
  req = Translated(bare, stats);
  EXPECT_EQ(req.id(), 4u);
  EXPECT_TRUE(req.has_auth());
  EXPECT_TRUE(req.auth().username().empty());
}

TEST(EtcdEntriesTest, TokensAndAuthReadsBecomeEmptyEntries) {
  EtcdEntryStats stats;
  std::vector<etcdwal::InternalRaftRequest> reads(5, As("root", 3));
  reads[0].set_authenticate("\n\x04root\x1a\x10tokentokentokent");
  reads[1].set_auth_user_get(
      "\n\x05"
      "alice");
  reads[2].set_auth_user_list("");
  reads[3].set_auth_role_get("\n\x06reader");
  reads[4].set_auth_role_list("");
  uint64_t index = 40;
  for (const auto& r : reads) {
    auto e = TranslateEtcdEntry({index, 2, 0, r.SerializeAsString()}, stats);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ(e->index(), index++);
    EXPECT_EQ(e->type(), raftpb::ENTRY_NORMAL);
    EXPECT_TRUE(e->data().empty());
  }
  EXPECT_EQ(stats.empty, 5u);
  EXPECT_EQ(stats.requests, 0u);
}

TEST(EtcdEntriesTest, RefusesWhatOurRequestsCannotHoldWithoutThePassword) {
  EtcdEntryStats stats;
  // etcd takes any bytes as a name; our requests hold UTF-8 only.
  etcdwal::InternalRaftRequest role = As("root", 3);
  role.mutable_auth_role_add()->set_name(std::string("r\xc3", 2));
  auto r = TranslateEtcdEntry({50, 2, 0, role.SerializeAsString()}, stats);
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("entry 50"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("not UTF-8"), std::string::npos) << r.status().ToString();
  etcdwal::InternalRaftRequest who = As(std::string("\xe0\x80\x80", 3), 3);  // overlong
  who.mutable_put()->set_key("k");
  EXPECT_EQ(TranslateEtcdEntry({51, 2, 0, who.SerializeAsString()}, stats).status().code(),
            Code::kFailedPrecondition);
  who.mutable_header()->set_username("\xc3\xa9t\xc3\xa9 \xf0\x9f\x94\x91");  // UTF-8 is fine
  EXPECT_TRUE(TranslateEtcdEntry({51, 2, 0, who.SerializeAsString()}, stats).ok());
  // A password bcrypt cannot take: refused, without the password in the error.
  etcdwal::InternalRaftRequest add = As("root", 3);
  add.mutable_auth_user_add()->set_name("carol");
  add.mutable_auth_user_add()->set_password(std::string("hunter2\0x", 9));
  auto p = TranslateEtcdEntry({52, 2, 0, add.SerializeAsString()}, stats, common::kMinBcryptCost);
  EXPECT_EQ(p.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("entry 52"), std::string::npos) << p.status().ToString();
  EXPECT_EQ(p.status().ToString().find("hunter2"), std::string::npos) << p.status().ToString();
}

}  // namespace
}  // namespace etcdw::data_dir::internal
