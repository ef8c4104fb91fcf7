#include "etcdw/member/auth_tokens.h"

#include <openssl/rand.h>

#include <charconv>
#include <cstdlib>
#include <map>
#include <vector>

#include "etcdw/common/logging.h"
#include "etcdw/member/jwt_tokens.h"

namespace etcdw::member {

Result<std::unique_ptr<TokenProvider>> NewTokenProvider(std::string_view setting,
                                                        const common::Clock& clock,
                                                        std::chrono::seconds simple_ttl) {
  // etcd's form: the kind, then comma-separated name=value options, none repeated.
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t comma = setting.find(',', start);
    parts.push_back(setting.substr(start, comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  const std::string kind(parts[0]);
  std::map<std::string, std::string> options;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string_view::npos || parts[i].find('=', eq + 1) != std::string_view::npos) {
      return InvalidArgument("auth-token: option \"" + std::string(parts[i]) +
                             "\" is not name=value");
    }
    if (!options.emplace(parts[i].substr(0, eq), parts[i].substr(eq + 1)).second) {
      return InvalidArgument("auth-token: option \"" + std::string(parts[i].substr(0, eq)) +
                             "\" is given twice");
    }
  }
  if (kind == "simple") return std::unique_ptr<TokenProvider>(new SimpleTokens(clock, simple_ttl));
  if (kind == "jwt") {
    ETCDW_ASSIGN_OR_RETURN(auto jwt, JwtTokens::Create(options, clock));
    return std::unique_ptr<TokenProvider>(std::move(jwt));
  }
  return InvalidArgument("auth-token: unknown token kind \"" + kind +
                         "\" (etcd's kinds are simple and jwt)");
}

SimpleTokens::SimpleTokens(const common::Clock& clock, std::chrono::seconds ttl)
    : clock_(clock), ttl_(ttl.count() > 0 ? ttl : std::chrono::seconds(300)) {}

std::string SimpleTokens::RandomPrefix() {
  static constexpr std::string_view kLetters =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string out;
  while (out.size() < 16) {
    unsigned char b[32];
    if (RAND_bytes(b, sizeof b) != 1) {
      log::Error("OpenSSL gave no random bytes for an auth token");
      std::abort();
    }
    for (unsigned char c : b) {
      // Rejection sampling keeps the letters uniform: 52 * 4 = 208 values are used.
      if (c < 208 && out.size() < 16) out.push_back(kLetters[c % kLetters.size()]);
    }
  }
  return out;
}

std::optional<uint64_t> SimpleTokens::IndexOf(std::string_view token) {
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos || token.find('.', dot + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view digits = token.substr(dot + 1);
  uint64_t index = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return index;
}

Result<std::string> SimpleTokens::Assign(std::string_view prefix, uint64_t index,
                                         const std::string& user, uint64_t /*auth_revision*/) {
  std::string token = std::string(prefix) + "." + std::to_string(index);
  std::lock_guard lock(mu_);
  tokens_[token] = Entry{user, clock_.Now() + ttl_};
  return token;
}

std::optional<std::string> SimpleTokens::UserOf(const std::string& token) {
  std::lock_guard lock(mu_);
  auto it = tokens_.find(token);
  if (it == tokens_.end()) return std::nullopt;
  const auto now = clock_.Now();
  if (now > it->second.expires) {
    tokens_.erase(it);
    return std::nullopt;
  }
  it->second.expires = now + ttl_;
  return it->second.user;
}

std::optional<AuthInfo> SimpleTokens::Info(const std::string& token, uint64_t current_revision) {
  auto user = UserOf(token);
  if (!user) return std::nullopt;
  return AuthInfo{std::move(*user), current_revision};
}

void SimpleTokens::InvalidateUser(std::string_view user) {
  std::lock_guard lock(mu_);
  std::erase_if(tokens_, [&](const auto& t) { return t.second.user == user; });
}

void SimpleTokens::Clear() {
  std::lock_guard lock(mu_);
  tokens_.clear();
}

void SimpleTokens::Expire() {
  const auto now = clock_.Now();
  std::lock_guard lock(mu_);
  std::erase_if(tokens_, [&](const auto& t) { return now > t.second.expires; });
}

size_t SimpleTokens::Size() const {
  std::lock_guard lock(mu_);
  return tokens_.size();
}

}  // namespace etcdw::member
