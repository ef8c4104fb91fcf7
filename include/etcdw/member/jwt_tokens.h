// JWT auth tokens (auth-token "jwt,sign-method=...,pub-key=...,priv-key=...,ttl=..."), as etcd
// 3.4 issues and checks them: a JSON Web Token signed by the member's key whose claims are
// {"exp": <unix seconds>, "revision": <auth revision at issue>, "username": <user>}.
//
// Unlike simple tokens they hold no state: any member holding the same key accepts a token,
// across restarts, until `exp`. A token is checked at the auth revision it carries, so any
// change of users or roles makes it old (AuthOldRevision) and the client authenticates again;
// that is how deleted users and changed passwords lose their tokens.
//
// Sign methods (jwt-go's names): HS256/384/512 (HMAC; the secret is priv-key's file content),
// RS256/384/512 (RSA PKCS#1 v1.5), PS256/384/512 (RSA-PSS), ES256/384/512 (ECDSA on P-256,
// P-384, P-521). Keys are PEM files: private keys PKCS#1, SEC 1 or PKCS#8; public keys PKIX or
// a certificate. A member given only pub-key verifies tokens but cannot issue them (Authenticate
// answers etcd's "auth: token signing attempted with verify-only key").
//
// Thread-safe: the keys are immutable after Create.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "etcdw/member/auth_tokens.h"

namespace etcdw::member {

class JwtTokens final : public TokenProvider {
 public:
  // etcd's options: sign-method (required), pub-key, priv-key (at least one), ttl (a Go
  // duration, default 5m). InvalidArgument saying what is wrong: an unknown method, an
  // unreadable or unparsable key, a key of the wrong kind or curve for the method, or a public
  // key that is not the private key's. Unknown options are logged and ignored, as etcd does.
  static Result<std::unique_ptr<JwtTokens>> Create(
      const std::map<std::string, std::string>& options, const common::Clock& clock);
  ~JwtTokens() override;

  std::string NewPrefix() const override { return {}; }
  Result<std::string> Assign(std::string_view prefix, uint64_t index, const std::string& user,
                             uint64_t auth_revision) override;
  std::optional<AuthInfo> Info(const std::string& token, uint64_t current_revision) override;
  std::optional<uint64_t> IssuedAt(const std::string& /*token*/) const override {
    return std::nullopt;
  }
  // Stateless: nothing to forget.
  void InvalidateUser(std::string_view /*user*/) override {}
  void Clear() override {}
  void Expire() override {}

  bool VerifyOnly() const;

 private:
  struct Keys;
  JwtTokens(std::unique_ptr<Keys> keys, const common::Clock& clock);

  std::unique_ptr<Keys> keys_;
  const common::Clock& clock_;
};

}  // namespace etcdw::member
