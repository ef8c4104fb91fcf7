#include "s3rver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "servers.h"

namespace etcdw::testing {

std::string S3rver::Binary() {
  const char* env = std::getenv("ETCDW_S3RVER");
  return env != nullptr && *env != '\0' ? env : ETCDW_S3RVER;
}

S3rver::~S3rver() { proc_.Kill(); }

bool S3rver::Start(const std::vector<std::string>& buckets, const std::string& cert_file,
                   const std::string& key_file) {
  const std::string binary = Binary();
  if (!std::filesystem::exists(binary)) {
    WriteFile(dir_.File("s3rver.log"), "s3rver not found at \"" + binary +
                                           "\": run scripts/install-deps.sh or set ETCDW_S3RVER\n");
    return false;
  }
  std::filesystem::create_directories(data_dir());
  port_ = FreePort();
  tls_ = !cert_file.empty();
  std::vector<std::string> argv = {
      binary,   "--directory",         data_dir(),           "--address", "127.0.0.1",
      "--port", std::to_string(port_), "--service-endpoint", "localhost"};
  for (const auto& b : buckets) {
    argv.push_back("--configure-bucket");
    argv.push_back(b);
  }
  if (tls_) {
    argv.insert(argv.end(), {"--cert", cert_file, "--key", key_file});
  }
  // s3rver makes continuation tokens with single DES, which OpenSSL 3 keeps in its legacy
  // provider: without it, every truncated listing fails with InternalError.
  if (!proc_.Start(argv, dir_.File("s3rver.log"), {"NODE_OPTIONS=--openssl-legacy-provider"})) {
    return false;
  }
  return WaitUntil([&] { return !proc_.Running() || PortOpen(port_); }) && proc_.Running();
}

std::string S3rver::endpoint() const {
  return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

std::string S3rver::vhost_endpoint() const {
  return std::string(tls_ ? "https" : "http") + "://s3.localhost:" + std::to_string(port_);
}

std::string S3rver::log() const { return ReadFile(dir_.File("s3rver.log")); }

}  // namespace etcdw::testing
