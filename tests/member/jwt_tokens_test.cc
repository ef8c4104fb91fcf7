// JWT auth tokens (member/jwt_tokens.h) and the auth-token setting (NewTokenProvider): tokens
// as jwt-go writes them, checked for signature, method, expiry and claims; keys refused with a
// reason. Keys are generated here with OpenSSL; etcd's own tokens are checked in the
// differential suite (tests/diff/auth_diff_test.cc).
#include "etcdw/member/jwt_tokens.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <algorithm>
#include <map>
#include <string>

#include "etcdw/common/clock.h"
#include "etcdw/common/etcd_errors.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::member {
namespace {

using Options = std::map<std::string, std::string>;

std::string Pem(EVP_PKEY* key, bool private_half) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (private_half) {
    PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  } else {
    PEM_write_bio_PUBKEY(bio, key);
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

// Base64url without padding, decoded (segments of the tokens under test are well formed).
std::string Segment(const std::string& token, int which) {
  size_t start = 0;
  for (int i = 0; i < which; ++i) start = token.find('.', start) + 1;
  std::string seg = token.substr(start, token.find('.', start) - start);
  for (char& c : seg) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (seg.size() % 4 != 0) seg += '=';
  std::string out(seg.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(seg.data()),
                                static_cast<int>(seg.size()));
  out.resize(static_cast<size_t>(n) - std::count(seg.begin(), seg.end(), '='));
  return out;
}

class JwtTokensTest : public ::testing::Test {
 protected:
  // Writes the key's PEM halves as <name>.key and <name>.pub; returns the directory's paths.
  void WriteKey(const std::string& name, EVP_PKEY* key) {
    ASSERT_NE(key, nullptr);
    ASSERT_TRUE(testsupport::WriteFile(Path(name + ".key"), Pem(key, true)));
    ASSERT_TRUE(testsupport::WriteFile(Path(name + ".pub"), Pem(key, false)));
    EVP_PKEY_free(key);
  }
  std::string Path(const std::string& file) const { return dir_.path() + "/" + file; }

  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    WriteKey("rsa", EVP_RSA_gen(2048));
    WriteKey("rsa2", EVP_RSA_gen(2048));
    WriteKey("p256", EVP_EC_gen("P-256"));
    WriteKey("p384", EVP_EC_gen("P-384"));
    WriteKey("p521", EVP_EC_gen("P-521"));
    ASSERT_TRUE(testsupport::WriteFile(Path("secret"), "a shared secret"));
  }

  std::unique_ptr<JwtTokens> Make(const Options& o) {
    auto t = JwtTokens::Create(o, clock_);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(*t) : nullptr;
  }
  Status CreateError(const Options& o) {
    auto t = JwtTokens::Create(o, clock_);
    return t.ok() ? Status::Ok() : t.status();
  }

  testsupport::ScratchDir dir_{"jwt"};
  common::ManualClock clock_;
};

TEST_F(JwtTokensTest, EveryMethodIssuesTokensItAcceptsAndOthersRefuse) {
  const std::map<std::string, std::string> key_of = {
      {"HS256", ""},    {"HS384", ""},     {"HS512", ""},     {"RS256", "rsa"},
      {"RS384", "rsa"}, {"RS512", "rsa"},  {"PS256", "rsa"},  {"PS384", "rsa"},
      {"PS512", "rsa"}, {"ES256", "p256"}, {"ES384", "p384"}, {"ES512", "p521"}};
  for (const auto& [method, key] : key_of) {
    SCOPED_TRACE(method);
    Options o{{"sign-method", method}};
    if (key.empty()) {
      o["priv-key"] = Path("secret");
    } else {
      o["priv-key"] = Path(key + ".key");
      o["pub-key"] = Path(key + ".pub");
    }
    auto tokens = Make(o);
    ASSERT_NE(tokens, nullptr);
    auto token = tokens->Assign("", 9, "alice", 7);
    ASSERT_TRUE(token.ok()) << token.status().ToString();
    auto info = tokens->Info(*token, 99);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->user, "alice");
    EXPECT_EQ(info->revision, 7u);  // the revision signed, not the store's

    // A changed claim breaks the signature.
    std::string forged = *token;
    const size_t claims = forged.find('.') + 1;
    forged[claims + 2] = forged[claims + 2] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(tokens->Info(forged, 99));
    // So does a changed signature.
    std::string bad_sig = *token;
    bad_sig[bad_sig.size() - 3] = bad_sig[bad_sig.size() - 3] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(tokens->Info(bad_sig, 99));
  }
  // Another key of the same method refuses the token.
  auto mine = Make({{"sign-method", "RS256"}, {"priv-key", Path("rsa.key")}});
  auto theirs = Make({{"sign-method", "RS256"}, {"priv-key", Path("rsa2.key")}});
  EXPECT_FALSE(theirs->Info(*mine->Assign("", 1, "alice", 1), 1));
  // A token of another method than the member's is refused, even where the key would verify it.
  auto ps = Make({{"sign-method", "PS256"}, {"priv-key", Path("rsa.key")}});
  EXPECT_FALSE(ps->Info(*mine->Assign("", 1, "alice", 1), 1));
  EXPECT_FALSE(mine->Info("abcdefghijklmnop.12", 1));  // a simple token
  EXPECT_FALSE(mine->Info("a.b.c.d", 1));
  EXPECT_FALSE(mine->Info("", 1));
}

