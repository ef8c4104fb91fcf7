// Simple tokens, etcd's default kind (auth-token "simple"): "<16 random letters>.<index of the
// applied Authenticate entry>". The proposing member draws the letters; every member that
// applies the entry learns the token, so a client may use it on any member. A token is
// forgotten after `ttl` without use, when its user is deleted or changes password, when
// authentication is disabled, and when the member restarts (tokens live in memory only, as in
// etcd: clients authenticate again when told "invalid auth token"). Thread-safe.
#pragma once

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "etcdw/common/clock.h"

namespace etcdw::member {

class SimpleTokens {
 public:
  SimpleTokens(const common::Clock& clock, std::chrono::seconds ttl);

  // 16 letters from a cryptographic source, as etcd draws them.
  static std::string NewPrefix();
  // The entry index a token names; nullopt when `token` is not "<prefix>.<decimal index>".
  static std::optional<uint64_t> IndexOf(std::string_view token);

  // Apply thread: the Authenticate entry at `index` gives `user` the token prefix.index.
  std::string Assign(std::string_view prefix, uint64_t index, const std::string& user);
  // The token's user, its lifetime renewed; nullopt when unknown or expired.
  std::optional<std::string> UserOf(const std::string& token);
  void InvalidateUser(std::string_view user);
  void Clear();
  // Forgets the tokens unused for `ttl` (the ticker calls it).
  void Expire();
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
