// The bearer token: a token file is read when the client is created and again once
// token_reread has passed on the injected clock (the kubelet rotates service account tokens),
// and a failed re-reading keeps the token that works.
#include <chrono>
#include <filesystem>

#include "etcdw/common/clock.h"
#include "files.h"
#include "kube_fixture.h"
#include "scratch_dir.h"

namespace etcdw::kube {
namespace {

using std::chrono::seconds;
using testsupport::ScratchDir;
using testsupport::WriteFile;

class TokenTest : public KubeTest {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    StartServer();
    server_->Put(kNs, LeaseObject("member", "etcd-0"));
    ASSERT_TRUE(WriteFile(TokenFile(), std::string(kToken) + "\n"));
  }
  std::string TokenFile() const { return dir_.path() + "/token"; }
  KubeConfig FileConfig() const {
    KubeConfig c = ConfigForServer();
    c.token.clear();
    c.token_file = TokenFile();
    return c;
  }
  // The token the server saw on the last request.
  std::string LastToken() const { return server_->requests().back().bearer_token; }

  ScratchDir dir_{"kube-token"};
  common::ManualClock clock_;
};

TEST_F(TokenTest, ARotatedTokenIsUsedOnceTheRereadPeriodHasPassed) {
  KubeClientOptions o;
  o.token_reread = seconds(60);
  o.clock = &clock_;
  auto client = NewClient(FileConfig(), o);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->GetLease(kNs, "member").ok());
  EXPECT_EQ(LastToken(), kToken) << "the file's text, without its line break";

  // The kubelet writes a new token and the API server stops accepting the old one.
  ASSERT_TRUE(WriteFile(TokenFile(), "rotated-token"));
  server_->SetToken("rotated-token");
  clock_.Advance(seconds(59));
  EXPECT_EQ(client->GetLease(kNs, "member").status().code(), Code::kUnauthenticated);
  EXPECT_EQ(LastToken(), kToken) << "within the period the token read before is sent";

  clock_.Advance(seconds(2));
  auto lease = client->GetLease(kNs, "member");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(LastToken(), "rotated-token");
}

TEST_F(TokenTest, AFailedRereadingKeepsTheTokenThatWorks) {
  KubeClientOptions o;
  o.token_reread = seconds(10);
  o.clock = &clock_;
  auto client = NewClient(FileConfig(), o);
  ASSERT_TRUE(client);
  std::filesystem::remove(TokenFile());
  clock_.Advance(seconds(11));
  ASSERT_TRUE(client->GetLease(kNs, "member").ok());
  EXPECT_EQ(LastToken(), kToken);
  ASSERT_TRUE(WriteFile(TokenFile(), ""));  // half-written: empty
  clock_.Advance(seconds(11));
  ASSERT_TRUE(client->GetLease(kNs, "member").ok());
  EXPECT_EQ(LastToken(), kToken);

  // The file is back: the next call reads it (the failures did not restart the period).
  ASSERT_TRUE(WriteFile(TokenFile(), "third"));
  server_->SetToken("third");
  ASSERT_TRUE(client->GetLease(kNs, "member").ok());
  EXPECT_EQ(LastToken(), "third");
}

TEST_F(TokenTest, AFixedTokenWinsAndAnUnreadableFileFailsCreate) {
  KubeConfig both = FileConfig();
  both.token = "fixed";
  auto client = NewClient(both);
  ASSERT_TRUE(client);
  EXPECT_EQ(client->GetLease(kNs, "member").status().code(), Code::kUnauthenticated);
  EXPECT_EQ(LastToken(), "fixed");

  KubeConfig missing = FileConfig();
  missing.token_file = dir_.path() + "/absent";
  auto r = KubeClient::Create(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            "token file \"" + missing.token_file + "\": cannot read: No such file or directory");
  ASSERT_TRUE(WriteFile(TokenFile(), " \n"));
  auto empty = KubeClient::Create(FileConfig());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "token file \"" + TokenFile() + "\" is empty");
}

}  // namespace
}  // namespace etcdw::kube
