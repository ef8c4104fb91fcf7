#include "etcdw/sidecar/sigv4.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <vector>

#include "etcdw/common/hash.h"
#include "etcdw/common/url.h"

namespace etcdw::sidecar::sigv4 {

namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Trims the value and collapses each run of blanks inside it to one space.
std::string CanonicalHeaderValue(std::string_view v) {
  std::string out;
  bool pending_space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

}  // namespace

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xf];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return Hex(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

Result<std::string> Sha256HexOfFile(const std::string& path, int64_t offset, int64_t length) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Internal("open \"" + path + "\": " + std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  int64_t done = 0;
  Status st;
  while (done < length) {
    size_t want =
        static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(buf.size()), length - done));
    ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      st = Internal("read \"" + path + "\": " +
                    (n < 0 ? std::string(std::strerror(errno)) : "file ends before the range"));
      break;
    }
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n));
    done += n;
  }
  ::close(fd);
  if (!st.ok()) return st;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &size);
  return Hex(std::string_view(reinterpret_cast<const char*>(digest), size));
}

std::string SigningKey(std::string_view secret, std::string_view date, std::string_view region,
                       std::string_view service) {
  std::string k = common::HmacSha256("AWS4" + std::string(secret), date);
  k = common::HmacSha256(k, region);
  k = common::HmacSha256(k, service);
  return common::HmacSha256(k, "aws4_request");
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  return common::PercentEncode(s, keep_slash);
}

std::string CanonicalQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string_view name = pair.substr(0, eq);
    std::string_view value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    params.emplace_back(UriEncode(common::PercentDecode(name), false),
                        UriEncode(common::PercentDecode(value), false));
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

std::string AmzDate(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

Signature Sign(const Request& request, const Credentials& credentials, std::string_view region,
               std::string_view service, std::string_view amz_date) {
  // Canonical headers: lower-case names, sorted; values of a repeated name joined with ','.
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& [name, value] : request.headers) {
    std::string lname = Lower(name);
    std::string cvalue = CanonicalHeaderValue(value);
    auto it = std::find_if(headers.begin(), headers.end(),
                           [&](const auto& h) { return h.first == lname; });
    if (it == headers.end()) {
      headers.emplace_back(std::move(lname), std::move(cvalue));
    } else {
      it->second += "," + cvalue;
    }
  }
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  Signature sig;
  std::string canonical_headers;
  for (const auto& [name, value] : headers) {
    canonical_headers += name + ":" + value + "\n";
    if (!sig.signed_headers.empty()) sig.signed_headers += ';';
    sig.signed_headers += name;
  }

  sig.canonical_request = request.method + "\n" + (request.path.empty() ? "/" : request.path) +
                          "\n" + CanonicalQuery(request.query) + "\n" + canonical_headers + "\n" +
                          sig.signed_headers + "\n" + request.payload_hash;

  const std::string date(amz_date.substr(0, 8));
  const std::string scope =
      date + "/" + std::string(region) + "/" + std::string(service) + "/aws4_request";
  sig.string_to_sign = std::string(kAlgorithm) + "\n" + std::string(amz_date) + "\n" + scope +
                       "\n" + Sha256Hex(sig.canonical_request);
  sig.signature = Hex(common::HmacSha256(
      SigningKey(credentials.secret_access_key, date, region, service), sig.string_to_sign));
  sig.authorization = std::string(kAlgorithm) + " Credential=" + credentials.access_key_id + "/" +
                      scope + ", SignedHeaders=" + sig.signed_headers +
                      ", Signature=" + sig.signature;
  return sig;
}

}  // namespace etcdw::sidecar::sigv4
