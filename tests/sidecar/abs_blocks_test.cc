// The ABS store against a scripted in-process Azure (the project's HttpServer): failures are
// injected per block so that retries, backoff, the block list and the error answers can be
// checked exactly, which Azurite cannot do. Every request's signature is checked by the server
// with what it received (method, path, query, headers, length).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "etcdw/common/hash.h"
#include "etcdw/common/http.h"
#include "etcdw/sidecar/abs_store.h"
#include "process.h"
#include "shared_key.h"

namespace etcdw::sidecar {
namespace {

using common::HttpRequest;
using common::HttpResponse;
using namespace std::chrono_literals;

constexpr char kFakeKey[] =
    "c2VjcmV0IGtleSBvZiB0aGUgZmFrZSBhenVyZQ==";  // "secret key of the fake azure"
constexpr char kFakeBlobPath[] = "/acct/bkt/snaps/v2/Full-00000000-00000042-1700000000";

// A scripted blob service for account "acct", container "bkt".
struct FakeAzure {
  std::mutex mu;
  int fail_block = 0;  // the 1-based block number to fail, 0: none
  int fail_times = 0;
  int fail_status = 500;
  std::string fail_code = "InternalError";
  int fail_puts = 0;  // whole-blob uploads to fail before one succeeds
  // Listing: the pages to answer, in order, keyed by the marker asked for.
  std::map<std::string, std::string> pages;
  HttpResponse missing{.status = 404};  // what Get/Delete Blob answer

  std::map<std::string, int> attempts;   // block ID -> tries
  std::map<std::string, int64_t> sizes;  // block ID -> staged size
  int puts = 0;
  std::string block_list;
  std::vector<std::string> markers;   // asked for by List Blobs, in order
  std::vector<std::string> problems;  // requests that were not as expected

  static std::string Query(const HttpRequest& r) {
    size_t q = r.target.find('?');
    return q == std::string::npos ? "" : r.target.substr(q + 1);
  }

  static HttpResponse Error(int status, const std::string& code) {
    return {.status = status,
            .body = "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>" + code +
                    "</Code><Message>injected " + code +
                    "\nRequestId:1\nTime:now</Message></Error>",
            .headers = {{"x-ms-error-code", code}}};
  }

  HttpResponse Handle(const HttpRequest& r) {
    std::lock_guard lock(mu);
    // The signature, recomputed from what arrived.
    sharedkey::Request signed_request{
        r.method, r.path, Query(r), {}, static_cast<int64_t>(r.body.size())};
    for (const auto& [name, value] : r.headers) signed_request.headers.emplace_back(name, value);
    const std::string want =
        sharedkey::Sign(signed_request, "acct", *common::Base64Decode(kFakeKey)).authorization;
    auto auth = r.headers.find("authorization");
    if (auth == r.headers.end() || auth->second != want) {
      problems.push_back("bad signature on " + r.method + " " + r.target);
      return Error(403, "AuthenticationFailed");
    }
    if (r.headers.count("x-ms-date") == 0 || r.headers.count("x-ms-version") == 0) {
      problems.push_back("no x-ms-date or x-ms-version on " + r.target);
    }
    if (r.method == "GET" && r.query.count("comp") && r.query.at("comp") == "list") {
      if (r.path != "/acct/bkt" || r.query.at("restype") != "container") {
        problems.push_back("bad listing " + r.target);
      }
      std::string marker = r.query.count("marker") ? r.query.at("marker") : "";
      markers.push_back(marker);
      auto page = pages.find(marker);
      if (page == pages.end()) return Error(400, "OutOfRangeInput");
      return {.body = page->second};
    }
    if (r.path != kFakeBlobPath) {
      problems.push_back("unexpected path " + r.path);
      return Error(400, "InvalidUri");
    }
    if (r.method == "PUT" && r.query.count("comp") && r.query.at("comp") == "block") {
      const std::string id = r.query.at("blockid");
      const std::string number = common::Base64Decode(id).value_or("?");
      if (++attempts[id] <= fail_times && std::stoi(number) == fail_block) {
        return Error(fail_status, fail_code);
      }
      sizes[id] = static_cast<int64_t>(r.body.size());
      return {.status = 201};
    }
    if (r.method == "PUT" && r.query.count("comp") && r.query.at("comp") == "blocklist") {
      block_list = r.body;
      return {.status = 201};
    }
    if (r.method == "PUT") {
      if (r.headers.count("x-ms-blob-type") == 0 || r.headers.at("x-ms-blob-type") != "BlockBlob") {
        problems.push_back("Put Blob without x-ms-blob-type: BlockBlob");
      }
      if (++puts <= fail_puts) return Error(503, "ServerBusy");
      return {.status = 201};
    }
    if (r.method == "GET" || r.method == "DELETE") return missing;
    problems.push_back("unexpected " + r.method + " " + r.target);
    return Error(400, "UnsupportedHttpVerb");
  }
};

class AbsBlocksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.File("creds.json"))
        << R"({"storageAccount": "acct", "storageKey": ")" << kFakeKey << "\"}";
    ::setenv("AZURE_APPLICATION_CREDENTIALS_JSON", dir_.File("creds.json").c_str(), 1);
    auto server =
        common::HttpServer::Start({.host = "127.0.0.1", .max_body_bytes = 4 << 20, .threads = 4},
                                  [this](const HttpRequest& r) { return fake_.Handle(r); });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  void TearDown() override { ::unsetenv("AZURE_APPLICATION_CREDENTIALS_JSON"); }

  std::unique_ptr<SnapStore> Open(int max_retries = 5, int list_max_results = 0) {
    SnapStoreOptions o;
    o.provider = "ABS";
    o.container = "bkt";
    o.prefix = "snaps";
    o.endpoint_override = "http://127.0.0.1:" + std::to_string(server_->port()) + "/acct";
    o.min_chunk_size = 100 * 1024;
    o.max_parallel_chunk_uploads = 3;
    AbsStoreTuning tuning;
    tuning.max_retries = max_retries;
    tuning.first_backoff = 50ms;
    tuning.request_timeout = 10s;
    tuning.list_max_results = list_max_results;
    auto store = NewAbsStore(o, tuning);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Saves a file of `size` bytes: blocks of 100 KiB, 3 at once.
  Status Save(int64_t size, int max_retries = 5) {
    auto store = Open(max_retries);
    if (store == nullptr) return Internal("no store");
    const std::string src = dir_.File("src");
    std::ofstream(src, std::ios::binary) << std::string(static_cast<size_t>(size), 'x');
    return store->Save(Snapshot(), src);
  }

  static SnapshotInfo Snapshot() {
    return NewSnapshot(SnapshotKind::kFull, 0, 42,
                       std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)), "",
                       false);
  }

  etcdw::testing::TempDir dir_;
  FakeAzure fake_;
  std::unique_ptr<common::HttpServer> server_;
};

