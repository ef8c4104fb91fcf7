// The ABS store's private helpers: Shared Key signing (against strings to sign written out by
// hand from Microsoft's rules, and signatures computed from them independently), gardener's
// credential files, the service URL, block IDs and the List Blobs reader; and base64.
#include "abs_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "etcdw/common/hash.h"
#include "process.h"
#include "shared_key.h"

namespace etcdw::sidecar {
namespace {

using etcdw::testing::TempDir;

// Azurite's well-known development key (public, in Microsoft's documentation).
constexpr char kDevKey[] =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

std::string DecodedDevKey() { return common::Base64Decode(kDevKey).value(); }

TEST(SharedKeyTest, PutBlockStringToSignFollowsMicrosoftsRules) {
  sharedkey::Request r;
  r.method = "PUT";
  // The emulator's path-style URL: the account is the path's first segment.
  r.path = "/devstoreaccount1/etcd-backups/shoot/v2/Full-00000000-00000100-1700000000";
  r.query = "comp=block&blockid=MDAwMDAwMDAwMQ%3D%3D";
  r.content_length = 1048576;
  r.headers = {{"Content-Type", "application/octet-stream"},
               {"x-ms-version", "2021-08-06"},
               {"X-MS-Date", "Sat, 28 Nov 2026 17:00:00 GMT"},
               {"x-ms-meta-tag", " x "},
               {"x-ms-meta-tag", "y"},
               {"x-ms-client-request-id", "a\r\n  b"},
               {"User-Agent", "not signed"}};
  sharedkey::Signature sig = sharedkey::Sign(r, "devstoreaccount1", DecodedDevKey());
  // VERB, Content-Encoding, Content-Language, Content-Length, Content-MD5, Content-Type, Date,
  // If-Modified-Since, If-Match, If-None-Match, If-Unmodified-Since, Range; then the x-ms-
  // headers lower-cased and sorted (values trimmed, a folded line unfolded, repeats joined with
  // ','); then /account + path (the account twice for the emulator) and the query parameters
  // sorted, decoded.
  EXPECT_EQ(sig.string_to_sign,
            "PUT\n\n\n1048576\n\napplication/octet-stream\n\n\n\n\n\n\n"
            "x-ms-client-request-id:a b\n"
            "x-ms-date:Sat, 28 Nov 2026 17:00:00 GMT\n"
            "x-ms-meta-tag:x,y\n"
            "x-ms-version:2021-08-06\n"
            "/devstoreaccount1/devstoreaccount1/etcd-backups/shoot/v2/"
            "Full-00000000-00000100-1700000000\n"
            "blockid:MDAwMDAwMDAwMQ==\n"
            "comp:block");
  // base64(HMAC-SHA256(base64decode(key), string to sign)), computed with Python's hmac.
  EXPECT_EQ(sig.signature, "qDd2bJu0XNC1jTL/GJ6+MTBRr/HhuH4vbJ+DDjWqfQg=");
  EXPECT_EQ(sig.authorization,
            "SharedKey devstoreaccount1:qDd2bJu0XNC1jTL/GJ6+MTBRr/HhuH4vbJ+DDjWqfQg=");
}

TEST(SharedKeyTest, ListBlobsWithoutBodySignsAnEmptyContentLength) {
  sharedkey::Request r;
  r.method = "GET";
  r.path = "/etcd-backups";
  r.query = "restype=container&comp=list&prefix=shoot&maxresults=2";
  r.headers = {{"x-ms-date", "Sat, 28 Nov 2026 17:00:00 GMT"}, {"x-ms-version", "2021-08-06"}};
  sharedkey::Signature sig = sharedkey::Sign(r, "myaccount", DecodedDevKey());
  EXPECT_EQ(sig.string_to_sign,
            "GET\n\n\n\n\n\n\n\n\n\n\n\n"
            "x-ms-date:Sat, 28 Nov 2026 17:00:00 GMT\n"
            "x-ms-version:2021-08-06\n"
            "/myaccount/etcd-backups\n"
            "comp:list\nmaxresults:2\nprefix:shoot\nrestype:container");
  EXPECT_EQ(sig.signature, "9MIxmnkSG9EgNsVS5yYt71ghmOXh7s9aFARIlpiU2XU=");
  // Another key signs differently.
  EXPECT_NE(sharedkey::Sign(r, "myaccount", "other").signature, sig.signature);
}

TEST(SharedKeyTest, CanonicalizedResourceGroupsSortsAndDecodesParameters) {
  EXPECT_EQ(sharedkey::CanonicalizedResource("acct", "", ""), "/acct/");
  EXPECT_EQ(sharedkey::CanonicalizedResource("acct", "/c/a%20b", "B=2&a=z&a=y&flag&x=%2F"),
            "/acct/c/a%20b\na:y,z\nb:2\nflag:\nx:/");
  EXPECT_EQ(sharedkey::CanonicalizedHeaders(
                {{"Content-Type", "x"}, {"x-ms-b", "2"}, {"X-Ms-A", "  1  "}}),
            "x-ms-a:1\nx-ms-b:2\n");
}

TEST(SharedKeyTest, HttpDateIsRfc1123InGmt) {
  EXPECT_EQ(
      sharedkey::HttpDate(std::chrono::system_clock::time_point(std::chrono::seconds(1255297753))),
      "Sun, 11 Oct 2009 21:49:13 GMT");
  EXPECT_EQ(sharedkey::HttpDate(std::chrono::system_clock::time_point(std::chrono::seconds(0))),
            "Thu, 01 Jan 1970 00:00:00 GMT");
}

TEST(Base64Test, Rfc4648VectorsAndBadInput) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(common::Base64Encode(plain), encoded);
    EXPECT_EQ(common::Base64Decode(encoded), plain) << encoded;
  }
  EXPECT_EQ(common::Base64Encode(std::string("\xff\xfe\x00", 3)), "//4A");
  EXPECT_EQ(common::Base64Decode("Zm9v\r\nYmFy\n"), "foobar") << "line breaks are skipped";
  for (const char* bad : {"Zm9", "Zm9v!A==", "=Zm9", "Zg==Zg==", "Z===", "Zm 9v"}) {
    EXPECT_EQ(common::Base64Decode(bad), std::nullopt) << bad;
  }
}

