// SigV4 against AWS's published examples: the worked IAM example of the Signature Version 4
// documentation (canonical request hash, signing key, signature), the four S3 examples of
// "Authenticating Requests: Using the Authorization Header" (GET Object with Range, PUT Object,
// GET Bucket Lifecycle, GET Bucket (List Objects)), and cases of the aws-sig-v4-test-suite
// (service "service", example.amazonaws.com, 20150830T123600Z).
#include "etcdw/sidecar/sigv4.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace etcdw::sidecar::sigv4 {
namespace {

// The IAM example and the test suite use this secret; the S3 examples a slightly different one.
const Credentials kSuiteCreds{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};
const Credentials kS3Creds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};

TEST(SigV4Test, IamDocumentationExample) {
  Request r;
  r.method = "GET";
  r.path = "/";
  r.query = "Action=ListUsers&Version=2010-05-08";
  r.headers = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
               {"Host", "iam.amazonaws.com"},
               {"X-Amz-Date", "20150830T123600Z"}};
  r.payload_hash = kEmptySha256;
  Signature s = Sign(r, kSuiteCreds, "us-east-1", "iam", "20150830T123600Z");
  EXPECT_EQ(s.canonical_request,
            "GET\n/\nAction=ListUsers&Version=2010-05-08\n"
            "content-type:application/x-www-form-urlencoded; charset=utf-8\n"
            "host:iam.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
            "content-type;host;x-amz-date\n" +
                std::string(kEmptySha256));
  EXPECT_EQ(Sha256Hex(s.canonical_request),
            "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/iam/aws4_request\n"
            "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59");
  EXPECT_EQ(Hex(SigningKey(kSuiteCreds.secret_access_key, "20150830", "us-east-1", "iam")),
            "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
  EXPECT_EQ(s.signature, "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date, "
            "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7");
}

// The S3 examples: examplebucket, 20130524T000000Z, us-east-1.
Signature SignS3(const std::string& method, const std::string& path, const std::string& query,
                 std::vector<std::pair<std::string, std::string>> extra,
                 const std::string& payload_hash) {
  Request r;
  r.method = method;
  r.path = path;
  r.query = query;
  r.headers = std::move(extra);
  r.headers.emplace_back("Host", "examplebucket.s3.amazonaws.com");
  r.headers.emplace_back("x-amz-date", "20130524T000000Z");
  r.headers.emplace_back("x-amz-content-sha256", payload_hash);
  r.payload_hash = payload_hash;
  return Sign(r, kS3Creds, "us-east-1", "s3", "20130524T000000Z");
}

