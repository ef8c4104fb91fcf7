// Multipart uploads against a scripted in-process S3 (the project's HttpServer): failures are
// injected per part so that retries, backoff, abort and the completion request can be checked
// exactly, which s3rver cannot do.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <mutex>

#include "etcdw/common/http.h"
#include "etcdw/sidecar/s3_store.h"
#include "etcdw/sidecar/sigv4.h"
#include "process.h"

namespace etcdw::sidecar {
namespace {

using common::HttpRequest;
using common::HttpResponse;
using namespace std::chrono_literals;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr char kUploadId[] = "up/1+=";  // needs percent-encoding in a query

// A scripted S3: answers the multipart calls of one bucket and records what it saw.
struct FakeS3 {
  std::mutex mu;
  int fail_part = 0;  // the part number to fail, 0: none
  int fail_times = 0;
  int fail_status = 500;
  std::string fail_code = "InternalError";
  bool complete_fails_in_200 = false;
  int fail_puts = 0;  // single-request uploads to fail before one succeeds

  std::map<int, int> attempts;  // part number -> tries
  std::map<int, int64_t> sizes;
  int puts = 0;
  bool aborted = false;
  std::string complete_body;
  std::vector<std::string> problems;                        // requests that were not as expected
  std::vector<std::map<std::string, std::string>> headers;  // of every request, in order

  HttpResponse Handle(HttpRequest r) {
    std::lock_guard lock(mu);
    headers.push_back(r.headers);
    if (r.headers.count("authorization") == 0 ||
        r.headers.at("authorization").rfind("AWS4-HMAC-SHA256 Credential=AK/", 0) != 0) {
      problems.push_back("unsigned " + r.method + " " + r.target);
    }
    // Over http the payload hash is signed: it must match the body.
    if (r.headers["x-amz-content-sha256"] != sigv4::Sha256Hex(r.body)) {
      problems.push_back("payload hash mismatch on " + r.method + " " + r.target);
    }
    if (r.path != "/bkt/snaps/v2/Full-00000000-00000042-1700000000") {
      problems.push_back("unexpected path " + r.path);
    }
    if (r.method == "POST" && r.query.count("uploads")) {
      return {.body = std::string("<InitiateMultipartUploadResult><Bucket>bkt</Bucket>") +
                      "<UploadId>" + kUploadId + "</UploadId></InitiateMultipartUploadResult>"};
    }
    if (r.method == "PUT" && r.query.count("partNumber")) {
      if (r.query["uploadId"] != kUploadId) problems.push_back("upload id " + r.query["uploadId"]);
      int n = std::stoi(r.query["partNumber"]);
      if (++attempts[n] <= fail_times && n == fail_part) {
        return {.status = fail_status,
                .body = "<Error><Code>" + fail_code + "</Code><Message>injected</Message></Error>"};
      }
      sizes[n] = static_cast<int64_t>(r.body.size());
      return {.headers = {{"ETag", "\"etag-" + std::to_string(n) + "\""}}};
    }
    if (r.method == "POST" && r.query.count("uploadId")) {
      complete_body = r.body;
      if (complete_fails_in_200) {
        return {.body = "<Error><Code>InternalError</Code><Message>late</Message></Error>"};
      }
      return {.body =
                  "<CompleteMultipartUploadResult><ETag>\"x-3\"</ETag>"
                  "</CompleteMultipartUploadResult>"};
    }
    if (r.method == "DELETE" && r.query.count("uploadId")) {
      aborted = true;
      return {.status = 204};
    }
    if (r.method == "PUT") {
      if (++puts <= fail_puts) {
        return {.status = 503, .body = "<Error><Code>SlowDown</Code></Error>"};
      }
      return {};
    }
    problems.push_back("unexpected " + r.method + " " + r.target);
    return {.status = 400};
  }
};

class S3MultipartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.File("creds.json"))
        << R"({"region": "us-east-1", "accessKeyID": "AK", "secretAccessKey": "SK"})";
    ::setenv("AWS_APPLICATION_CREDENTIALS_JSON", dir_.File("creds.json").c_str(), 1);
    auto server =
        common::HttpServer::Start({.host = "127.0.0.1", .max_body_bytes = 6 << 20},
                                  [this](const HttpRequest& r) { return fake_.Handle(r); });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  void TearDown() override { ::unsetenv("AWS_APPLICATION_CREDENTIALS_JSON"); }

  // Saves a file of `size` bytes; parts of 5 MiB, 3 at once.
  Status Save(int64_t size, int max_retries = 5) {
    SnapStoreOptions o;
    o.provider = "S3";
    o.container = "bkt";
    o.prefix = "snaps";
    o.endpoint_override = "http://127.0.0.1:" + std::to_string(server_->port());
    o.min_chunk_size = 5 * kMiB;
    o.max_parallel_chunk_uploads = 3;
    S3StoreTuning tuning;
    tuning.max_retries = max_retries;
    tuning.first_backoff = 50ms;
    tuning.request_timeout = 10s;
    auto store = NewS3Store(o, tuning);
    if (!store.ok()) return store.status();
    const std::string src = dir_.File("src");
    std::ofstream(src, std::ios::binary) << std::string(static_cast<size_t>(size), 'x');
    SnapshotInfo s = NewSnapshot(
        SnapshotKind::kFull, 0, 42,
        std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)), "", false);
    return (*store)->Save(s, src);
  }

  etcdw::testing::TempDir dir_;
  FakeS3 fake_;
  std::unique_ptr<common::HttpServer> server_;
};

