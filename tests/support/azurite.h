// Test support: Azurite's blob service, Microsoft's Azure Storage emulator on Node.js (npm
// package azurite 3.35.0, installed into build/node by scripts/install-deps.sh), on a free
// loopback port, its data in a temporary directory.
//
// What it checks: Shared Key signatures (a request whose signature does not match is answered
// 403 AuthenticationFailed), block blobs (Put Block, Put Block List, Put Blob), List Blobs with
// prefix, maxresults and NextMarker, Get Blob and Delete Blob. Its account is kAccount with key
// kKey (set through AZURITE_ACCOUNTS); URLs are path-style: http://127.0.0.1:<port>/<account>.
// It starts with no container: tests create theirs.
#pragma once

#include <string>

#include "etcdw/common/http.h"
#include "etcdw/common/status.h"
#include "process.h"

namespace etcdw::testing {

class Azurite {
 public:
  static constexpr char kAccount[] = "etcdwbackups";
  // base64 of 32 fixed bytes; Azurite signs with the decoded bytes as Azure does.
  static constexpr char kKey[] = "ZXRjZC13cmFwcGVyIGF6dXJpdGUgdGVzdCBrZXkgMDE=";

  Azurite() = default;
  ~Azurite();  // SIGKILL
  Azurite(const Azurite&) = delete;
  Azurite& operator=(const Azurite&) = delete;

  // Starts azurite-blob and waits until it accepts connections. False on failure; see log().
  bool Start();
  int port() const { return port_; }
  // The service URL of the account, as --store-endpoint-override takes it:
  // "http://127.0.0.1:<port>/<kAccount>".
  std::string endpoint() const;
  std::string log() const;

  // A request of the test's own (creating a container, reading a block list), signed with the
  // ABS store's Shared Key code; `resource` is "<container>[/<blob>]", `query` without '?'.
  Result<common::HttpResponse> Send(const std::string& method, const std::string& resource,
                                    const std::string& query) const;
  // Creates container `name`; false (see log()) unless Azurite answers 201.
  bool CreateContainer(const std::string& name) const;

  // The azurite-blob executable: $ETCDW_AZURITE if set, else the path CMake compiled in.
  static std::string Binary();

 private:
  TempDir dir_;
  Process proc_;
  int port_ = -1;
};

}  // namespace etcdw::testing
