// The ABS snapshot store against Azurite (tests/support/azurite.h), which verifies Shared Key
// signatures: the store contract (support/store_contract.h, as the S3 store runs it), a
// multi-block upload read back block by block, a listing over several pages, credentials from a
// directory through OpenSnapStore, and the errors of a wrong key and a missing container.
#include "etcdw/sidecar/abs_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "abs_config.h"
#include "azurite.h"
#include "etcdw/common/hash.h"
#include "etcdw/common/http.h"
#include "object_xml.h"
#include "support/files.h"
#include "support/store_contract.h"

namespace etcdw::sidecar {
namespace {

using etcdw::testing::Azurite;
using etcdw::testing::TempDir;

constexpr char kAbsContainer[] = "etcd-backups";

std::chrono::system_clock::time_point AbsTestTime(int64_t s) {
  return std::chrono::system_clock::time_point(std::chrono::seconds(s));
}

class AbsStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    azurite_ = new Azurite();
    ASSERT_TRUE(azurite_->Start()) << azurite_->log();
    auto made = Send("PUT", kAbsContainer, "restype=container");
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    ASSERT_EQ(made->status, 201) << made->body << azurite_->log();
  }
  static void TearDownTestSuite() {
    delete azurite_;
    azurite_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(azurite_, nullptr);
    ::unsetenv("AZURE_APPLICATION_CREDENTIALS");
    WriteCredentials(Azurite::kKey);
  }
  void TearDown() override {
    ::unsetenv("AZURE_APPLICATION_CREDENTIALS_JSON");
    ::unsetenv("AZURE_APPLICATION_CREDENTIALS");
  }

  static Result<common::HttpResponse> Send(const std::string& method, const std::string& resource,
                                           const std::string& query) {
    return azurite_->Send(method, resource, query);
  }

  void WriteCredentials(const std::string& key) {
    const std::string path = dir_.File("azure.json");
    std::ofstream(path) << R"({"storageAccount": ")" << Azurite::kAccount << R"(", "storageKey": ")"
                        << key << "\"}";
    ::setenv("AZURE_APPLICATION_CREDENTIALS_JSON", path.c_str(), 1);
  }

  static SnapStoreOptions Options(const std::string& prefix) {
    SnapStoreOptions o;
    o.provider = "ABS";
    o.container = kAbsContainer;
    o.prefix = prefix;
    o.endpoint_override = azurite_->endpoint();
    return o;
  }

  std::unique_ptr<SnapStore> Open(const SnapStoreOptions& o, const AbsStoreTuning& tuning = {}) {
    auto r = NewAbsStore(o, tuning);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  std::string Source(const std::string& content) {
    std::string path = dir_.File("src-" + std::to_string(sources_++));
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  static Azurite* azurite_;
  TempDir dir_;
  int sources_ = 0;
};
Azurite* AbsStoreTest::azurite_ = nullptr;

TEST_F(AbsStoreTest, KeepsTheStoreContract) {
  auto store = Open(Options("shoot--dev/etcd-main"));
  ASSERT_NE(store, nullptr);
  EXPECT_NE(store->Describe().find(azurite_->endpoint() + "/etcd-backups/shoot--dev/etcd-main/v2"),
            std::string::npos)
      << store->Describe();
  ASSERT_NO_FATAL_FAILURE(
      testsupport::CheckStoreContract(*store, "shoot--dev/etcd-main", dir_.path(), "BlobNotFound"))
      << azurite_->log();

  // An empty prefix lists the whole container; an empty object round-trips.
  auto whole = Open(Options(""));
  ASSERT_NE(whole, nullptr);
  SnapshotInfo empty = NewSnapshot(SnapshotKind::kIncr, 1, 1, AbsTestTime(1700000000), "", false);
  ASSERT_TRUE(whole->Save(empty, Source("")).ok());
  auto list = whole->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u) << "the blob at v2/ and the delta left by the contract under "
                                 "shoot--dev/etcd-main/v2/";
  const std::string dest = dir_.File("empty");
  std::ofstream(dest) << "stale";
  auto at_root = std::find_if(list->begin(), list->end(),
                              [](const SnapshotInfo& s) { return s.prefix == "v2/"; });
  ASSERT_NE(at_root, list->end());
  Status st = whole->Fetch(*at_root, dest);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(std::filesystem::file_size(dest), 0u);
}

TEST_F(AbsStoreTest, LargeFileGoesUpInParallelBlocksWithGardenersIds) {
  SnapStoreOptions o = Options("blocks");
  o.min_chunk_size = 256 * 1024;
  o.max_parallel_chunk_uploads = 3;
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  std::mt19937 rng(11);
  std::string content(5 * 256 * 1024 + 777, '\0');
  for (char& c : content) c = static_cast<char>(rng());
  SnapshotInfo full = NewSnapshot(SnapshotKind::kFull, 0, 5000, AbsTestTime(1700000000), "", false);
  Status st = store->Save(full, Source(content));
  ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << azurite_->log();

  // Six committed blocks, 1..6, of min_chunk_size but the last.
  auto blocks = Send("GET", std::string(kAbsContainer) + "/blocks/v2/" + full.snap_name,
                     "comp=blocklist&blocklisttype=committed");
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  ASSERT_EQ(blocks->status, 200) << blocks->body;
  auto committed = objxml::Elements(blocks->body, "Block");
  ASSERT_EQ(committed.size(), 6u) << blocks->body;
  for (size_t i = 0; i < committed.size(); ++i) {
    EXPECT_EQ(objxml::FirstText(committed[i], "Name"), AbsBlockId(static_cast<int64_t>(i + 1)));
    EXPECT_EQ(objxml::FirstText(committed[i], "Size"), i < 5 ? "262144" : "777");
  }

  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  const std::string dest = dir_.File("big");
  st = store->Fetch((*list)[0], dest);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(std::filesystem::file_size(dest), content.size());
  EXPECT_TRUE(testsupport::ReadFile(dest) == content) << "downloaded bytes differ";
}

