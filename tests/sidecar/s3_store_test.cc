// The S3 snapshot store against s3rver (an S3 emulator, see tests/support/s3rver.h): the round
// trip, multipart uploads, paginated listings, both addressing styles, HTTPS, and the errors of
// bad or missing credentials. s3rver does not verify SigV4 signatures (sigv4_test.cc checks them
// against AWS's published examples); it does reject unknown access keys.
#include "etcdw/sidecar/s3_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "etcdw/common/http.h"
#include "etcdw/sidecar/snap_store.h"
#include "process.h"
#include "s3rver.h"
#include "support/clock_util.h"
#include "support/files.h"
#include "support/store_contract.h"
#include "test_certs.h"

namespace etcdw::sidecar {
namespace {

namespace fs = std::filesystem;
using etcdw::testing::S3rver;
using etcdw::testing::TempDir;

constexpr char kBucket[] = "snapshots";
constexpr int64_t kOneMiB = int64_t{1} << 20;

using testsupport::Unix;

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

class S3StoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new S3rver();
    ASSERT_TRUE(server_->Start({kBucket})) << server_->log();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ::unsetenv("AWS_APPLICATION_CREDENTIALS");
    WriteCredentials(R"("accessKeyID": "S3RVER", "secretAccessKey": "S3RVER")");
  }
  void TearDown() override {
    ::unsetenv("AWS_APPLICATION_CREDENTIALS_JSON");
    ::unsetenv("AWS_APPLICATION_CREDENTIALS");
  }

  // Writes the JSON credentials file (region us-east-1 plus `fields`) and points the
  // environment at it.
  void WriteCredentials(const std::string& fields) {
    const std::string path = dir_.File("credentials.json");
    std::ofstream(path) << "{\"region\": \"us-east-1\", " << fields << "}";
    ::setenv("AWS_APPLICATION_CREDENTIALS_JSON", path.c_str(), 1);
  }

  SnapStoreOptions Options(const std::string& prefix) {
    SnapStoreOptions o;
    o.provider = "S3";
    o.container = kBucket;
    o.prefix = prefix;
    o.endpoint_override = server_->endpoint();
    return o;
  }