// Sets or clears the credential variables (unprefixed and SOURCE_) for one test.
class AzureEnv {
 public:
  AzureEnv(const std::string& json_file, const std::string& dir) {
    Set(kAzureCredentialsJsonEnv, json_file);
    Set(kAzureCredentialsDirEnv, dir);
  }
  ~AzureEnv() {
    for (const char* name : {kAzureCredentialsJsonEnv, kAzureCredentialsDirEnv}) {
      ::unsetenv(name);
      ::unsetenv((std::string("SOURCE_") + name).c_str());
    }
  }
  static void Set(const std::string& name, const std::string& value) {
    if (value.empty()) {
      ::unsetenv(name.c_str());
    } else {
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
};

void WriteText(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

TEST(AbsCredentialsTest, JsonFileWithEveryKey) {
  TempDir dir;
  WriteText(dir.File("abs.json"), std::string(R"({"storageAccount": "acct", "storageKey": ")") +
                                      kDevKey +
                                      R"(", "domain": "blob.core.chinacloudapi.cn",
                                         "emulatorEnabled": false, "bucketName": "ignored"})");
  AzureEnv env(dir.File("abs.json"), "");
  auto c = LoadAbsCredentials();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->storage_account, "acct");
  EXPECT_EQ(c->storage_key, kDevKey);
  EXPECT_EQ(c->key, DecodedDevKey());
  EXPECT_EQ(c->domain, "blob.core.chinacloudapi.cn");
  EXPECT_FALSE(c->emulator_enabled);
  EXPECT_EQ(c->source, dir.File("abs.json"));
}

TEST(AbsCredentialsTest, DirectoryOfFilesLosesTrailingLineBreaks) {
  TempDir dir;
  WriteText(dir.File("storageAccount"), "acct\n");
  WriteText(dir.File("storageKey"), std::string(kDevKey) + "\r\n");
  WriteText(dir.File("emulatorEnabled"), "true\n");
  WriteText(dir.File("domain"), "127.0.0.1:10000\n");
  WriteText(dir.File("unrelated"), "x");
  AzureEnv env("", dir.path());
  auto c = LoadAbsCredentials();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->storage_account, "acct");
  EXPECT_EQ(c->key, DecodedDevKey());
  EXPECT_TRUE(c->emulator_enabled);
  EXPECT_EQ(c->domain, "127.0.0.1:10000");
  EXPECT_EQ(c->source, dir.path());