TEST_F(AbsStoreTest, ListingFollowsNextMarkerOverPages) {
  AbsStoreTuning tuning;
  tuning.list_max_results = 2;
  auto store = Open(Options("paged"), tuning);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 7; ++i) {
    SnapshotInfo s =
        NewSnapshot(i == 0 ? SnapshotKind::kFull : SnapshotKind::kIncr, i == 0 ? 0 : i * 10 + 1,
                    i * 10 + 10, AbsTestTime(1700000000 + i), "", false);
    ASSERT_TRUE(store->Save(s, Source("s" + std::to_string(i))).ok());
  }
  SnapshotInfo junk;
  junk.snap_name = "not-a-snapshot";
  ASSERT_TRUE(store->Save(junk, Source("junk")).ok());

  // Azurite does stop at two names per page.
  auto page = Send("GET", kAbsContainer, "restype=container&comp=list&prefix=paged&maxresults=2");
  ASSERT_TRUE(page.ok());
  EXPECT_FALSE(ParseAbsBlobList(page->body).next_marker.empty()) << page->body;

  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 7u);
  for (size_t i = 1; i < list->size(); ++i) {
    EXPECT_LT((*list)[i - 1].last_revision, (*list)[i].last_revision);
  }
}

TEST_F(AbsStoreTest, CredentialsFromADirectoryThroughOpenSnapStore) {
  ::unsetenv("AZURE_APPLICATION_CREDENTIALS_JSON");
  TempDir creds;
  testsupport::WriteFile(creds.File("storageAccount"), std::string(Azurite::kAccount) + "\n");
  testsupport::WriteFile(creds.File("storageKey"), std::string(Azurite::kKey) + "\n");
  ::setenv("AZURE_APPLICATION_CREDENTIALS", creds.path().c_str(), 1);
  auto store = OpenSnapStore(Options("from-dir"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto list = (*store)->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->empty());

  // The legacy emulator form: domain and emulatorEnabled, no endpoint override.
  testsupport::WriteFile(creds.File("domain"), "127.0.0.1:" + std::to_string(azurite_->port()));
  testsupport::WriteFile(creds.File("emulatorEnabled"), "true");
  SnapStoreOptions o = Options("legacy");
  o.endpoint_override.clear();
  auto legacy = OpenSnapStore(o);
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  SnapshotInfo s = NewSnapshot(SnapshotKind::kFull, 0, 1, AbsTestTime(1700000000), "", false);
  ASSERT_TRUE((*legacy)->Save(s, Source("legacy")).ok());
  auto legacy_list = (*legacy)->List();
  ASSERT_TRUE(legacy_list.ok()) << legacy_list.status().ToString();
  EXPECT_EQ(legacy_list->size(), 1u);
}

TEST_F(AbsStoreTest, WrongKeyAndMissingContainerAreClearErrors) {
  WriteCredentials("d3Jvbmcga2V5IGZvciB0aGUgdGVzdCBhY2NvdW50IDAx");  // a valid but wrong key
  auto store = Open(Options("denied"));
  ASSERT_NE(store, nullptr);
  auto list = store->List();
  ASSERT_FALSE(list.ok()) << "Azurite verifies the signature";
  EXPECT_EQ(list.status().code(), Code::kPermissionDenied) << list.status().ToString();
  EXPECT_NE(list.status().message().find("AuthorizationFailure"), std::string::npos)
      << list.status().ToString();
  EXPECT_NE(list.status().message().find("check storageAccount and storageKey"), std::string::npos);
  Status save =
      store->Save(NewSnapshot(SnapshotKind::kFull, 0, 1, AbsTestTime(1), "", false), Source("x"));
  EXPECT_EQ(save.code(), Code::kPermissionDenied) << save.ToString();

  WriteCredentials(Azurite::kKey);
  SnapStoreOptions o = Options("x");
  o.container = "no-such-container";
  auto missing = Open(o);
  ASSERT_NE(missing, nullptr);
  auto none = missing->List();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kNotFound) << none.status().ToString();
  EXPECT_NE(none.status().message().find("ContainerNotFound"), std::string::npos)
      << none.status().ToString();
  EXPECT_NE(none.status().message().find("\"no-such-container\" does not exist"),
            std::string::npos);

  o = Options("x");
  o.container.clear();
  ::unsetenv("STORAGE_CONTAINER");
  auto no_container = OpenSnapStore(o);
  ASSERT_FALSE(no_container.ok());
  EXPECT_NE(no_container.status().message().find("no container"), std::string::npos);
}

}  // namespace
}  // namespace etcdw::sidecar
