// Auth tokens: how a member names the user of a request by the token the client got from
// Authenticate. TokenProvider is the contract the server and the applier use; etcd's two kinds
// implement it:
//   - SimpleTokens (auth-token "simple", etcd's default), below;
//   - JwtTokens (auth-token "jwt,..."), jwt_tokens.h.
// NewTokenProvider reads etcd's auth-token setting and builds the kind it names.
//
// Simple tokens: "<16 random letters>.<index of the applied Authenticate entry>". The proposing
// member draws the letters; every member that applies the entry learns the token, so a client
// may use it on any member. A token is forgotten after `ttl` without use, when its user is
// deleted or changes password, when authentication is disabled, and when the member restarts
// (tokens live in memory only, as in etcd: clients authenticate again when told "invalid auth
// token"). Thread-safe.
#pragma once

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"
#include "etcdw/member/auth_store.h"

namespace etcdw::member {

class TokenProvider {
 public:
  virtual ~TokenProvider() = default;

  // Proposing member: what the Authenticate entry carries to Assign (simple tokens: fresh
  // random letters; JWT: nothing).
  virtual std::string NewPrefix() const = 0;
  // Apply thread, on every member: the token the Authenticate entry at `index` (carrying
  // `prefix`) gives `user` while the auth store is at `auth_revision`. Fails only where etcd's
  // fails (a JWT provider holding a public key alone cannot sign).
  virtual Result<std::string> Assign(std::string_view prefix, uint64_t index,
                                     const std::string& user, uint64_t auth_revision) = 0;
  // Who `token` names and the auth revision its permissions are checked at (simple tokens: the
  // store's `current_revision`, as they are forgotten on changes; JWT: the revision it was
  // signed at, so any change of the store makes it old). nullopt when unknown, malformed,
  // forged or expired.
  virtual std::optional<AuthInfo> Info(const std::string& token, uint64_t current_revision) = 0;
  // The index of the log entry that issued `token`, where the token says it (simple tokens);
  // nullopt otherwise.
  virtual std::optional<uint64_t> IssuedAt(const std::string& token) const = 0;
  // Apply thread: the user was deleted or changed password; authentication was disabled.
  virtual void InvalidateUser(std::string_view user) = 0;
  virtual void Clear() = 0;
  // Ticker: forgets what expired.
  virtual void Expire() = 0;
};

// The provider etcd's `auth-token` setting names: "simple" (`simple_ttl` applies) or
// "jwt,sign-method=...,pub-key=...,priv-key=...,ttl=..." (jwt_tokens.h). InvalidArgument that
// says what is wrong for an unknown kind, a malformed option list or unusable keys.
Result<std::unique_ptr<TokenProvider>> NewTokenProvider(std::string_view setting,
                                                        const common::Clock& clock,
                                                        std::chrono::seconds simple_ttl);

class SimpleTokens final : public TokenProvider {
 public:
  SimpleTokens(const common::Clock& clock, std::chrono::seconds ttl);

  // 16 letters from a cryptographic source, as etcd draws them.
  static std::string RandomPrefix();
  // The entry index a token names; nullopt when `token` is not "<prefix>.<decimal index>".
  static std::optional<uint64_t> IndexOf(std::string_view token);

  std::string NewPrefix() const override { return RandomPrefix(); }
  // The token is prefix.index.
  Result<std::string> Assign(std::string_view prefix, uint64_t index, const std::string& user,
                             uint64_t auth_revision) override;
  std::optional<uint64_t> IssuedAt(const std::string& token) const override {
    return IndexOf(token);
  }
  // Renews the token's lifetime.
  std::optional<AuthInfo> Info(const std::string& token, uint64_t current_revision) override;
  void InvalidateUser(std::string_view user) override;
  void Clear() override;
  // Forgets the tokens unused for `ttl`.
  void Expire() override;

  // The token's user, its lifetime renewed; nullopt when unknown or expired.
  std::optional<std::string> UserOf(const std::string& token);
  size_t Size() const;

 private:
  struct Entry {
    std::string user;
    common::Clock::TimePoint expires;
  };
  const common::Clock& clock_;
  const std::chrono::seconds ttl_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace etcdw::member
