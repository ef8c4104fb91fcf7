// The S3 store's private helpers: gardener's credential files, endpoint URLs, and the XML
// scanner that reads S3's answers.
#include "s3_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "object_xml.h"
#include "process.h"

namespace etcdw::sidecar {
namespace {

using etcdw::testing::TempDir;

// Sets or clears the two credential variables for one test.
class CredentialEnv {
 public:
  CredentialEnv(const std::string& json_file, const std::string& dir) {
    Set(kAwsCredentialsJsonEnv, json_file);
    Set(kAwsCredentialsDirEnv, dir);
  }
  ~CredentialEnv() {
    ::unsetenv(kAwsCredentialsJsonEnv);
    ::unsetenv(kAwsCredentialsDirEnv);
  }

 private:
  static void Set(const char* name, const std::string& value) {
    if (value.empty()) {
      ::unsetenv(name);
    } else {
      ::setenv(name, value.c_str(), 1);
    }
  }
};

void Write(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

TEST(S3CredentialsTest, JsonFileWithEveryKey) {
  TempDir dir;
  Write(dir.File("c.json"), R"({"region":"eu-west-1","accessKeyID":"AK","secretAccessKey":"SK",
      "endpoint":"http://127.0.0.1:9000","s3ForcePathStyle":true,"insecureSkipVerify":false,
      "trustedCaCert":"PEM","sseCustomerKey":"k","sseCustomerAlgorithm":"AES256",
      "requestChecksumCalculation":"WHEN_REQUIRED","bucketName":"ignored"})");
  CredentialEnv env(dir.File("c.json"), "");
  auto c = LoadS3Credentials();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->region, "eu-west-1");
  EXPECT_EQ(c->access_key_id, "AK");
  EXPECT_EQ(c->secret_access_key, "SK");
  EXPECT_EQ(c->endpoint, "http://127.0.0.1:9000");
  EXPECT_TRUE(c->force_path_style);
  EXPECT_FALSE(c->insecure_skip_verify);
  EXPECT_EQ(c->trusted_ca_cert, "PEM");
  EXPECT_EQ(c->sse_customer_algorithm, "AES256");
  EXPECT_EQ(c->source, dir.File("c.json"));
}

TEST(S3CredentialsTest, DirectoryOfFilesLosesTrailingLineBreaks) {
  TempDir dir;
  Write(dir.File("region"), "us-east-1\n");
  Write(dir.File("accessKeyID"), "AK\n");
  Write(dir.File("secretAccessKey"), "SK");
  Write(dir.File("s3ForcePathStyle"), "True\n");
  Write(dir.File("unrelated"), "x");
  CredentialEnv env("", dir.path());
  auto c = LoadS3Credentials();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_EQ(c->access_key_id, "AK");
  EXPECT_TRUE(c->force_path_style);

  // A JSON file in the directory wins over the single files (gardener's transition rule).
  Write(dir.File("creds.json"),
        R"({"region":"ap-south-1","accessKeyID":"J","secretAccessKey":"S"})");
  auto j = LoadS3Credentials();
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->region, "ap-south-1");
  EXPECT_EQ(j->source, dir.File("creds.json"));
}

TEST(S3CredentialsTest, ProblemsAreNamed) {
  auto expect_error = [](const std::string& json, const std::string& fragment) {
    TempDir dir;
    Write(dir.File("c.json"), json);
    CredentialEnv env(dir.File("c.json"), "");
    auto c = LoadS3Credentials();
    ASSERT_FALSE(c.ok()) << json;
    EXPECT_NE(c.status().message().find(fragment), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find(dir.File("c.json")), std::string::npos);
  };
  expect_error("{not json", "not valid JSON");
  expect_error("[]", "not a JSON object");
  expect_error(R"({"accessKeyID":"a","secretAccessKey":"b"})", "region is missing");
  expect_error(R"({"region":"r","accessKeyID":"a"})", "accessKeyID and secretAccessKey");
  expect_error(R"({"region":"r","roleARN":"arn","tokenPath":"/t"})", "web identity");
  expect_error(R"({"region":5,"accessKeyID":"a","secretAccessKey":"b"})",
               "\"region\" must be a string");
  expect_error(R"({"region":"r","accessKeyID":"a","secretAccessKey":"b","s3ForcePathStyle":"yes"})",
               "\"s3ForcePathStyle\" must be true or false");
  expect_error(R"({"region":"r","accessKeyID":"a","secretAccessKey":"b","sseCustomerKey":"k"})",
               "sseCustomerAlgorithm");
  expect_error(
      R"({"region":"r","accessKeyID":"a","secretAccessKey":"b","responseChecksumValidation":"x"})",
      "when_supported/when_required");

  TempDir dir;
  Write(dir.File("region"), "r");
  Write(dir.File("accessKeyID"), "a");
  Write(dir.File("secretAccessKey"), "b");
  Write(dir.File("insecureSkipVerify"), "maybe");
  CredentialEnv env("", dir.path());
  auto c = LoadS3Credentials();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("is not a boolean"), std::string::npos);
}

