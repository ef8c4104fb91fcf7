// The sidecar's etcd client over TLS: --insecure-skip-tls-verify accepts a server certificate
// the client cannot verify, as gardener's client (Go's InsecureSkipVerify) does; without it the
// connection is refused.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "etcdw/client_api/native_rpc_server.h"
#include "etcdw/common/url.h"
#include "etcdw/member/etcd_server.h"
#include "etcdw/sidecar/etcd_client.h"
#include "support/local_member.h"
#include "support/scratch_dir.h"
#include "test_certs.h"

namespace etcdw::sidecar {
namespace {

using namespace std::chrono_literals;

class EtcdClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(certs_.AddCa("ca")) << certs_.log();
    ASSERT_TRUE(certs_.Issue("server", "ca")) << certs_.log();
    ASSERT_TRUE(certs_.Issue("client", "ca")) << certs_.log();
    ASSERT_TRUE(certs_.AddCa("other")) << certs_.log();  // verifies nothing of the above
    ASSERT_FALSE(scratch_.path().empty());
    auto s = testsupport::StartLocalMember(scratch_.path() + "/data");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }

  // Serves the member on https with the server certificate; `client_cert_auth` requires
  // clients to present a certificate of the test CA.
  void Serve(bool client_cert_auth) {
    client_api::NativeRpcOptions o;
    o.urls = {common::ParseUrl("https://127.0.0.1:0").value()};
    o.tls.cert_file = certs_.Crt("server");
    o.tls.key_file = certs_.Key("server");
    o.tls.client_cert_auth = client_cert_auth;
    if (client_cert_auth) o.tls.trusted_ca_file = certs_.Crt("ca");
    auto n = client_api::NativeRpcServer::Start(*server_, o);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    native_ = std::move(n).value();
    endpoint_ = "https://127.0.0.1:" + std::to_string(native_->ports().at(0));
  }

  void TearDown() override {
    if (native_) native_->Shutdown(1s);
    if (server_) server_->Stop();
  }

  // TLS options as druid's flags give them (--insecure-transport=false), with `ca_file`.
  EtcdConnectionOptions Tls(const std::string& ca_file, bool skip_verify) const {
    EtcdConnectionOptions o;
    o.insecure_transport = false;
    o.insecure_skip_verify = skip_verify;
    o.ca_file = ca_file;
    return o;
  }

  // A Status call through a client with `o`.
  Status StatusCall(const EtcdConnectionOptions& o) const {
    auto c = EtcdClient::Connect(o, endpoint_);
    if (!c.ok()) return c.status();
    auto r = (*c)->EndpointStatus(30s);  // slow under full-unwinding ASan
    return r.ok() ? Status::Ok() : r.status();
  }

  testing::TestCerts certs_;
  testsupport::ScratchDir scratch_{"etcd-client-tls"};
  std::unique_ptr<member::EtcdServer> server_;
  std::unique_ptr<client_api::NativeRpcServer> native_;
  std::string endpoint_;
};

TEST_F(EtcdClientTlsTest, VerifiesTheServerAgainstTheCaBundle) {
  ASSERT_NO_FATAL_FAILURE(Serve(false));
  EXPECT_TRUE(StatusCall(Tls(certs_.Crt("ca"), false)).ok());
}

TEST_F(EtcdClientTlsTest, RefusesAServerItCannotVerify) {
  ASSERT_NO_FATAL_FAILURE(Serve(false));
  Status st = StatusCall(Tls(certs_.Crt("other"), false));
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
}

TEST_F(EtcdClientTlsTest, SkipTlsVerifyAcceptsAServerItCannotVerify) {
  ASSERT_NO_FATAL_FAILURE(Serve(false));
  EXPECT_TRUE(StatusCall(Tls(certs_.Crt("other"), true)).ok());
  // Without any CA bundle: the system roots do not know the test CA either.
  EXPECT_TRUE(StatusCall(Tls("", true)).ok());
  EXPECT_FALSE(StatusCall(Tls("", false)).ok());
}

TEST_F(EtcdClientTlsTest, SkipTlsVerifyStillPresentsTheClientCertificate) {
  ASSERT_NO_FATAL_FAILURE(Serve(true));
  EtcdConnectionOptions o = Tls(certs_.Crt("other"), true);
  EXPECT_FALSE(StatusCall(o).ok());  // the server requires a client certificate
  o.cert_file = certs_.Crt("client");
  o.key_file = certs_.Key("client");
  EXPECT_TRUE(StatusCall(o).ok());
  o.key_file = certs_.dir() + "/missing.key";
  Status st = StatusCall(o);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--key"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace etcdw::sidecar