TEST_F(JwtTokensTest, TokensAreWhatJwtGoWritesAndExpireAfterTheTtl) {
  auto tokens = Make({{"sign-method", "ES256"}, {"priv-key", Path("p256.key")}, {"ttl", "90s"}});
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.WallNow().time_since_epoch()).count();
  const std::string token = *tokens->Assign("", 3, "<bob>", 12);
  EXPECT_EQ(Segment(token, 0), R"({"alg":"ES256","typ":"JWT"})");
  EXPECT_EQ(Segment(token, 1), R"({"exp":)" + std::to_string(now + 90) +
                                   R"(,"revision":12,"username":"\u003cbob\u003e"})");
  EXPECT_EQ(Segment(token, 2).size(), 64u);  // r || s on P-256
  EXPECT_EQ(token.find('='), std::string::npos);

  clock_.Advance(std::chrono::seconds(90));
  ASSERT_TRUE(tokens->Info(token, 12));  // valid through its exp second
  EXPECT_EQ(tokens->Info(token, 12)->user, "<bob>");
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_FALSE(tokens->Info(token, 12));
}

TEST_F(JwtTokensTest, APublicKeyAloneVerifiesButCannotSign) {
  auto signer = Make({{"sign-method", "RS512"}, {"priv-key", Path("rsa.key")}});
  auto verifier = Make({{"sign-method", "RS512"}, {"pub-key", Path("rsa.pub")}});
  ASSERT_TRUE(verifier->VerifyOnly());
  EXPECT_FALSE(signer->VerifyOnly());
  const std::string token = *signer->Assign("", 1, "carol", 4);
  ASSERT_TRUE(verifier->Info(token, 4));
  EXPECT_EQ(verifier->Info(token, 4)->user, "carol");
  auto refused = verifier->Assign("", 1, "carol", 4);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status(), errors::JwtVerifyOnly());
}

TEST_F(JwtTokensTest, UnusableOptionsAreRefusedWithTheReason) {
  auto has = [&](const Options& o, const std::string& text) {
    Status st = CreateError(o);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << text;
    EXPECT_NE(st.message().find(text), std::string::npos) << st.ToString();
  };
  has({{"priv-key", Path("rsa.key")}}, "sign-method \"\" is not one of");
  has({{"sign-method", "none"}, {"priv-key", Path("rsa.key")}}, "sign-method \"none\"");
  has({{"sign-method", "RS256"}}, "pub-key or priv-key is required");
  has({{"sign-method", "HS256"}, {"pub-key", Path("secret")}}, "priv-key is required");
  has({{"sign-method", "RS256"}, {"priv-key", Path("missing.key")}}, "missing.key");
  has({{"sign-method", "RS256"}, {"priv-key", Path("secret")}}, "no unencrypted PEM private key");
  has({{"sign-method", "RS256"}, {"pub-key", Path("rsa.key")}}, "no PEM public key");
  has({{"sign-method", "RS256"}, {"priv-key", Path("p256.key")}}, "is not an RSA key");
  has({{"sign-method", "ES256"}, {"priv-key", Path("rsa.key")}}, "is not an EC key");
  has({{"sign-method", "ES384"}, {"priv-key", Path("p256.key")}}, "the 384-bit curve");
  has({{"sign-method", "RS256"}, {"priv-key", Path("rsa.key")}, {"pub-key", Path("rsa2.pub")}},
      "is not the public half");
  has({{"sign-method", "RS256"}, {"priv-key", Path("rsa.key")}, {"ttl", "5"}}, "ttl \"5\"");
  has({{"sign-method", "RS256"}, {"priv-key", Path("rsa.key")}, {"ttl", "-1m"}}, "ttl \"-1m\"");
  // Unknown options are ignored, as etcd does.
  EXPECT_TRUE(
      CreateError({{"sign-method", "RS256"}, {"priv-key", Path("rsa.key")}, {"x", "y"}}).ok());
}

TEST_F(JwtTokensTest, TheAuthTokenSettingNamesTheKind) {
  const std::string rs = "jwt,pub-key=" + Path("rsa.pub") + ",priv-key=" + Path("rsa.key") +
                         ",sign-method=RS256,ttl=10m";
  auto jwt = NewTokenProvider(rs, clock_, std::chrono::seconds(300));
  ASSERT_TRUE(jwt.ok()) << jwt.status().ToString();
  EXPECT_EQ((*jwt)->NewPrefix(), "");
  auto simple = NewTokenProvider("simple", clock_, std::chrono::seconds(300));
  ASSERT_TRUE(simple.ok());
  EXPECT_EQ((*simple)->NewPrefix().size(), 16u);
  const std::string simple_token = *(*simple)->Assign("abcdefghijklmnop", 5, "dave", 2);
  EXPECT_EQ((*simple)->Info(simple_token, 8)->revision, 8u);  // checked at the store's revision
  EXPECT_FALSE((*jwt)->Info(simple_token, 8));

  auto error = [&](const std::string& setting) {
    auto p = NewTokenProvider(setting, clock_, std::chrono::seconds(300));
    return p.ok() ? std::string() : p.status().message();
  };
  EXPECT_NE(error("jwt,sign-method").find("is not name=value"), std::string::npos);
  EXPECT_NE(error("jwt,ttl=1m,ttl=2m").find("given twice"), std::string::npos);
  EXPECT_NE(error("jwt,a=b=c").find("is not name=value"), std::string::npos);
  EXPECT_NE(error("oauth").find("unknown token kind \"oauth\""), std::string::npos);
  EXPECT_NE(error("jwt").find("sign-method"), std::string::npos);
}

}  // namespace
}  // namespace etcdw::member