  // A JSON file in the directory wins over the single files (gardener's transition rule).
  WriteText(dir.File("creds.json"),
            std::string(R"({"storageAccount": "fromjson", "storageKey": ")") + kDevKey + "\"}");
  auto j = LoadAbsCredentials();
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->storage_account, "fromjson");
  EXPECT_EQ(j->domain, std::nullopt);
}

TEST(AbsCredentialsTest, EnvironmentPrefixSelectsOtherVariables) {
  TempDir dir;
  WriteText(dir.File("src.json"),
            std::string(R"({"storageAccount": "source", "storageKey": ")") + kDevKey + "\"}");
  AzureEnv env("", "");
  AzureEnv::Set(std::string("SOURCE_") + kAzureCredentialsJsonEnv, dir.File("src.json"));
  auto plain = LoadAbsCredentials();
  ASSERT_FALSE(plain.ok()) << "the unprefixed variables are not set";
  EXPECT_NE(plain.status().message().find("AZURE_APPLICATION_CREDENTIALS_JSON"), std::string::npos);
  auto c = LoadAbsCredentials("SOURCE_");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->storage_account, "source");
}

TEST(AbsCredentialsTest, ClearErrors) {
  TempDir dir;
  struct Case {
    std::string json;
    std::string want;
  };
  const std::string key = kDevKey;
  const Case cases[] = {
      {R"({"storageKey": ")" + key + "\"}", "storageAccount is missing or empty"},
      {R"({"storageAccount": "", "storageKey": ")" + key + "\"}",
       "storageAccount is missing or empty"},
      {R"({"storageAccount": "a"})", "storageKey is missing or empty"},
      {R"({"storageAccount": "a", "storageKey": "not base64!"})", "storageKey is not valid base64"},
      {R"({"storageAccount": 7, "storageKey": "x"})", "\"storageAccount\" must be a string"},
      {R"({"storageAccount": "a", "storageKey": ")" + key + R"(", "emulatorEnabled": "yes"})",
       "\"emulatorEnabled\" must be true or false"},
      {R"({"storageAccount": "a", "storageKey": ")" + key + R"(", "emulatorEnabled": true})",
       "emulatorEnabled is set but domain"},
      {"{not json", "not valid JSON"},
      {"[]", "not a JSON object"},
  };
  for (const Case& c : cases) {
    WriteText(dir.File("c.json"), c.json);
    AzureEnv env(dir.File("c.json"), "");
    auto r = LoadAbsCredentials();
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(dir.File("c.json")), std::string::npos)
        << "the error names the file: " << r.status().ToString();
  }
  {
    AzureEnv env("", "");
    auto none = LoadAbsCredentials();
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.status().message().find("AZURE_APPLICATION_CREDENTIALS_JSON"),
              std::string::npos);
    EXPECT_NE(none.status().message().find("AZURE_APPLICATION_CREDENTIALS "), std::string::npos);
  }
  {
    AzureEnv env(dir.File("absent.json"), "");
    auto absent = LoadAbsCredentials();
    ASSERT_FALSE(absent.ok());
    EXPECT_NE(absent.status().message().find("cannot read"), std::string::npos);
  }
  {
    TempDir files;
    WriteText(files.File("storageAccount"), "acct\n");
    AzureEnv env("", files.path());
    auto no_key = LoadAbsCredentials();
    ASSERT_FALSE(no_key.ok());
    EXPECT_NE(no_key.status().message().find("storageKey is missing"), std::string::npos);
    WriteText(files.File("storageKey"), "\n");
    auto empty_key = LoadAbsCredentials();
    ASSERT_FALSE(empty_key.ok());
    EXPECT_NE(empty_key.status().message().find("storageKey is missing or empty"),
              std::string::npos);
    WriteText(files.File("storageKey"), key);
    WriteText(files.File("emulatorEnabled"), "maybe");
    auto bad_bool = LoadAbsCredentials();
    ASSERT_FALSE(bad_bool.ok());
    EXPECT_NE(bad_bool.status().message().find("is not a boolean"), std::string::npos);
    if (::geteuid() != 0) {  // root reads any file
      ::unlink(files.File("emulatorEnabled").c_str());
      ::chmod(files.File("storageKey").c_str(), 0);
      auto unreadable = LoadAbsCredentials();
      ASSERT_FALSE(unreadable.ok());
      EXPECT_NE(unreadable.status().message().find("storageKey"), std::string::npos);
    }
  }
  {
    AzureEnv env("", "/nonexistent/abs-dir");
    auto c = LoadAbsCredentials();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("/nonexistent/abs-dir"), std::string::npos);
  }
}

