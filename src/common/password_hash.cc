#include "etcdw/common/password_hash.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <cstring>
#include <memory>

namespace etcdw::common {

Result<std::string> HashPassword(std::string_view password, int cost) {
  if (cost < kMinBcryptCost || cost > kMaxBcryptCost) cost = kDefaultBcryptCost;
  if (password.find('\0') != std::string_view::npos) {
    return InvalidArgument("password contains a NUL byte");
  }
  unsigned char salt_bytes[16];
  if (RAND_bytes(salt_bytes, sizeof salt_bytes) != 1) {
    return Internal("bcrypt: no random bytes for a salt");
  }
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2a$", static_cast<unsigned long>(cost),
                       reinterpret_cast<const char*>(salt_bytes), sizeof salt_bytes, setting,
                       sizeof setting) == nullptr) {
    return Internal("bcrypt: cannot make a salt");
  }
  auto data = std::make_unique<crypt_data>();
  const std::string pw(password);
  const char* hashed = crypt_r(pw.c_str(), setting, data.get());
  std::string out = hashed != nullptr && hashed[0] != '*' ? hashed : "";
  OPENSSL_cleanse(data.get(), sizeof(crypt_data));
  if (out.empty()) return Internal("bcrypt: hashing failed");
  return out;
}

bool PasswordMatches(std::string_view hash, std::string_view password) {
  if (hash.size() < 7 || hash.substr(0, 2) != "$2" ||
      password.find('\0') != std::string_view::npos) {
    return false;
  }
  auto data = std::make_unique<crypt_data>();
  const std::string pw(password);
  const std::string setting(hash);
  const char* got = crypt_r(pw.c_str(), setting.c_str(), data.get());
  const bool match = got != nullptr && got[0] != '*' && std::strlen(got) == setting.size() &&
                     CRYPTO_memcmp(got, setting.data(), setting.size()) == 0;
  OPENSSL_cleanse(data.get(), sizeof(crypt_data));
  return match;
}

}  // namespace etcdw::common
