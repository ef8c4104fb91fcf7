#include "http_util.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace etcdw::common {

namespace ssl = boost::asio::ssl;

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Query decoding: '+' is a space, "%XY" a byte; a malformed escape is kept verbatim.
std::string QueryUnescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 &&
               HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

bool Readable(const std::string& path, std::string* why) {
  std::ifstream in(path);
  if (!in) {
    *why = std::string("cannot read: ") + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

void SplitTarget(const std::string& target, std::string* path,
                 std::map<std::string, std::string>* query) {
  size_t q = target.find('?');
  *path = target.substr(0, q);
  if (q == std::string::npos) return;
  std::string_view rest(target);
  rest.remove_prefix(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string name = QueryUnescape(pair.substr(0, eq));
    std::string value =
        eq == std::string_view::npos ? std::string() : QueryUnescape(pair.substr(eq + 1));
    query->emplace(std::move(name), std::move(value));
  }
}

Status ConfigureTlsBase(ssl::context& c) {
  c.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                ssl::context::no_compression);
  return Status::Ok();
}

Status LoadCertificateAndKey(ssl::context& c, const std::string& cert_file,
                             const std::string& key_file) {
  std::string why;
  if (!Readable(cert_file, &why)) return InvalidArgument("cert-file \"" + cert_file + "\": " + why);
  if (!Readable(key_file, &why)) return InvalidArgument("key-file \"" + key_file + "\": " + why);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(c.native_handle(), cert_file.c_str()) != 1) {
    return InvalidArgument("cert-file \"" + cert_file + "\": " + OpenSslError());
  }
  if (SSL_CTX_use_PrivateKey_file(c.native_handle(), key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return InvalidArgument("key-file \"" + key_file + "\" does not match cert-file \"" +
                             cert_file + "\"");
    }
    return InvalidArgument("key-file \"" + key_file + "\": " + OpenSslError());
  }
  if (SSL_CTX_check_private_key(c.native_handle()) != 1) {
    return InvalidArgument("key-file \"" + key_file + "\" does not match cert-file \"" + cert_file +
                           "\"");
  }
  return Status::Ok();
}

Status LoadCaBundle(ssl::context& c, const std::string& ca_file) {
  std::string why;
  if (!Readable(ca_file, &why)) return InvalidArgument("CA bundle \"" + ca_file + "\": " + why);
  // Count the certificates first: OpenSSL accepts a file without any, and every handshake
  // would then fail with a confusing verification error.
  int count = 0;
  if (FILE* f = std::fopen(ca_file.c_str(), "r")) {
    while (X509* x = PEM_read_X509(f, nullptr, nullptr, nullptr)) {
      ++count;
      X509_free(x);
    }
    std::fclose(f);
  }
  ERR_clear_error();
  if (count == 0) {
    return InvalidArgument("CA bundle \"" + ca_file + "\": no PEM certificate in the file");
  }
  if (SSL_CTX_load_verify_locations(c.native_handle(), ca_file.c_str(), nullptr) != 1) {
    return InvalidArgument("CA bundle \"" + ca_file + "\": " + OpenSslError());
  }
  return Status::Ok();
}

Status LoadCaPem(ssl::context& c, const std::string& pem, const std::string& what) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return Internal(what + ": " + OpenSslError());
  X509_STORE* store = SSL_CTX_get_cert_store(c.native_handle());
  int count = 0;
  Status st;
  while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    // A certificate already in the store (a bundle listing one twice) is not an error.
    if (X509_STORE_add_cert(store, x) != 1 &&
        ERR_GET_REASON(ERR_peek_last_error()) != X509_R_CERT_ALREADY_IN_HASH_TABLE) {
      st = InvalidArgument(what + ": " + OpenSslError());
    }
    ++count;
    X509_free(x);
  }
  BIO_free(bio);
  ERR_clear_error();
  if (!st.ok()) return st;
  if (count == 0) return InvalidArgument(what + ": no PEM certificate in it");
  return Status::Ok();
}

}  // namespace etcdw::common
