// Test support: s3rver, an S3 emulator on Node.js (npm package s3rver 3.7.1, installed into
// build/node by scripts/install-deps.sh), on a free loopback port with a fresh data directory.
//
// What it checks and what it does not: it serves ListObjectsV2 (max-keys, continuation tokens),
// PUT/GET/DELETE of objects and multipart uploads, and it rejects unknown access key IDs
// (InvalidAccessKeyId), but it does not verify SigV4 signatures (only their shape). Its one
// account is access key "S3RVER", secret "S3RVER". Virtual-hosted requests are recognised by
// the Host header "<bucket>.s3.localhost" (started with --service-endpoint localhost).
#pragma once

#include <string>
#include <vector>

#include "process.h"

namespace etcdw::testing {

class S3rver {
 public:
  S3rver() = default;
  ~S3rver();  // SIGKILL
  S3rver(const S3rver&) = delete;
  S3rver& operator=(const S3rver&) = delete;

  // Starts s3rver with `buckets` created, plain HTTP, or HTTPS with the given certificate and
  // key, and waits until it accepts connections. False on failure; see log().
  bool Start(const std::vector<std::string>& buckets, const std::string& cert_file = "",
             const std::string& key_file = "");
  int port() const { return port_; }
  // "http://127.0.0.1:<port>" (https with a certificate).
  std::string endpoint() const;
  // The same server under a name that supports virtual-hosted addressing.
  std::string vhost_endpoint() const;
  // Where the objects live on disk (one directory per bucket).
  std::string data_dir() const { return dir_.File("data"); }
  std::string log() const;

  // The s3rver executable: $ETCDW_S3RVER if set, else the path CMake compiled in.
  static std::string Binary();

 private:
  TempDir dir_;
  Process proc_;
  int port_ = -1;
  bool tls_ = false;
};

}  // namespace etcdw::testing