TEST_F(AbsBlocksTest, AFailedBlockIsRetriedWithBackoffThenTheListCommitted) {
  fake_.fail_block = 2;
  fake_.fail_times = 2;
  const auto start = std::chrono::steady_clock::now();
  Status st = Save(250 * 1024);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms) << "waits of 50 and 100 ms";
  std::lock_guard lock(fake_.mu);
  EXPECT_TRUE(fake_.problems.empty()) << fake_.problems.front();
  const std::string b1 = "MDAwMDAwMDAwMQ==", b2 = "MDAwMDAwMDAwMg==", b3 = "MDAwMDAwMDAwMw==";
  EXPECT_EQ(fake_.attempts, (std::map<std::string, int>{{b1, 1}, {b2, 3}, {b3, 1}}));
  EXPECT_EQ(fake_.sizes,
            (std::map<std::string, int64_t>{{b1, 100 * 1024}, {b2, 100 * 1024}, {b3, 50 * 1024}}));
  EXPECT_EQ(fake_.block_list, "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList><Latest>" + b1 +
                                  "</Latest><Latest>" + b2 + "</Latest><Latest>" + b3 +
                                  "</Latest></BlockList>");
  EXPECT_EQ(fake_.puts, 0);
}

TEST_F(AbsBlocksTest, ABlockFailingForGoodIsNeverCommitted) {
  fake_.fail_block = 2;
  fake_.fail_times = 1000;
  Status st = Save(250 * 1024, /*max_retries=*/2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("block 2/3"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("HTTP 500 InternalError: injected InternalError"), std::string::npos)
      << st.ToString();
  EXPECT_EQ(st.message().find("RequestId"), std::string::npos) << "only the message's first line";
  std::lock_guard lock(fake_.mu);
  EXPECT_TRUE(fake_.problems.empty()) << fake_.problems.front();
  EXPECT_EQ(fake_.attempts["MDAwMDAwMDAwMg=="], 3);
  EXPECT_TRUE(fake_.block_list.empty()) << "a reader never sees a partial blob";
}

TEST_F(AbsBlocksTest, APermanentErrorIsNotRetried) {
  fake_.fail_block = 1;
  fake_.fail_times = 1000;
  fake_.fail_status = 403;
  fake_.fail_code = "AuthorizationPermissionMismatch";
  Status st = Save(250 * 1024);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kPermissionDenied) << st.ToString();
  std::lock_guard lock(fake_.mu);
  EXPECT_EQ(fake_.attempts["MDAwMDAwMDAwMQ=="], 1);
  EXPECT_TRUE(fake_.block_list.empty());
}