TEST_F(S3MultipartTest, AFailedPartIsRetriedWithBackoffAndTheUploadCompleted) {
  fake_.fail_part = 2;
  fake_.fail_times = 2;
  const auto start = std::chrono::steady_clock::now();
  Status st = Save(11 * kMiB + 3);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms) << "waits of 50 and 100 ms";
  std::lock_guard lock(fake_.mu);
  EXPECT_TRUE(fake_.problems.empty()) << fake_.problems.front();
  EXPECT_EQ(fake_.attempts, (std::map<int, int>{{1, 1}, {2, 3}, {3, 1}}));
  EXPECT_EQ(fake_.sizes, (std::map<int, int64_t>{{1, 5 * kMiB}, {2, 5 * kMiB}, {3, kMiB + 3}}));
  EXPECT_FALSE(fake_.aborted);
  EXPECT_EQ(fake_.complete_body,
            "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            "<Part><PartNumber>1</PartNumber><ETag>&quot;etag-1&quot;</ETag></Part>"
            "<Part><PartNumber>2</PartNumber><ETag>&quot;etag-2&quot;</ETag></Part>"
            "<Part><PartNumber>3</PartNumber><ETag>&quot;etag-3&quot;</ETag></Part>"
            "</CompleteMultipartUpload>");
}

TEST_F(S3MultipartTest, APartFailingForGoodAbortsTheUpload) {
  fake_.fail_part = 2;
  fake_.fail_times = 1000;
  Status st = Save(11 * kMiB, /*max_retries=*/2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("part 2/3"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("HTTP 500 InternalError: injected"), std::string::npos)
      << st.ToString();
  std::lock_guard lock(fake_.mu);
  EXPECT_TRUE(fake_.problems.empty()) << fake_.problems.front();
  EXPECT_EQ(fake_.attempts[2], 3);
  EXPECT_TRUE(fake_.aborted);
  EXPECT_TRUE(fake_.complete_body.empty());
}

TEST_F(S3MultipartTest, APermanentErrorIsNotRetried) {
  fake_.fail_part = 1;
  fake_.fail_times = 1000;
  fake_.fail_status = 403;
  fake_.fail_code = "AccessDenied";
  Status st = Save(11 * kMiB);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kPermissionDenied) << st.ToString();
  std::lock_guard lock(fake_.mu);
  EXPECT_EQ(fake_.attempts[1], 1);
  EXPECT_TRUE(fake_.aborted);
}

TEST_F(S3MultipartTest, AnErrorInsideA200CompletionIsAFailure) {
  fake_.complete_fails_in_200 = true;
  Status st = Save(10 * kMiB + 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("completion"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("InternalError: late"), std::string::npos) << st.ToString();
  std::lock_guard lock(fake_.mu);
  EXPECT_TRUE(fake_.aborted);
}

TEST_F(S3MultipartTest, ASmallFileIsOneRetriedPut) {
  fake_.fail_puts = 1;
  Status st = Save(5 * kMiB);  // not larger than min_chunk_size
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::lock_guard lock(fake_.mu);
  EXPECT_TRUE(fake_.problems.empty()) << fake_.problems.front();
  EXPECT_EQ(fake_.puts, 2);
  EXPECT_TRUE(fake_.attempts.empty());
}

TEST_F(S3MultipartTest, SseCustomerKeyGoesSignedWithEveryDataRequest) {
  std::ofstream(dir_.File("creds.json"))
      << R"({"region": "us-east-1", "accessKeyID": "AK", "secretAccessKey": "SK",
             "sseCustomerKey": "0123456789abcdef0123456789abcdef",
             "sseCustomerAlgorithm": "AES256"})";
  Status st = Save(10 * kMiB + 1);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::lock_guard lock(fake_.mu);
  EXPECT_TRUE(fake_.problems.empty()) << fake_.problems.front();
  ASSERT_EQ(fake_.headers.size(), 5u);  // initiate, 3 parts, complete
  for (size_t i = 0; i + 1 < fake_.headers.size(); ++i) {
    auto& h = fake_.headers[i];
    EXPECT_EQ(h["x-amz-server-side-encryption-customer-algorithm"], "AES256");
    // base64 of the key, and base64 of its MD5.
    EXPECT_EQ(h["x-amz-server-side-encryption-customer-key"],
              "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=");
    EXPECT_EQ(h["x-amz-server-side-encryption-customer-key-md5"], "hRasmdxgYDKV3nvbahU1MA==");
    EXPECT_NE(h["authorization"].find("x-amz-server-side-encryption-customer-key;"),
              std::string::npos)
        << h["authorization"];
  }
  EXPECT_EQ(fake_.headers.back().count("x-amz-server-side-encryption-customer-key"), 0u)
      << "CompleteMultipartUpload takes no SSE-C headers";
}

}  // namespace
}  // namespace etcdw::sidecar
