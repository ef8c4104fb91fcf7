// bcrypt password hashes as etcd stores them (Go's golang.org/x/crypto/bcrypt): "$2a$<cost>$"
// followed by the salt and hash, so hashes move between etcd and us in either direction. Made
// with libxcrypt's bcrypt. Passwords are used only here and never logged. In common: the member
// hashes the passwords of client requests, the takeover of an etcd data directory those etcd 3.4
// logged in plain (data_dir/etcd_entries.h).
#pragma once

#include <string>
#include <string_view>

#include "etcdw/common/status.h"

namespace etcdw::common {

// bcrypt's accepted costs; etcd replaces any other bcrypt-cost with the default, 10.
inline constexpr int kMinBcryptCost = 4;
inline constexpr int kMaxBcryptCost = 31;
inline constexpr int kDefaultBcryptCost = 10;

// A new hash of `password` with a random salt. Slow by design (cost 10: tens of milliseconds):
// never call it on a thread that serves other requests' replies.
Result<std::string> HashPassword(std::string_view password, int cost);
// Whether `password` matches `hash` (any bcrypt variant: $2a$, $2b$, $2y$). As slow.
bool PasswordMatches(std::string_view hash, std::string_view password);

}  // namespace etcdw::common