  std::unique_ptr<SnapStore> Open(const SnapStoreOptions& o, const S3StoreTuning& tuning = {}) {
    auto r = NewS3Store(o, tuning);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  std::string Source(const std::string& content) {
    std::string path = dir_.File("src-" + std::to_string(sources_++));
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  // The store contract (support/store_contract.h) through `store`, whose prefix is `prefix`.
  void RoundTrip(SnapStore& store, const std::string& prefix) {
    ASSERT_NO_FATAL_FAILURE(
        testsupport::CheckStoreContract(store, prefix, dir_.path(), "NoSuchKey"));
  }

  static S3rver* server_;
  TempDir dir_;
  int sources_ = 0;
};
S3rver* S3StoreTest::server_ = nullptr;

TEST_F(S3StoreTest, SaveListFetchDeleteRoundTripPathStyle) {
  // 127.0.0.1 is an IP address: path-style whatever s3ForcePathStyle says.
  auto store = Open(Options("etcd-main/round-trip"));
  ASSERT_NE(store, nullptr);
  EXPECT_NE(store->Describe().find("(path-style)"), std::string::npos) << store->Describe();
  RoundTrip(*store, "etcd-main/round-trip");

  // An empty object: uploaded, listed and downloaded over a stale file.
  auto empty_store = Open(Options("empty"));
  ASSERT_NE(empty_store, nullptr);
  SnapshotInfo empty = NewSnapshot(SnapshotKind::kIncr, 1, 1, Unix(1700000000), "", false);
  ASSERT_TRUE(empty_store->Save(empty, Source("")).ok());
  auto list = empty_store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  const std::string dest = dir_.File("empty");
  std::ofstream(dest) << "stale";
  Status st = empty_store->Fetch((*list)[0], dest);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(fs::file_size(dest), 0u);
}

TEST_F(S3StoreTest, VirtualHostedAddressing) {
  // s3rver takes the bucket from a Host header "<bucket>.s3.localhost"; names under
  // ".localhost" are dialed on loopback by the HTTP client.
  SnapStoreOptions o = Options("vhost");
  o.endpoint_override = server_->vhost_endpoint();
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  EXPECT_NE(store->Describe().find("(virtual-hosted)"), std::string::npos) << store->Describe();
  RoundTrip(*store, "vhost");
  // The objects landed in the bucket named by the host.
  EXPECT_TRUE(fs::exists(server_->data_dir() + "/" + kBucket + "/vhost")) << server_->log();

  // The same endpoint, forced to path-style.
  WriteCredentials(R"("accessKeyID": "S3RVER", "secretAccessKey": "S3RVER",
                      "s3ForcePathStyle": true)");
  o.prefix = "vhost-forced-path";
  auto path_store = Open(o);
  ASSERT_NE(path_store, nullptr);
  EXPECT_NE(path_store->Describe().find("(path-style)"), std::string::npos);
  RoundTrip(*path_store, "vhost-forced-path");
}

TEST_F(S3StoreTest, EndpointFromTheCredentialFileAndEmptyPrefix) {
  // A server of its own: with the empty prefix the whole bucket is listed.
  S3rver own;
  ASSERT_TRUE(own.Start({"whole"})) << own.log();
  WriteCredentials(R"("accessKeyID": "S3RVER", "secretAccessKey": "S3RVER", "endpoint": ")" +
                   own.endpoint() + "\"");
  SnapStoreOptions o = Options("");
  o.container = "whole";
  o.endpoint_override.clear();
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  EXPECT_NE(store->Describe().find(own.endpoint()), std::string::npos) << store->Describe();
  RoundTrip(*store, "");
}

TEST_F(S3StoreTest, MultipartUploadOfALargeFileInParallelParts) {
  SnapStoreOptions o = Options("multipart");
  o.min_chunk_size = 5 * kOneMiB;
  o.max_parallel_chunk_uploads = 3;
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  const std::string content = RandomBytes(static_cast<size_t>(11 * kOneMiB + 12345), 7);
  SnapshotInfo full = NewSnapshot(SnapshotKind::kFull, 0, 5000, Unix(1700000000), "", false);
  Status st = store->Save(full, Source(content));
  ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << server_->log();

  // Three parts of at most 5 MiB went up (s3rver logs each; its ETags do not tell).
  const std::string log = server_->log();
  for (int part = 1; part <= 3; ++part) {
    EXPECT_NE(log.find("Stored part " + std::to_string(part) + " of"), std::string::npos) << log;
  }
  EXPECT_EQ(log.find("Stored part 4 of"), std::string::npos);

  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  const std::string dest = dir_.File("big");
  st = store->Fetch((*list)[0], dest);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(fs::file_size(dest), content.size());
  EXPECT_TRUE(testsupport::ReadFile(dest) == content)
      << "downloaded bytes differ from the uploaded ones";
}

TEST_F(S3StoreTest, ListingFollowsContinuationTokens) {
  S3StoreTuning tuning;
  tuning.list_max_keys = 2;
  auto store = Open(Options("paged"), tuning);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 7; ++i) {
    SnapshotInfo s =
        NewSnapshot(i == 0 ? SnapshotKind::kFull : SnapshotKind::kIncr, i == 0 ? 0 : i * 10 + 1,
                    i * 10 + 10, Unix(1700000000 + i), "", false);
    ASSERT_TRUE(store->Save(s, Source("s" + std::to_string(i))).ok());
  }
  // Objects that are not snapshots are skipped (with a warning), as gardener's does.
  ASSERT_TRUE(
      store->Save(NewSnapshot(SnapshotKind::kFull, 0, 1, Unix(1), "", false), Source("x")).ok());
  SnapshotInfo junk;
  junk.snap_name = "not-a-snapshot";
  ASSERT_TRUE(store->Save(junk, Source("junk")).ok());

  // The server does stop at two keys per page.
  auto client = common::HttpClient::Create({});
  ASSERT_TRUE(client.ok());
  auto page = (*client)->Get(server_->endpoint().substr(7),
                             std::string("/") + kBucket + "?list-type=2&prefix=paged&max-keys=2");
  ASSERT_TRUE(page.ok());
  EXPECT_NE(page->body.find("<IsTruncated>true</IsTruncated>"), std::string::npos) << page->body;

  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 8u);
  for (size_t i = 1; i < list->size(); ++i) {
    EXPECT_LE((*list)[i - 1].last_revision, (*list)[i].last_revision);
  }
}