TEST(AbsEndpointTest, DefaultDomainCustomDomainEmulatorAndOverride) {
  AbsCredentials c;
  c.storage_account = "acct";
  auto azure = AbsServiceEndpoint(c, "");
  ASSERT_TRUE(azure.ok()) << azure.status().ToString();
  EXPECT_EQ(azure->ToString(), "https://acct.blob.core.windows.net");
  EXPECT_EQ(azure->HostPort(), "acct.blob.core.windows.net:443");

  c.domain = "blob.core.chinacloudapi.cn";
  EXPECT_EQ(AbsServiceEndpoint(c, "")->ToString(), "https://acct.blob.core.chinacloudapi.cn");

  c.domain = "127.0.0.1:10000";
  c.emulator_enabled = true;
  auto emulator = AbsServiceEndpoint(c, "");
  ASSERT_TRUE(emulator.ok()) << emulator.status().ToString();
  EXPECT_FALSE(emulator->tls);
  EXPECT_EQ(emulator->HostPort(), "127.0.0.1:10000");
  EXPECT_EQ(emulator->base_path, "/acct");

  // --store-endpoint-override wins over everything in the file; the container is joined to it.
  auto over = AbsServiceEndpoint(c, "http://localhost:4711/acct/");
  ASSERT_TRUE(over.ok()) << over.status().ToString();
  EXPECT_EQ(over->ToString(), "http://localhost:4711/acct");
  EXPECT_EQ(over->base_path, "/acct");

  auto bad = AbsServiceEndpoint(c, "localhost:10000");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--store-endpoint-override"), std::string::npos);
}

TEST(AbsBlobListTest, BlockIdsAreGardenersAndListingPagesCarryTheirMarker) {
  EXPECT_EQ(AbsBlockId(1), "MDAwMDAwMDAwMQ==");  // base64("0000000001")
  EXPECT_EQ(common::Base64Decode(AbsBlockId(12345)), "0000012345");
  EXPECT_EQ(AbsBlockId(50000).size(), AbsBlockId(1).size());

  const std::string first = R"(<?xml version="1.0" encoding="utf-8"?>
<EnumerationResults ServiceEndpoint="http://127.0.0.1:10000/acct/" ContainerName="c">
  <Prefix>shoot</Prefix><MaxResults>2</MaxResults>
  <Blobs>
    <Blob><Name>shoot/v2/Full-00000000-00000100-1700000000</Name>
      <Properties><Content-Length>19</Content-Length><BlobType>BlockBlob</BlobType></Properties>
    </Blob>
    <Blob><Name>shoot/v2/a&amp;b</Name><Properties/></Blob>
  </Blobs>
  <NextMarker>2!84!c2hvb3Qvdj</NextMarker>
</EnumerationResults>)";
  AbsBlobListPage page = ParseAbsBlobList(first);
  EXPECT_EQ(page.names, (std::vector<std::string>{"shoot/v2/Full-00000000-00000100-1700000000",
                                                  "shoot/v2/a&b"}));
  EXPECT_EQ(page.next_marker, "2!84!c2hvb3Qvdj");

  const std::string last = R"(<EnumerationResults><Blobs><Blob><Name>x</Name></Blob></Blobs>
<NextMarker /></EnumerationResults>)";
  page = ParseAbsBlobList(last);
  EXPECT_EQ(page.names, std::vector<std::string>{"x"});
  EXPECT_EQ(page.next_marker, "");
  EXPECT_TRUE(ParseAbsBlobList("<EnumerationResults><Blobs/></EnumerationResults>").names.empty());
}

}  // namespace
}  // namespace etcdw::sidecar
