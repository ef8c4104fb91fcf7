#include "etcdw/member/auth_tokens.h"

#include <openssl/rand.h>

#include <charconv>
#include <cstdlib>

#include "etcdw/common/logging.h"

namespace etcdw::member {

SimpleTokens::SimpleTokens(const common::Clock& clock, std::chrono::seconds ttl)
    : clock_(clock), ttl_(ttl.count() > 0 ? ttl : std::chrono::seconds(300)) {}

std::string SimpleTokens::NewPrefix() {
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

std::string SimpleTokens::Assign(std::string_view prefix, uint64_t index, const std::string& user) {
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
