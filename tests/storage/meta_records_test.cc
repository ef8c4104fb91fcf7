#include "etcdw/storage/meta_records.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "support/files.h"

namespace etcdw::storage::meta {
namespace {

TEST(MetaRecordsTest, EveryDeclarationIsListedOnceAndFoundByItsKeys) {
  std::set<std::string_view> keys;
  for (const Record* r : AllRecords()) {
    EXPECT_TRUE(keys.insert(r->key).second) << r->key;
    EXPECT_EQ(Find(r->key), r) << r->key;
    if (r->family) {
      EXPECT_EQ(Find(KeyIn(*r, "0123")), r) << r->key;
      EXPECT_EQ(Find(KeyIn(*r, std::string("\0\xff", 2))), r) << r->key;
      // The family's end bounds it: its keys sort below, the end itself is not a member.
      EXPECT_LT(KeyIn(*r, "\xff\xff"), FamilyEnd(*r));
      EXPECT_EQ(Find(FamilyEnd(*r)), nullptr) << r->key;
    } else {
      EXPECT_EQ(Find(std::string(r->key) + "x"), nullptr) << r->key;
    }
    EXPECT_FALSE(r->owner.empty());
    EXPECT_FALSE(r->value.empty());
  }
  EXPECT_EQ(AllRecords().size(), 20u);
}

TEST(MetaRecordsTest, KindsDecideWhereARecordTravels) {
  // Replicated state travels in snapshots; a restore keeps the store's data only.
  EXPECT_TRUE(InSnapshot(kCurrentRev.key));
  EXPECT_TRUE(KeptByRestore(kCurrentRev.key));
  EXPECT_TRUE(InSnapshot(kConsistentIndex.key));
  EXPECT_FALSE(KeptByRestore(kConsistentIndex.key));
  EXPECT_TRUE(InSnapshot(KeyIn(kClusterMembers, "00000000000000aa")));
  EXPECT_FALSE(KeptByRestore(KeyIn(kClusterMembers, "00000000000000aa")));
  EXPECT_FALSE(KeptOverSnapshot(kClusterId.key));
  // The auth state is the store's: it travels, and a restore keeps it (etcd's does).
  for (std::string key : {std::string(kAuthEnabled.key), std::string(kAuthRevision.key),
                          KeyIn(kAuthUsers, "alice"), KeyIn(kAuthRoles, "reader")}) {
    EXPECT_TRUE(InSnapshot(key)) << key;
    EXPECT_TRUE(KeptByRestore(key)) << key;
    EXPECT_FALSE(KeptOverSnapshot(key)) << key;
  }
  // Local and legacy records stay with the member and never travel.
  for (std::string key : {std::string(kLocalMemberId.key), std::string(kKeyIndexHead.key),
                          KeyIn(kKeyIndexChunks, "x"), std::string(kLegacyHardState.key)}) {
    EXPECT_FALSE(InSnapshot(key)) << key;
    EXPECT_FALSE(KeptByRestore(key)) << key;
    EXPECT_TRUE(KeptOverSnapshot(key)) << key;
  }
  // A record nobody declared goes nowhere: no snapshot carries it, nothing keeps it.
  for (std::string key : {"mystery", "cluster/", "cluster/members/1", "local/", "mvcc/"}) {
    EXPECT_EQ(Find(key), nullptr) << key;
    EXPECT_FALSE(InSnapshot(key)) << key;
    EXPECT_FALSE(KeptByRestore(key)) << key;
    EXPECT_FALSE(KeptOverSnapshot(key)) << key;
  }
}

// docs/design.md's table of the Meta records ("Storage layout") lists exactly these records, in
// this order, with their kind.
TEST(MetaRecordsTest, TheDesignDocumentListsEveryRecord) {
  const std::string doc = testsupport::ReadFile(ETCDW_SOURCE_DIR "/docs/design.md");
  ASSERT_FALSE(doc.empty());
  const std::string header = "| key (a family: every key under the prefix) | kind |";
  size_t at = doc.find(header);
  ASSERT_NE(at, std::string::npos) << "the table is gone from docs/design.md";
  at = doc.find('\n', doc.find('\n', at) + 1) + 1;  // past the header and its rule
  std::vector<std::string> rows;
  while (doc.compare(at, 1, "|") == 0) {
    const size_t end = doc.find('\n', at);
    rows.push_back(doc.substr(at, end - at));
    at = end + 1;
  }
  ASSERT_EQ(rows.size(), AllRecords().size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Record& r = *AllRecords()[i];
    const char* kind = r.kind == Kind::kReplicated ? "replicated"
                       : r.kind == Kind::kLocal    ? "local"
                                                   : "legacy";
    EXPECT_EQ(rows[i].rfind("| `" + std::string(r.key), 0), 0u) << rows[i];
    EXPECT_NE(rows[i].find(std::string("` | ") + kind + " |"), std::string::npos) << rows[i];
    EXPECT_NE(rows[i].find(" | " + std::string(r.owner) + " | "), std::string::npos) << rows[i];
  }
}

TEST(MetaRecordsTest, PrintableEscapesBytesOutsidePrintableAscii) {
  EXPECT_EQ(Printable("alarm/"), "alarm/");
  EXPECT_EQ(Printable(std::string("alarm/\0\x01\xff\\", 10)), "alarm/\\x00\\x01\\xff\\x5c");
}

}  // namespace
}  // namespace etcdw::storage::meta