TEST_F(AbsBlocksTest, ASmallFileIsOneRetriedPutBlob) {
  fake_.fail_puts = 1;
  Status st = Save(100 * 1024);  // not larger than min_chunk_size
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::lock_guard lock(fake_.mu);
  EXPECT_TRUE(fake_.problems.empty()) << fake_.problems.front();
  EXPECT_EQ(fake_.puts, 2);
  EXPECT_TRUE(fake_.attempts.empty());
}

TEST_F(AbsBlocksTest, ListingFollowsNextMarkerAndParsesSnapshots) {
  fake_.pages[""] =
      "<EnumerationResults><Blobs>"
      "<Blob><Name>snaps/v2/Incr-00000101-00000200-1700000100.gz</Name></Blob>"
      "<Blob><Name>snaps/v2/not-a-snapshot</Name></Blob>"
      "</Blobs><NextMarker>m/1 +=</NextMarker></EnumerationResults>";
  fake_.pages["m/1 +="] =
      "<EnumerationResults><Blobs>"
      "<Blob><Name>snaps/v2/Full-00000000-00000100-1700000000</Name></Blob>"
      "<Blob><Name>snaps/other/file</Name></Blob>"
      "<Blob><Name>snaps/v1/Backup-1600000000/Full-00000000-00000050-1600000000</Name></Blob>"
      "</Blobs><NextMarker/></EnumerationResults>";
  auto store = Open(5, 2);
  ASSERT_NE(store, nullptr);
  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].snap_dir, "Backup-1600000000");
  EXPECT_EQ((*list)[1].snap_name, "Full-00000000-00000100-1700000000");
  EXPECT_EQ((*list)[2].compression_suffix, ".gz");
  std::lock_guard lock(fake_.mu);
  EXPECT_TRUE(fake_.problems.empty()) << fake_.problems.front();
  EXPECT_EQ(fake_.markers, (std::vector<std::string>{"", "m/1 +="}))
      << "the marker goes back percent-encoded and signed decoded";
}

TEST_F(AbsBlocksTest, ErrorAnswersAreClear) {
  auto store = Open(/*max_retries=*/1);
  ASSERT_NE(store, nullptr);
  SnapshotInfo s = Snapshot();
  s.prefix = "snaps/v2/";

  // A missing blob: NotFound for Fetch (no file left), OK for Delete.
  fake_.missing = FakeAzure::Error(404, "BlobNotFound");
  const std::string dest = dir_.File("dest");
  std::ofstream(dest) << "stale";
  Status fetch = store->Fetch(s, dest);
  ASSERT_FALSE(fetch.ok());
  EXPECT_EQ(fetch.code(), Code::kNotFound) << fetch.ToString();
  EXPECT_NE(fetch.message().find("HTTP 404 BlobNotFound"), std::string::npos) << fetch.ToString();
  EXPECT_FALSE(std::filesystem::exists(dest));
  EXPECT_TRUE(store->Delete(s).ok());

  // An immutable blob cannot be deleted.
  fake_.missing = FakeAzure::Error(409, "BlobImmutableDueToPolicy");
  Status del = store->Delete(s);
  ASSERT_FALSE(del.ok());
  EXPECT_EQ(del.code(), Code::kFailedPrecondition) << del.ToString();
  EXPECT_NE(del.message().find("BlobImmutableDueToPolicy"), std::string::npos);

  // No such container, and an answer that is not a listing.
  fake_.pages[""] = FakeAzure::Error(404, "ContainerNotFound").body;
  auto junk = store->List();
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().code(), Code::kDataLoss) << junk.status().ToString();
  fake_.pages.clear();
  auto bad = store->List();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("OutOfRangeInput"), std::string::npos);

  // A wrong key: the server refuses the signature; the error says where the key came from.
  std::ofstream(dir_.File("creds.json"))
      << R"({"storageAccount": "acct", "storageKey": "d3Jvbmcga2V5"})";
  auto wrong = Open();
  ASSERT_NE(wrong, nullptr);
  auto denied = wrong->List();
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), Code::kPermissionDenied) << denied.status().ToString();
  EXPECT_NE(denied.status().message().find("check storageAccount and storageKey"),
            std::string::npos);
  EXPECT_NE(denied.status().message().find(dir_.File("creds.json")), std::string::npos);
  std::lock_guard lock(fake_.mu);
  fake_.problems.clear();  // the bad signature was the point
}

}  // namespace
}  // namespace etcdw::sidecar
