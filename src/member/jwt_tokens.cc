#include "etcdw/member/jwt_tokens.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/flags.h"
#include "etcdw/common/go_json.h"
#include "etcdw/common/logging.h"

namespace etcdw::member {

// The types JwtTokens::Keys holds (a named namespace: the struct is declared in the header).
namespace jwt {

enum class Family { kHmac, kRsa, kRsaPss, kEcdsa };

struct Method {
  std::string_view name;
  Family family;
  const EVP_MD* (*digest)();
  int curve_bits;  // ECDSA: the curve the method requires (P-256, P-384, P-521)
};

struct PKeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using PKey = std::unique_ptr<EVP_PKEY, PKeyFree>;

}  // namespace jwt

namespace {

using jwt::Family;
using jwt::Method;
using jwt::PKey;

constexpr std::array<Method, 12> kMethods = {{
    {"HS256", Family::kHmac, EVP_sha256, 0},
    {"HS384", Family::kHmac, EVP_sha384, 0},
    {"HS512", Family::kHmac, EVP_sha512, 0},
    {"RS256", Family::kRsa, EVP_sha256, 0},
    {"RS384", Family::kRsa, EVP_sha384, 0},
    {"RS512", Family::kRsa, EVP_sha512, 0},
    {"PS256", Family::kRsaPss, EVP_sha256, 0},
    {"PS384", Family::kRsaPss, EVP_sha384, 0},
    {"PS512", Family::kRsaPss, EVP_sha512, 0},
    {"ES256", Family::kEcdsa, EVP_sha256, 256},
    {"ES384", Family::kEcdsa, EVP_sha384, 384},
    {"ES512", Family::kEcdsa, EVP_sha512, 521},
}};

const Method* FindMethod(std::string_view name) {
  for (const Method& m : kMethods) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

Status Invalid(const std::string& what) { return InvalidArgument("auth-token: jwt: " + what); }

Result<std::string> ReadFile(const std::string& option, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Invalid(option + " \"" + path + "\": " + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Never ask for a pass phrase on the terminal: an encrypted key is refused.
int NoPassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*u*/) { return 0; }

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

Bio MemBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

Result<PKey> ParsePrivateKey(const std::string& path, const std::string& pem) {
  Bio bio = MemBio(pem);
  PKey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  if (!key) return Invalid("priv-key \"" + path + "\" holds no unencrypted PEM private key");
  return key;
}

// A PKIX public key or, as jwt-go accepts, a certificate's.
Result<PKey> ParsePublicKey(const std::string& path, const std::string& pem) {
  Bio bio = MemBio(pem);
  if (PKey key{PEM_read_bio_PUBKEY(bio.get(), nullptr, NoPassphrase, nullptr)}) return key;
  bio = MemBio(pem);
  if (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    PKey key(X509_get_pubkey(cert));
    X509_free(cert);
    if (key) return key;
  }
  return Invalid("pub-key \"" + path + "\" holds no PEM public key or certificate");
}

// The key suits the method: RSA for RS and PS, EC on the method's curve for ES.
Status CheckKeyKind(const Method& m, EVP_PKEY* key, const std::string& option) {
  const int id = EVP_PKEY_id(key);
  if (m.family == Family::kEcdsa) {
    if (id != EVP_PKEY_EC)
      return Invalid(option + " is not an EC key, as " + std::string(m.name) + " needs");
    if (EVP_PKEY_bits(key) != m.curve_bits) {
      return Invalid(option + " is an EC key of " + std::to_string(EVP_PKEY_bits(key)) + " bits; " +
                     std::string(m.name) + " needs the " + std::to_string(m.curve_bits) +
                     "-bit curve");
    }
    return Status::Ok();
  }
  if (id != EVP_PKEY_RSA)
    return Invalid(option + " is not an RSA key, as " + std::string(m.name) + " needs");
  return Status::Ok();
}

std::string Base64Url(std::string_view in) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(in[i]) << 16 | static_cast<uint8_t>(in[i + 1]) << 8 |
                       static_cast<uint8_t>(in[i + 2]);
    for (int shift : {18, 12, 6, 0}) out.push_back(kAlphabet[(v >> shift) & 63]);
  }
  const size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (rest == 2) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    if (rest == 2) out.push_back(kAlphabet[(v >> 6) & 63]);
  }
  return out;  // no padding, as JWT segments are written
}

// Strict: the URL alphabet only, no padding, no stray bits (as Go's decoder).
std::optional<std::string> DecodeBase64Url(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
  };
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if ((acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

std::optional<google::protobuf::Struct> DecodeJsonObject(std::string_view segment) {
  auto json = DecodeBase64Url(segment);
  if (!json) return std::nullopt;
  google::protobuf::Struct obj;
  if (!google::protobuf::util::JsonStringToMessage(*json, &obj).ok()) return std::nullopt;
  return obj;
}

// A numeric claim; absent claims read as nullopt, claims of another type as NaN (invalid).
std::optional<double> NumberClaim(const google::protobuf::Struct& claims, const std::string& name) {
  auto it = claims.fields().find(name);
  if (it == claims.fields().end()) return std::nullopt;
  if (it->second.kind_case() != google::protobuf::Value::kNumberValue) return std::nan("");
  return it->second.number_value();
}

// ECDSA signatures travel as r || s, each the curve's size; OpenSSL speaks DER.
std::optional<std::string> DerToRaw(const std::string& der, int curve_bits) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  if (sig == nullptr) return std::nullopt;
  const int n = (curve_bits + 7) / 8;
  std::string raw(2 * static_cast<size_t>(n), '\0');
  auto* out = reinterpret_cast<unsigned char*>(raw.data());
  const bool ok = BN_bn2binpad(ECDSA_SIG_get0_r(sig), out, n) == n &&
                  BN_bn2binpad(ECDSA_SIG_get0_s(sig), out + n, n) == n;
  ECDSA_SIG_free(sig);
  if (!ok) return std::nullopt;
  return raw;
}

std::optional<std::string> RawToDer(std::string_view raw, int curve_bits) {
  const int n = (curve_bits + 7) / 8;
  if (raw.size() != 2 * static_cast<size_t>(n)) return std::nullopt;
  const auto* in = reinterpret_cast<const unsigned char*>(raw.data());
  ECDSA_SIG* sig = ECDSA_SIG_new();
  BIGNUM* r = BN_bin2bn(in, n, nullptr);
  BIGNUM* s = BN_bin2bn(in + n, n, nullptr);
  if (sig == nullptr || r == nullptr || s == nullptr || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return std::nullopt;
  }
  unsigned char* der = nullptr;
  const int len = i2d_ECDSA_SIG(sig, &der);
  ECDSA_SIG_free(sig);
  if (len <= 0) return std::nullopt;
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  return out;
}

std::string Hmac(const Method& m, const std::string& secret, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(m.digest(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

// Sets RSA-PSS padding on a signing or verifying context: the salt as long as the digest when
// signing, any length when verifying (jwt-go's PS methods).
bool UsePss(EVP_PKEY_CTX* pctx, bool signing) {
  return EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
         EVP_PKEY_CTX_set_rsa_pss_saltlen(
             pctx, signing ? RSA_PSS_SALTLEN_DIGEST : RSA_PSS_SALTLEN_AUTO) == 1;
}

}  // namespace

struct JwtTokens::Keys {
  const Method* method = nullptr;
  std::string hmac_secret;
  PKey private_key;  // null: verify only
  PKey verify_key;   // the public key given, else the private key
  std::chrono::milliseconds ttl{std::chrono::minutes(5)};

  std::optional<std::string> Sign(std::string_view data) const {
    if (method->family == Family::kHmac) return Hmac(*method, hmac_secret, data);
    MdCtx ctx(EVP_MD_CTX_new());
    EVP_PKEY_CTX* pctx = nullptr;
    if (!ctx ||
        EVP_DigestSignInit(ctx.get(), &pctx, method->digest(), nullptr, private_key.get()) != 1) {
      return std::nullopt;
    }
    if (method->family == Family::kRsaPss && !UsePss(pctx, /*signing=*/true)) return std::nullopt;
    const auto* in = reinterpret_cast<const unsigned char*>(data.data());
    size_t len = 0;
    if (EVP_DigestSign(ctx.get(), nullptr, &len, in, data.size()) != 1) return std::nullopt;
    std::string sig(len, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, in,
                       data.size()) != 1) {
      return std::nullopt;
    }
    sig.resize(len);
    if (method->family == Family::kEcdsa) return DerToRaw(sig, method->curve_bits);
    return sig;
  }

  bool Verify(std::string_view data, const std::string& signature) const {
    if (method->family == Family::kHmac) {
      const std::string want = Hmac(*method, hmac_secret, data);
      return want.size() == signature.size() &&
             CRYPTO_memcmp(want.data(), signature.data(), want.size()) == 0;
    }
    std::string sig = signature;
    if (method->family == Family::kEcdsa) {
      auto der = RawToDer(signature, method->curve_bits);
      if (!der) return false;
      sig = std::move(*der);
    }
    MdCtx ctx(EVP_MD_CTX_new());
    EVP_PKEY_CTX* pctx = nullptr;
    if (!ctx ||
        EVP_DigestVerifyInit(ctx.get(), &pctx, method->digest(), nullptr, verify_key.get()) != 1) {
      return false;
    }
    if (method->family == Family::kRsaPss && !UsePss(pctx, /*signing=*/false)) return false;
    return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()),
                            sig.size(), reinterpret_cast<const unsigned char*>(data.data()),
                            data.size()) == 1;
  }
};

JwtTokens::JwtTokens(std::unique_ptr<Keys> keys, const common::Clock& clock)
    : keys_(std::move(keys)), clock_(clock) {}

JwtTokens::~JwtTokens() = default;

Result<std::unique_ptr<JwtTokens>> JwtTokens::Create(
    const std::map<std::string, std::string>& options, const common::Clock& clock) {
  auto opt = [&](const std::string& name) {
    auto it = options.find(name);
    return it == options.end() ? std::string() : it->second;
  };
  for (const auto& [name, value] : options) {
    if (name != "sign-method" && name != "pub-key" && name != "priv-key" && name != "ttl") {
      log::Warn("unknown JWT option, ignored", {log::F("option", name)});
    }
  }
  auto keys = std::make_unique<Keys>();
  keys->method = FindMethod(opt("sign-method"));
  if (keys->method == nullptr) {
    return Invalid("sign-method \"" + opt("sign-method") +
                   "\" is not one of HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, "
                   "PS512, ES256, ES384, ES512");
  }
  const Method& m = *keys->method;
  if (const std::string ttl = opt("ttl"); !ttl.empty()) {
    if (!common::ParseGoDuration(ttl, &keys->ttl) || keys->ttl.count() <= 0) {
      return Invalid("ttl \"" + ttl + "\" is not a positive duration (like 5m or 300s)");
    }
  }
  const std::string priv_path = opt("priv-key");
  const std::string pub_path = opt("pub-key");
  if (priv_path.empty() && (pub_path.empty() || m.family == Family::kHmac)) {
    return Invalid(m.family == Family::kHmac
                       ? "priv-key is required: " + std::string(m.name) +
                             " signs and verifies with the secret in that file"
                       : "pub-key or priv-key is required");
  }
  if (m.family == Family::kHmac) {
    ETCDW_ASSIGN_OR_RETURN(keys->hmac_secret, ReadFile("priv-key", priv_path));
    if (keys->hmac_secret.empty()) return Invalid("priv-key \"" + priv_path + "\" is empty");
    return std::unique_ptr<JwtTokens>(new JwtTokens(std::move(keys), clock));
  }
  if (!priv_path.empty()) {
    ETCDW_ASSIGN_OR_RETURN(std::string pem, ReadFile("priv-key", priv_path));
    ETCDW_ASSIGN_OR_RETURN(keys->private_key, ParsePrivateKey(priv_path, pem));
    ETCDW_RETURN_IF_ERROR(CheckKeyKind(m, keys->private_key.get(), "priv-key"));
  }
  if (!pub_path.empty()) {
    ETCDW_ASSIGN_OR_RETURN(std::string pem, ReadFile("pub-key", pub_path));
    ETCDW_ASSIGN_OR_RETURN(keys->verify_key, ParsePublicKey(pub_path, pem));
    ETCDW_RETURN_IF_ERROR(CheckKeyKind(m, keys->verify_key.get(), "pub-key"));
    if (keys->private_key && EVP_PKEY_eq(keys->verify_key.get(), keys->private_key.get()) != 1) {
      return Invalid("pub-key \"" + pub_path + "\" is not the public half of priv-key \"" +
                     priv_path + "\"");
    }
  } else {
    EVP_PKEY_up_ref(keys->private_key.get());
    keys->verify_key.reset(keys->private_key.get());
  }
  return std::unique_ptr<JwtTokens>(new JwtTokens(std::move(keys), clock));
}

bool JwtTokens::VerifyOnly() const {
  return keys_->method->family != Family::kHmac && !keys_->private_key;
}

Result<std::string> JwtTokens::Assign(std::string_view /*prefix*/, uint64_t /*index*/,
                                      const std::string& user, uint64_t auth_revision) {
  if (VerifyOnly()) return errors::JwtVerifyOnly();
  const auto exp = std::chrono::duration_cast<std::chrono::seconds>(
                       (clock_.WallNow() + keys_->ttl).time_since_epoch())
                       .count();
  // The JSON jwt-go writes: the header's and the claims' keys in Go's sorted map order.
  const std::string header = R"({"alg":")" + std::string(keys_->method->name) + R"(","typ":"JWT"})";
  const std::string claims = R"({"exp":)" + std::to_string(exp) + R"(,"revision":)" +
                             std::to_string(auth_revision) + R"(,"username":)" +
                             common::GoJsonQuote(user) + "}";
  std::string signing = Base64Url(header) + "." + Base64Url(claims);
  auto sig = keys_->Sign(signing);
  if (!sig) return Internal("signing a JWT token failed");
  return signing + "." + Base64Url(*sig);
}

std::optional<AuthInfo> JwtTokens::Info(const std::string& token, uint64_t /*current_revision*/) {
  const size_t first = token.find('.');
  const size_t second = first == std::string::npos ? first : token.find('.', first + 1);
  if (second == std::string::npos || token.find('.', second + 1) != std::string::npos) {
    return std::nullopt;
  }
  const std::string_view all(token);
  auto header = DecodeJsonObject(all.substr(0, first));
  auto claims = DecodeJsonObject(all.substr(first + 1, second - first - 1));
  auto sig = DecodeBase64Url(all.substr(second + 1));
  if (!header || !claims || !sig) return std::nullopt;
  auto alg = header->fields().find("alg");
  if (alg == header->fields().end() || alg->second.string_value() != keys_->method->name) {
    return std::nullopt;  // another method than ours, "none" included
  }
  if (!keys_->Verify(all.substr(0, second), *sig)) return std::nullopt;
  // The registered time claims, as jwt-go checks them: each optional, each a number.
  const double now = static_cast<double>(
      std::chrono::duration_cast<std::chrono::seconds>(clock_.WallNow().time_since_epoch())
          .count());
  const auto exp = NumberClaim(*claims, "exp");
  const auto iat = NumberClaim(*claims, "iat");
  const auto nbf = NumberClaim(*claims, "nbf");
  if (exp && !(now <= std::trunc(*exp))) return std::nullopt;
  if (iat && !(now >= std::trunc(*iat))) return std::nullopt;
  if (nbf && !(now >= std::trunc(*nbf))) return std::nullopt;
  auto user = claims->fields().find("username");
  const auto revision = NumberClaim(*claims, "revision");
  if (user == claims->fields().end() ||
      user->second.kind_case() != google::protobuf::Value::kStringValue || !revision ||
      !(*revision >= 0) || *revision > 1.8e19) {
    return std::nullopt;  // etcd would crash on such a signed token; it is refused here
  }
  return AuthInfo{user->second.string_value(), static_cast<uint64_t>(*revision)};
}

}  // namespace etcdw::member
