// What the Kubernetes client's tests share: certificates (a CA, the server's, a client's, and a
// stranger CA), a test API server over HTTPS with a bearer token, clients configured for it,
// and variables of the environment set for one test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "etcdw/kube/client.h"
#include "kube_api_server.h"
#include "test_certs.h"

namespace etcdw::kube {

// Sets (or, with nullopt, unsets) an environment variable until the end of the scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = ::getenv(name_.c_str())) old_ = old;
    Set(value);
  }
  ~ScopedEnv() { Set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void Set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  std::string name_;
  std::optional<std::string> old_;
};

class KubeTest : public ::testing::Test {
 protected:
  static constexpr char kToken[] = "the-token";
  static constexpr char kNs[] = "shoot--dev";

  static void SetUpTestSuite() {
    certs_ = new etcdw::testing::TestCerts();
    ASSERT_TRUE(certs_->AddCa("ca") && certs_->AddCa("other-ca") && certs_->Issue("server", "ca") &&
                certs_->Issue("client", "ca"))
        << certs_->log();
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  // HTTPS with the test CA's server certificate, accepting kToken.
  static etcdw::testing::KubeApiServerOptions TlsServerOptions() {
    etcdw::testing::KubeApiServerOptions o;
    o.cert_file = certs_->Crt("server");
    o.key_file = certs_->Key("server");
    o.token = kToken;
    return o;
  }

  // Starts server_ (once per test) with `o`.
  void StartServer(etcdw::testing::KubeApiServerOptions o = TlsServerOptions()) {
    server_ = std::make_unique<etcdw::testing::KubeApiServer>(std::move(o));
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // The configuration of a client of server_: its URL, the test CA, kToken.
  KubeConfig ConfigForServer() const {
    KubeConfig c;
    c.server = server_->url();
    c.ca_file = certs_->Crt("ca");
    c.token = kToken;
    c.source = "test";
    return c;
  }

  static std::unique_ptr<KubeClient> NewClient(KubeConfig c, KubeClientOptions o = {}) {
    auto client = KubeClient::Create(std::move(c), o);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  // A Lease object as a controller would create it.
  static nlohmann::json LeaseObject(const std::string& name, const std::string& holder) {
    return {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"holderIdentity", holder},
              {"leaseDurationSeconds", 40},
              {"renewTime", "2026-01-01T00:00:00.000000Z"}}}};
  }

  // The methods of the requests server_ saw, in order, e.g. "GET PUT".
  std::string Methods() const {
    std::string out;
    for (const auto& r : server_->requests()) out += (out.empty() ? "" : " ") + r.method;
    return out;
  }

  static etcdw::testing::TestCerts* certs_;
  std::unique_ptr<etcdw::testing::KubeApiServer> server_;
};

inline etcdw::testing::TestCerts* KubeTest::certs_ = nullptr;

}  // namespace etcdw::kube
