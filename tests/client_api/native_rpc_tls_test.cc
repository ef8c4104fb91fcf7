// The native RPC server on an https URL: gRPC clients negotiate HTTP/2 over TLS (ALPN), with
// client-cert-auth only clients whose certificate the trusted CA signed are served, and
// clients that fail the handshake leave the server serving. Unusable TLS files are refused at
// start with the setting's name.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "await.h"
#include "native_rpc_fixture.h"
#include "support/files.h"
#include "test_certs.h"

namespace etcdw::client_api {
namespace {

class NativeRpcTlsTest : public NativeRpcServerTest {
 protected:
  void SetUp() override {
    NativeRpcServerTest::SetUp();
    ASSERT_TRUE(certs_.AddCa("ca") && certs_.AddCa("other-ca") && certs_.Issue("server", "ca") &&
                certs_.Issue("client", "ca") && certs_.Issue("stranger", "other-ca") &&
                certs_.Issue("root", "ca"))
        << certs_.log();
  }

  NativeRpcOptions TlsOptions(bool client_cert_auth) {
    NativeRpcOptions o;
    o.threads = 2;
    o.urls = {common::Url{"https", "127.0.0.1", 0}};
    o.tls.cert_file = certs_.Crt("server");
    o.tls.key_file = certs_.Key("server");
    o.tls.trusted_ca_file = certs_.Crt("ca");
    o.tls.client_cert_auth = client_cert_auth;
    return o;
  }

  // A KV stub over TLS, presenting `client`'s certificate unless it is empty.
  std::unique_ptr<etcdserverpb::KV::Stub> TlsKv(const std::string& client) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = testsupport::ReadFile(certs_.Crt("ca"));
    if (!client.empty()) {
      ssl.pem_private_key = testsupport::ReadFile(certs_.Key(client));
      ssl.pem_cert_chain = testsupport::ReadFile(certs_.Crt(client));
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return etcdserverpb::KV::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(native_->ports().at(0)), grpc::SslCredentials(ssl), args));
  }

  grpc::Status TryPut(etcdserverpb::KV::Stub& kv) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    etcdserverpb::PutRequest req;
    req.set_key("k");
    req.set_value("v");
    etcdserverpb::PutResponse resp;
    return kv.Put(&ctx, req, &resp);
  }

  testing::TestCerts certs_;
};