TEST(S3CredentialsTest, MissingVariablesOrFiles) {
  {
    CredentialEnv env("", "");
    auto c = LoadS3Credentials();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("AWS_APPLICATION_CREDENTIALS_JSON"), std::string::npos);
    EXPECT_NE(c.status().message().find("AWS_APPLICATION_CREDENTIALS "), std::string::npos);
  }
  {
    CredentialEnv env("/nonexistent/creds.json", "");
    auto c = LoadS3Credentials();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("/nonexistent/creds.json"), std::string::npos);
  }
  {
    CredentialEnv env("", "/nonexistent/dir");
    auto c = LoadS3Credentials();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("/nonexistent/dir"), std::string::npos);
  }
}

TEST(StoreEndpointTest, ParsesSchemesPortsAndBasePaths) {
  auto a = ParseStoreEndpoint("https://s3.eu-west-1.amazonaws.com", "S3 endpoint");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->tls);
  EXPECT_EQ(a->port, 443);
  EXPECT_EQ(a->HostHeader(), "s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(a->HostPort(), "s3.eu-west-1.amazonaws.com:443");
  EXPECT_FALSE(a->host_is_ip);
  auto b = ParseStoreEndpoint("http://127.0.0.1:9000/base/", "S3 endpoint");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->tls);
  EXPECT_EQ(b->HostHeader(), "127.0.0.1:9000");
  EXPECT_EQ(b->base_path, "/base");
  EXPECT_TRUE(b->host_is_ip);
  EXPECT_EQ(b->ToString(), "http://127.0.0.1:9000/base");
  auto c = ParseStoreEndpoint("http://[::1]:80", "S3 endpoint");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->HostHeader(), "[::1]");
  EXPECT_EQ(c->HostPort(), "[::1]:80");
  EXPECT_TRUE(c->host_is_ip);
  for (const char* bad : {"s3.amazonaws.com", "ftp://h", "http://", "http://h:", "http://h:99999",
                          "http://h:1x", "http://h/?a=b", "http://[::1"}) {
    EXPECT_FALSE(ParseStoreEndpoint(bad, "S3 endpoint").ok()) << bad;
  }
}

TEST(S3XmlTest, FindsElementsThroughNamespacesAttributesCommentsAndCdata) {
  const std::string xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<!-- a comment with <Key>fake</Key> -->
<s3:ListBucketResult xmlns:s3="http://s3.amazonaws.com/doc/2006-03-01/">
  <s3:Contents><s3:Key>a/v2/Full-1</s3:Key><Size>3</Size></s3:Contents>
  <Contents><Key attr="x>y">b&amp;c &lt;&#65;&#x42;&gt;</Key></Contents>
  <Contents><Key><![CDATA[<raw & key>]]></Key></Contents>
  <Contents><Key/></Contents>
  <IsTruncated>true</IsTruncated>
</s3:ListBucketResult>)";
  auto contents = objxml::Elements(xml, "Contents");
  ASSERT_EQ(contents.size(), 4u);
  EXPECT_EQ(objxml::FirstText(contents[0], "Key"), "a/v2/Full-1");
  EXPECT_EQ(objxml::FirstText(contents[1], "Key"), "b&c <AB>");
  EXPECT_EQ(objxml::FirstText(contents[2], "Key"), "<raw & key>");
  EXPECT_EQ(objxml::FirstText(contents[3], "Key"), "");
  EXPECT_EQ(objxml::FirstText(xml, "IsTruncated"), "true");
  EXPECT_EQ(objxml::FirstText(xml, "NextContinuationToken"), std::nullopt);
}

TEST(S3XmlTest, NestingTruncationAndEscaping) {
  EXPECT_EQ(objxml::Elements("<A><A>x</A>y</A><A>z</A>", "A").size(), 2u);
  EXPECT_EQ(objxml::Text(objxml::Elements("<A><A>x</A>y</A>", "A")[0]), "xy");
  EXPECT_TRUE(objxml::Elements("<A>never closed", "A").empty());
  EXPECT_TRUE(objxml::Elements("", "A").empty());
  EXPECT_EQ(objxml::Text("&unknown; &#xZZ; & alone"), "&unknown; &#xZZ; & alone");
  EXPECT_EQ(objxml::Escape("\"etag\" <&'>"), "&quot;etag&quot; &lt;&amp;&apos;&gt;");
  EXPECT_EQ(objxml::Text(objxml::Escape("\"etag\" <&'>")), "\"etag\" <&'>");
}

}  // namespace
}  // namespace etcdw::sidecar