TEST_F(S3StoreTest, HttpsWithTrustedCaCertOrInsecureSkipVerify) {
  etcdw::testing::TestCerts certs;
  ASSERT_TRUE(certs.AddCa("ca") && certs.Issue("s3", "ca", {"s3.localhost", "*.s3.localhost"}))
      << certs.log();
  S3rver tls;
  ASSERT_TRUE(tls.Start({kBucket}, certs.Crt("s3"), certs.Key("s3"))) << tls.log();
  SnapStoreOptions o = Options("tls");
  o.endpoint_override = tls.vhost_endpoint();
  const std::string pem = testsupport::ReadFile(certs.Crt("ca"));

  // Without trustedCaCert the system store is used, which does not know the test CA.
  auto untrusted = Open(o);
  ASSERT_NE(untrusted, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto refused = untrusted->List();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUnauthenticated) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("TLS handshake"), std::string::npos)
      << refused.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1))
      << "a certificate that does not verify is not retried";

  nlohmann::json creds = {{"region", "us-east-1"},
                          {"accessKeyID", "S3RVER"},
                          {"secretAccessKey", "S3RVER"},
                          {"trustedCaCert", pem}};
  std::ofstream(dir_.File("tls.json")) << creds.dump();
  ::setenv("AWS_APPLICATION_CREDENTIALS_JSON", dir_.File("tls.json").c_str(), 1);
  auto trusted = Open(o);
  ASSERT_NE(trusted, nullptr);
  EXPECT_NE(trusted->Describe().find("(virtual-hosted)"), std::string::npos);
  RoundTrip(*trusted, "tls");

  WriteCredentials(R"("accessKeyID": "S3RVER", "secretAccessKey": "S3RVER",
                      "insecureSkipVerify": true)");
  o.prefix = "tls-insecure";
  auto insecure = Open(o);
  ASSERT_NE(insecure, nullptr);
  RoundTrip(*insecure, "tls-insecure");
}

TEST_F(S3StoreTest, UnknownAccessKeyIsRejectedWithAClearError) {
  WriteCredentials(R"("accessKeyID": "NOT-A-KEY", "secretAccessKey": "whatever")");
  auto store = Open(Options("denied"));
  ASSERT_NE(store, nullptr);
  auto list = store->List();
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), Code::kPermissionDenied) << list.status().ToString();
  EXPECT_NE(list.status().message().find("InvalidAccessKeyId"), std::string::npos)
      << list.status().ToString();
  EXPECT_NE(list.status().message().find("check accessKeyID"), std::string::npos);
  Status save =
      store->Save(NewSnapshot(SnapshotKind::kFull, 0, 1, Unix(1), "", false), Source("x"));
  ASSERT_FALSE(save.ok());
  EXPECT_EQ(save.code(), Code::kPermissionDenied) << save.ToString();
}

TEST_F(S3StoreTest, MissingOrInvalidCredentialsFailToOpen) {
  ::unsetenv("AWS_APPLICATION_CREDENTIALS_JSON");
  auto none = OpenSnapStore(Options("x"));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("AWS_APPLICATION_CREDENTIALS_JSON"), std::string::npos)
      << none.status().ToString();

  // The directory form: one file per key.
  TempDir creds;
  std::ofstream(creds.File("region")) << "us-east-1\n";
  std::ofstream(creds.File("accessKeyID")) << "S3RVER\n";
  std::ofstream(creds.File("secretAccessKey")) << "S3RVER\n";
  ::setenv("AWS_APPLICATION_CREDENTIALS", creds.path().c_str(), 1);
  auto dir_store = OpenSnapStore(Options("from-dir"));
  ASSERT_TRUE(dir_store.ok()) << dir_store.status().ToString();
  EXPECT_TRUE((*dir_store)->List().ok());
  fs::remove(creds.File("region"));
  auto no_region = OpenSnapStore(Options("from-dir"));
  ASSERT_FALSE(no_region.ok());
  EXPECT_NE(no_region.status().message().find("region is missing"), std::string::npos);

  WriteCredentials(R"("accessKeyID": "S3RVER", "secretAccessKey": "S3RVER")");
  SnapStoreOptions o = Options("x");
  o.endpoint_override = "localhost:4568";
  auto bad_endpoint = OpenSnapStore(o);
  ASSERT_FALSE(bad_endpoint.ok());
  EXPECT_NE(bad_endpoint.status().message().find("localhost:4568"), std::string::npos);
  o = Options("x");
  o.min_chunk_size = kOneMiB;
  EXPECT_FALSE(OpenSnapStore(o).ok());
  o = Options("x");
  o.container.clear();
  ::unsetenv("STORAGE_CONTAINER");
  EXPECT_FALSE(OpenSnapStore(o).ok());
}

TEST_F(S3StoreTest, MissingBucketAndUnreachableServer) {
  SnapStoreOptions o = Options("x");
  o.container = "no-such-bucket";
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  auto list = store->List();
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("NoSuchBucket"), std::string::npos)
      << list.status().ToString();

  // Nothing listens there: a transport error, retried with backoff, then reported.
  o = Options("x");
  o.endpoint_override = "http://127.0.0.1:" + std::to_string(etcdw::testing::FreePort());
  S3StoreTuning quick;
  quick.max_retries = 2;
  quick.first_backoff = std::chrono::milliseconds(10);
  auto down = Open(o, quick);
  ASSERT_NE(down, nullptr);
  Status st = down->Save(NewSnapshot(SnapshotKind::kFull, 0, 1, Unix(1), "", false), Source("x"));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("connect"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace etcdw::sidecar