TEST(SigV4Test, S3GetObjectExample) {
  Signature s = SignS3("GET", "/test.txt", "", {{"Range", "bytes=0-9"}}, kEmptySha256);
  EXPECT_EQ(s.canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:" +
                std::string(kEmptySha256) +
                "\nx-amz-date:20130524T000000Z\n\n"
                "host;range;x-amz-content-sha256;x-amz-date\n" +
                kEmptySha256);
  EXPECT_EQ(Sha256Hex(s.canonical_request),
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(s.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(s.signed_headers, "host;range;x-amz-content-sha256;x-amz-date");
}

TEST(SigV4Test, S3PutObjectExample) {
  const std::string payload = Sha256Hex("Welcome to Amazon S3.");
  EXPECT_EQ(payload, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  Signature s = SignS3(
      "PUT", "/" + UriEncode("test$file.text", true), "",
      {{"Date", "Fri, 24 May 2013 00:00:00 GMT"}, {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
      payload);
  EXPECT_NE(s.canonical_request.find("PUT\n/test%24file.text\n"), std::string::npos);
  EXPECT_EQ(s.signed_headers, "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class");
  EXPECT_EQ(s.signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4Test, S3GetBucketLifecycleExampleSignsAValuelessParameter) {
  Signature s = SignS3("GET", "/", "lifecycle", {}, kEmptySha256);
  EXPECT_EQ(s.canonical_request.rfind("GET\n/\nlifecycle=\n", 0), 0u) << s.canonical_request;
  EXPECT_EQ(s.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4Test, S3ListObjectsExampleSortsTheQuery) {
  Signature s = SignS3("GET", "/", "prefix=J&max-keys=2", {}, kEmptySha256);
  EXPECT_EQ(s.canonical_request.rfind("GET\n/\nmax-keys=2&prefix=J\n", 0), 0u);
  EXPECT_EQ(s.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

// aws-sig-v4-test-suite cases.
Signature SignSuite(const std::string& method, const std::string& query,
                    std::vector<std::pair<std::string, std::string>> extra,
                    const std::string& body = "") {
  Request r;
  r.method = method;
  r.path = "/";
  r.query = query;
  r.headers = std::move(extra);
  r.headers.emplace_back("Host", "example.amazonaws.com");
  r.headers.emplace_back("X-Amz-Date", "20150830T123600Z");
  r.payload_hash = Sha256Hex(body);
  return Sign(r, kSuiteCreds, "us-east-1", "service", "20150830T123600Z");
}

TEST(SigV4Test, SuiteGetVanilla) {
  Signature s = SignSuite("GET", "", {});
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4Test, SuiteQueryOrder) {
  EXPECT_EQ(SignSuite("GET", "Param2=value2&Param1=value1", {}).signature,
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
  EXPECT_EQ(SignSuite("GET", "Param1=value2&Param1=value1", {}).signature,
            "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694");
}

TEST(SigV4Test, SuiteHeaderValuesTrimmedAndRepeatsJoined) {
  Signature trim =
      SignSuite("GET", "", {{"My-Header1", " value1"}, {"My-Header2", "\"a   b   c\""}});
  EXPECT_NE(trim.canonical_request.find("my-header1:value1\nmy-header2:\"a b c\"\n"),
            std::string::npos);
  EXPECT_EQ(trim.signature, "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736");
  Signature dup = SignSuite(
      "GET", "", {{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}});
  EXPECT_NE(dup.canonical_request.find("my-header1:value2,value2,value1\n"), std::string::npos);
  EXPECT_EQ(dup.signature, "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea");
}

TEST(SigV4Test, SuitePostFormBody) {
  Signature s = SignSuite("POST", "", {{"Content-Type", "application/x-www-form-urlencoded"}},
                          "Param1=value1");
  EXPECT_EQ(s.signed_headers, "content-type;host;x-amz-date");
  EXPECT_EQ(s.signature, "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");
}

TEST(SigV4Test, UriEncodeKeepsOnlyUnreservedCharacters) {
  EXPECT_EQ(UriEncode("AZaz09-_.~", false), "AZaz09-_.~");
  EXPECT_EQ(UriEncode("a b+c/d=é*", false), "a%20b%2Bc%2Fd%3D%C3%A9%2A");
  EXPECT_EQ(UriEncode("etcd/v2/Full-00000000-00000001-1", true),
            "etcd/v2/Full-00000000-00000001-1");
  EXPECT_EQ(UriEncode("a b/c", true), "a%20b/c");
}

TEST(SigV4Test, CanonicalQueryDecodesReencodesAndSorts) {
  EXPECT_EQ(CanonicalQuery(""), "");
  EXPECT_EQ(CanonicalQuery("uploads"), "uploads=");
  EXPECT_EQ(CanonicalQuery("uploadId=a%2Fb&partNumber=2"), "partNumber=2&uploadId=a%2Fb");
  // Already encoded or not, the result is the same; '+' is a plus, not a space.
  EXPECT_EQ(CanonicalQuery("prefix=a/b c&x=1+1"), "prefix=a%2Fb%20c&x=1%2B1");
  EXPECT_EQ(CanonicalQuery("prefix=a%2Fb%20c&x=1%2B1"), "prefix=a%2Fb%20c&x=1%2B1");
  EXPECT_EQ(CanonicalQuery("b=2&&a=1"), "a=1&b=2");
}

TEST(SigV4Test, AmzDateIsUtc) {
  EXPECT_EQ(AmzDate(std::chrono::system_clock::time_point(std::chrono::seconds(1440938160))),
            "20150830T123600Z");
  EXPECT_EQ(AmzDate(std::chrono::system_clock::time_point(std::chrono::seconds(0))),
            "19700101T000000Z");
}

TEST(SigV4Test, FileRangeHashEqualsTheHashOfTheBytes) {
  std::string content;
  for (int i = 0; i < (3 << 20) + 5; ++i) content += static_cast<char>(i * 7);
  const std::string path =
      ::testing::TempDir() + "/sigv4_test_" + std::to_string(::getpid()) + ".bin";
  std::ofstream(path, std::ios::binary) << content;
  auto h = Sha256HexOfFile(path, 1000, (2 << 20) + 3);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(*h, Sha256Hex(std::string_view(content).substr(1000, (2 << 20) + 3)));
  auto empty = Sha256HexOfFile(path, 0, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, kEmptySha256);
  auto beyond = Sha256HexOfFile(path, static_cast<int64_t>(content.size()) - 1, 2);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find(path), std::string::npos);
  EXPECT_FALSE(Sha256HexOfFile(path + ".absent", 0, 1).ok());
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace etcdw::sidecar::sigv4