TEST_F(NativeRpcTlsTest, ServesClientsWhoseCertificateTheTrustedCaSigned) {
  StartNative(TlsOptions(/*client_cert_auth=*/true));
  auto trusted = TlsKv("client");
  grpc::Status st = TryPut(*trusted);
  EXPECT_TRUE(st.ok()) << st.error_message();

  // No certificate, or one from another CA: the handshake fails, nothing is served.
  EXPECT_EQ(TryPut(*TlsKv("")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(TryPut(*TlsKv("stranger")).error_code(), grpc::StatusCode::UNAVAILABLE);
  // A plaintext client gets nowhere either.
  auto plain = etcdserverpb::KV::NewStub(NewChannel(native_->ports().at(0)));
  EXPECT_NE(TryPut(*plain).error_code(), grpc::StatusCode::OK);

  st = TryPut(*trusted);
  EXPECT_TRUE(st.ok()) << "the server serves on: " << st.error_message();
}

TEST_F(NativeRpcTlsTest, WithoutClientCertAuthAnyClientIsServed) {
  StartNative(TlsOptions(/*client_cert_auth=*/false));
  grpc::Status st = TryPut(*TlsKv(""));
  EXPECT_TRUE(st.ok()) << st.error_message();
}

// Writing to a TLS client that went away must end its connection, not the process (SIGPIPE
// kills a process that writes to a closed socket without MSG_NOSIGNAL).
TEST_F(NativeRpcTlsTest, ClientsLeavingDuringBigAnswersLeaveTheServerServing) {
  StartNative(TlsOptions(/*client_cert_auth=*/false));
  auto kv = TlsKv("");
  for (int i = 0; i < 4; ++i) {
    grpc::ClientContext ctx;
    etcdserverpb::PutRequest req;
    req.set_key("big/" + std::to_string(i));
    req.set_value(std::string(1 << 20, 'x'));
    etcdserverpb::PutResponse resp;
    ASSERT_TRUE(kv->Put(&ctx, req, &resp).ok());
  }
  for (int round = 0; round < 20; ++round) {
    auto leaving = TlsKv("");
    grpc::ClientContext ctx;
    etcdserverpb::RangeRequest req;
    req.set_key("big/");
    req.set_range_end("big0");
    etcdserverpb::RangeResponse resp;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    leaving->async()->Range(&ctx, &req, &resp, [&](grpc::Status) {
      std::lock_guard lock(mu);
      done = true;
      cv.notify_all();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 5));
    ctx.TryCancel();
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  grpc::Status st = TryPut(*kv);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

// Runs `command` in a shell; its standard output.
std::string Output(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
  }
  return out;
}

TEST_F(NativeRpcTlsTest, AnHttpsMetricsUrlServesHttp1EvenToClientsOfferingHttp2) {
  NativeRpcOptions o = TlsOptions(/*client_cert_auth=*/true);
  o.metrics_urls = {common::Url{"https", "127.0.0.1", 0}};
  StartNative(o);
  const std::string url = "https://127.0.0.1:" + std::to_string(native_->ports().at(1));
  const std::string curl = "curl -s --max-time 10 --cacert " + certs_.Crt("ca");
  // curl offers h2 by ALPN: the metrics URL does not take it, and answers over HTTP/1.1.
  const std::string page =
      Output(curl + " --cert " + certs_.Crt("client") + " --key " + certs_.Key("client") +
             " -w 'HTTP %{http_version}' " + url + "/metrics");
  EXPECT_NE(page.find("# TYPE etcd_server_has_leader gauge\n"), std::string::npos) << page;
  EXPECT_NE(page.find("HTTP 1.1"), std::string::npos) << page.substr(page.size() - 40);
  // The client certificate settings hold there too.
  EXPECT_EQ(Output(curl + " " + url + "/metrics").find("etcd_server_has_leader"),
            std::string::npos);
}

// With client-cert-auth and authentication enabled, a request without a token runs as the user
// its certificate's Common Name names, as etcd's AuthInfoFromTLS does.
TEST_F(NativeRpcTlsTest, TheCertificatesCommonNameIsTheUserOfRequestsWithoutAToken) {
  using testsupport::Await;
  using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)
  for (const char* user : {"root", "client"}) {
    AuthUserAddRequest add;
    add.set_name(user);
    add.mutable_options()->set_no_password(true);
    ASSERT_TRUE(Await<AuthUserAddResponse>([&](auto done) { server_->UserAdd(add, done); }).ok());
  }
  AuthUserGrantRoleRequest grant;
  grant.set_user("root");
  grant.set_role("root");
  ASSERT_TRUE(Await<AuthUserGrantRoleResponse>([&](auto done) {
                server_->UserGrantRole(grant, done);
              }).ok());
  AuthRoleAddRequest role;
  role.set_name("writer");
  ASSERT_TRUE(Await<AuthRoleAddResponse>([&](auto done) { server_->RoleAdd(role, done); }).ok());
  AuthRoleGrantPermissionRequest perm;
  perm.set_name("writer");
  perm.mutable_perm()->set_key("k");
  perm.mutable_perm()->set_permtype(authpb::Permission::WRITE);
  ASSERT_TRUE(Await<AuthRoleGrantPermissionResponse>([&](auto done) {
                server_->RoleGrantPermission(perm, done);
              }).ok());
  StartNative(TlsOptions(/*client_cert_auth=*/true));
  auto client = TlsKv("client");
  ASSERT_TRUE(Await<AuthEnableResponse>([&](auto done) { server_->AuthEnable(done); }).ok());
  // "client" may not write "k" until it has the role; "root" may.
  grpc::Status st = TryPut(*client);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_EQ(st.error_message(), "etcdserver: permission denied");
  EXPECT_TRUE(TryPut(*TlsKv("root")).ok());
  grant.set_user("client");
  grant.set_role("writer");
  ASSERT_TRUE(Await<AuthUserGrantRoleResponse>([&](auto done) {
                server_->UserGrantRole(grant, done);
              }).ok());
  st = TryPut(*client);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

// The gRPC gateway over TLS to an HTTP/1.1 client (curl --http1.1: ALPN offers no h2), with a
// client certificate; a unary call and a keepalive stream.
TEST_F(NativeRpcTlsTest, GatewayServesHttp1ClientsOverTls) {
  StartNative(TlsOptions(/*client_cert_auth=*/true));
  const std::string url = "https://127.0.0.1:" + std::to_string(native_->ports().at(0));
  const std::string curl = "curl -s --http1.1 --max-time 10 --cacert " + certs_.Crt("ca") +
                           " --cert " + certs_.Crt("client") + " --key " + certs_.Key("client");
  EXPECT_NE(Output(curl + " " + url + "/v3/kv/put -d '{\"key\":\"dGxz\",\"value\":\"eQ==\"}'")
                .find("\"revision\":\"2\""),
            std::string::npos);
  const std::string got = Output(curl + " " + url + "/v3/kv/range -d '{\"key\":\"dGxz\"}'");
  EXPECT_NE(got.find(R"("kvs":[{"key":"dGxz","create_revision":"2")"), std::string::npos) << got;
  Output(curl + " " + url + "/v3/lease/grant -d '{\"TTL\":30,\"ID\":\"5\"}'");
  const std::string kept = Output(curl + " " + url + "/v3/lease/keepalive -d '{\"ID\":\"5\"}'");
  EXPECT_NE(kept.find(R"("ID":"5","TTL":"30"}})"), std::string::npos) << kept;
}

// Over TLS, an HTTP/2 request that is not gRPC goes to the HTTP handlers, as etcd's
// grpcHandlerFunc: the gateway and /health answer HTTP/2 clients (curl negotiating h2).
TEST_F(NativeRpcTlsTest, GatewayAndHealthServeHttp2ClientsOverTls) {
  StartNative(TlsOptions(/*client_cert_auth=*/true));
  const std::string url = "https://127.0.0.1:" + std::to_string(native_->ports().at(0));
  const std::string curl =
      "curl -s --http2 --max-time 10 -w ' HTTP/%{http_version} %{http_code}' "
      "--cacert " +
      certs_.Crt("ca") + " --cert " + certs_.Crt("client") + " --key " + certs_.Key("client");
  std::string got =
      Output(curl + " " + url + "/v3/kv/put -d '{\"key\":\"aDI=\",\"value\":\"eQ==\"}'");
  EXPECT_NE(got.find("\"revision\":\"2\""), std::string::npos) << got;
  EXPECT_NE(got.find(" HTTP/2 200"), std::string::npos) << got;
  got = Output(curl + " " + url + "/v3/kv/range -d '{}'");
  EXPECT_NE(got.find(R"({"error":"etcdserver: key is not provided")"), std::string::npos) << got;
  EXPECT_NE(got.find(" HTTP/2 400"), std::string::npos) << got;
  got = Output(curl + " " + url + "/health");
  EXPECT_EQ(got, R"({"health":"true"} HTTP/2 200)");
  // gRPC clients are served on the same connections' port as before.
  EXPECT_TRUE(TryPut(*TlsKv("client")).ok());
}

// The gateway's streams over HTTP/2 (TLS, h2 by ALPN), as etcd's Go server runs them there: a
// plain HTTP answer whose DATA are grpc-gateway's lines; a keepalive ends once answered, a
// watch stays until the client leaves, a first message that does not parse is 500 code 2.
TEST_F(NativeRpcTlsTest, GatewayStreamsServeHttp2ClientsOverTls) {
  StartNative(TlsOptions(/*client_cert_auth=*/true));
  const std::string url = "https://127.0.0.1:" + std::to_string(native_->ports().at(0));
  const std::string curl = "curl -s -N --http2 -w ' HTTP/%{http_version} %{http_code}' --cacert " +
                           certs_.Crt("ca") + " --cert " + certs_.Crt("client") + " --key " +
                           certs_.Key("client");
  Output(curl + " --max-time 10 " + url + "/v3/lease/grant -d '{\"TTL\":30,\"ID\":\"6\"}'");
  std::string got = Output(curl + " --max-time 10 " + url +
                           "/v3/lease/keepalive -d '{\"ID\":\"6\"} {\"ID\":\"7\"}'");
  EXPECT_NE(got.find(R"("ID":"6","TTL":"30"}})"
                     "\n"),
            std::string::npos)
      << got;
  EXPECT_NE(got.find(R"("ID":"7"}})"
                     "\n HTTP/2 200"),
            std::string::npos)
      << got;
  // The watch runs until curl gives up (3 s); a put through the gateway meanwhile.
  got = Output("(" + curl + " --max-time 3 " + url +
               "/v3/watch -d '{\"create_request\":{\"key\":\"dw==\"}}' & sleep 1; " + curl +
               " --max-time 10 -o /dev/null " + url +
               "/v3/kv/put -d '{\"key\":\"dw==\",\"value\":\"dg==\"}'; wait)");
  EXPECT_NE(got.find(R"("created":true}})"
                     "\n"),
            std::string::npos)
      << got;
  EXPECT_NE(got.find(R"("events":[{"kv":{"key":"dw==")"), std::string::npos) << got;
  EXPECT_NE(got.find(" HTTP/2 200"), std::string::npos) << got;
  got = Output(curl + " --max-time 10 " + url + "/v3/watch -d '{bad'");
  EXPECT_EQ(got, R"({"error":"invalid character 'b' looking for beginning of object key string",)"
                 R"("message":"invalid character 'b' looking for beginning of object key string",)"
                 R"("code":2} HTTP/2 500)");
  // Cancelled by the client (curl gives up): the server's watch goes with the stream.
  Output(curl + " --max-time 1 " + url + "/v3/watch -d '{\"create_request\":{\"key\":\"eA==\"}}'");
  EXPECT_TRUE(TryPut(*TlsKv("client")).ok());
}

TEST_F(NativeRpcTlsTest, UnusableTlsFilesAreRefusedAtStartWithTheSettingsName) {
  NativeRpcOptions o = TlsOptions(true);
  o.tls.cert_file = certs_.File("missing.crt");
  auto n = NativeRpcServer::Start(*server_, o);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("client-transport-security.cert-file"), std::string::npos)
      << n.status().message();

  o = TlsOptions(true);
  o.tls.key_file = certs_.Key("client");  // not the certificate's key
  n = NativeRpcServer::Start(*server_, o);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("client-transport-security.key-file"), std::string::npos)
      << n.status().message();
}

}  // namespace
}  // namespace etcdw::client_api
