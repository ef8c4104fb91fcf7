// NewTlsContext (etcdw/common/tls_context.h), the one builder of TLS contexts: handshakes between
// a server and a client context over a socket pair, with and without client certificates, ALPN,
// protocol versions, the server name check, and errors that name the setting and the file.
#include "etcdw/common/tls_context.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_certs.h"

namespace etcdw::common {
namespace {

using Side = TlsContextOptions::Side;
using ClientCerts = TlsContextOptions::ClientCerts;

class TlsContextTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new etcdw::testing::TestCerts();
    ASSERT_TRUE(certs_->AddCa("ca") && certs_->AddCa("other-ca") &&
                certs_->Issue("server", "ca", {"*.wild.test", "f*.part.test"}) &&
                certs_->Issue("client", "ca") && certs_->Issue("stranger", "other-ca"))
        << certs_->log();
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  static TlsContextOptions Server(ClientCerts client_certs = ClientCerts::kIgnore) {
    TlsContextOptions o;
    o.side = Side::kServer;
    o.cert_file = certs_->Crt("server");
    o.key_file = certs_->Key("server");
    o.ca_file = certs_->Crt("ca");
    o.client_certs = client_certs;
    return o;
  }
  // A client trusting `ca` and presenting `cert` (none when empty).
  static TlsContextOptions Client(const std::string& cert = "", const std::string& ca = "ca") {
    TlsContextOptions o;
    o.side = Side::kClient;
    if (!cert.empty()) {
      o.cert_file = certs_->Crt(cert);
      o.key_file = certs_->Key(cert);
    }
    if (!ca.empty()) o.ca_file = certs_->Crt(ca);
    return o;
  }
  static SslCtxPtr Build(const TlsContextOptions& o) {
    auto ctx = NewTlsContext(o);
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    return ctx.ok() ? std::move(ctx).value() : nullptr;
  }

  static etcdw::testing::TestCerts* certs_;
};
etcdw::testing::TestCerts* TlsContextTest::certs_ = nullptr;

// What one handshake came to.
struct Outcome {
  bool established = false;  // both sides completed it (the client read the server's byte)
  bool server_ok = false;    // the server's side completed
  bool client_cert = false;  // the server received a client certificate
  long verify_result = -1;   // NOLINT(google-runtime-int): the server's verdict on it
  std::string alpn;          // the protocol ALPN chose ("" for none)
  int version = 0;           // the protocol version, once established
};

// A handshake between a server and a client context over a socket pair. `host` is the name the
// client expects (ExpectServerName; none when empty), `alpn` the protocols it offers.
Outcome Handshake(ssl_ctx_st* server, ssl_ctx_st* client, const std::string& host = "",
                  const std::vector<std::string>& alpn = {}) {
  Outcome out;
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return out;
  timeval tv{10, 0};  // a side waiting for a peer that gave up fails instead of hanging
  for (int fd : fds) ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  SSL* s = SSL_new(server);
  SSL* c = SSL_new(client);
  SSL_set_fd(s, fds[0]);
  SSL_set_fd(c, fds[1]);
  if (!host.empty()) {
    EXPECT_TRUE(ExpectServerName(c, host).ok()) << host;
  }
  if (!alpn.empty()) {
    std::string wire;
    for (const auto& p : alpn) wire += static_cast<char>(p.size()) + p;
    SSL_set_alpn_protos(c, reinterpret_cast<const unsigned char*>(wire.data()),
                        static_cast<unsigned int>(wire.size()));
  }
  std::thread server_side([&] {
    out.server_ok = SSL_accept(s) == 1;
    if (!out.server_ok) {
      ::shutdown(fds[0], SHUT_RDWR);
      return;
    }
    X509* cert = SSL_get1_peer_certificate(s);
    out.client_cert = cert != nullptr;
    X509_free(cert);
    out.verify_result = SSL_get_verify_result(s);
    const unsigned char* chosen = nullptr;
    unsigned int len = 0;
    SSL_get0_alpn_selected(s, &chosen, &len);
    out.alpn.assign(reinterpret_cast<const char*>(chosen), len);
    SSL_write(s, "x", 1);
  });
  char byte = 0;
  const bool client_ok = SSL_connect(c) == 1 && SSL_read(c, &byte, 1) == 1 && byte == 'x';
  if (!client_ok) ::shutdown(fds[1], SHUT_RDWR);
  server_side.join();
  out.established = client_ok && out.server_ok;
  if (out.established) out.version = SSL_version(c);
  SSL_free(s);
  SSL_free(c);
  ::close(fds[0]);
  ::close(fds[1]);
  return out;
}

TEST_F(TlsContextTest, RequiredClientCertificatesMustVerifyAgainstTheCa) {
  SslCtxPtr server = Build(Server(ClientCerts::kRequire));
  ASSERT_TRUE(server);
  Outcome good = Handshake(server.get(), Build(Client("client")).get());
  EXPECT_TRUE(good.established);
  EXPECT_TRUE(good.client_cert);
  EXPECT_EQ(good.verify_result, X509_V_OK);
  EXPECT_FALSE(Handshake(server.get(), Build(Client()).get()).established) << "no certificate";
  EXPECT_FALSE(Handshake(server.get(), Build(Client("stranger")).get()).established)
      << "a certificate from another CA";
}

TEST_F(TlsContextTest, RequestedClientCertificatesAreVerifiedButNeverFailTheHandshake) {
  SslCtxPtr server = Build(Server(ClientCerts::kRequest));
  ASSERT_TRUE(server);
  Outcome good = Handshake(server.get(), Build(Client("client")).get());
  EXPECT_TRUE(good.established);
  EXPECT_TRUE(good.client_cert);
  EXPECT_EQ(good.verify_result, X509_V_OK);
  Outcome stranger = Handshake(server.get(), Build(Client("stranger")).get());
  EXPECT_TRUE(stranger.established);
  EXPECT_TRUE(stranger.client_cert);
  EXPECT_NE(stranger.verify_result, X509_V_OK);
  Outcome anonymous = Handshake(server.get(), Build(Client()).get());
  EXPECT_TRUE(anonymous.established);
  EXPECT_FALSE(anonymous.client_cert);
}

TEST_F(TlsContextTest, IgnoredClientCertificatesAreNotAskedFor) {
  SslCtxPtr server = Build(Server(ClientCerts::kIgnore));
  ASSERT_TRUE(server);
  Outcome o = Handshake(server.get(), Build(Client("stranger")).get());
  EXPECT_TRUE(o.established);
  EXPECT_FALSE(o.client_cert);
}

TEST_F(TlsContextTest, AlpnChoosesAServerProtocolOnlyWhenTheClientOffersIt) {
  auto with_h2 = Server();
  with_h2.alpn = {"h2"};
  SslCtxPtr h2 = Build(with_h2);
  SslCtxPtr plain = Build(Server());
  SslCtxPtr client = Build(Client());
  ASSERT_TRUE(h2 && plain && client);
  EXPECT_EQ(Handshake(h2.get(), client.get(), "", {"http/1.1", "h2"}).alpn, "h2");
  Outcome http1 = Handshake(h2.get(), client.get(), "", {"http/1.1"});
  EXPECT_TRUE(http1.established);
  EXPECT_EQ(http1.alpn, "");
  Outcome none = Handshake(plain.get(), client.get(), "", {"h2"});
  EXPECT_TRUE(none.established);
  EXPECT_EQ(none.alpn, "");
}

TEST_F(TlsContextTest, TheClientChecksTheServerNameOrAddress) {
  SslCtxPtr server = Build(Server());
  SslCtxPtr client = Build(Client());
  ASSERT_TRUE(server && client);
  EXPECT_TRUE(Handshake(server.get(), client.get(), "localhost").established);
  EXPECT_TRUE(Handshake(server.get(), client.get(), "127.0.0.1").established);
  EXPECT_FALSE(Handshake(server.get(), client.get(), "127.0.0.2").established);
  EXPECT_FALSE(Handshake(server.get(), client.get(), "other.example").established);
  // A wildcard stands for a whole left-most label only (Go's rule, and so etcd's).
  EXPECT_TRUE(Handshake(server.get(), client.get(), "a.wild.test").established);
  EXPECT_FALSE(Handshake(server.get(), client.get(), "a.b.wild.test").established);
  EXPECT_FALSE(Handshake(server.get(), client.get(), "fo.part.test").established);

  // A client that trusts another CA refuses the server; one that verifies nothing accepts it,
  // whatever its name.
  EXPECT_FALSE(Handshake(server.get(), Build(Client("", "other-ca")).get()).established);
  auto insecure = Client("", "");
  insecure.verify_server = false;
  EXPECT_TRUE(Handshake(server.get(), Build(insecure).get(), "other.example").established);
}

TEST_F(TlsContextTest, TlsOneTwoAtLeastAndOneThreeOnlyOnRequest) {
  SslCtxPtr server = Build(Server());
  SslCtxPtr client = Build(Client());
  ASSERT_TRUE(server && client);
  EXPECT_EQ(Handshake(server.get(), client.get()).version, TLS1_3_VERSION);

  SslCtxPtr old_client = Build(Client());
  ASSERT_TRUE(old_client);
  SSL_CTX_set_min_proto_version(old_client.get(), TLS1_VERSION);
  SSL_CTX_set_max_proto_version(old_client.get(), TLS1_1_VERSION);
  EXPECT_FALSE(Handshake(server.get(), old_client.get()).established) << "TLS 1.1 accepted";

  SslCtxPtr tls12_server = Build(Server());
  ASSERT_TRUE(tls12_server);
  SSL_CTX_set_max_proto_version(tls12_server.get(), TLS1_2_VERSION);
  EXPECT_EQ(Handshake(tls12_server.get(), client.get()).version, TLS1_2_VERSION);
  auto tls13 = Client();
  tls13.tls13_only = true;
  EXPECT_FALSE(Handshake(tls12_server.get(), Build(tls13).get()).established);
}

TEST_F(TlsContextTest, RootsGivenAsPemTextVerifyTheServer) {
  std::stringstream pem;
  pem << std::ifstream(certs_->Crt("ca")).rdbuf();
  auto o = Client("", "");
  o.ca_pem = pem.str() + pem.str();  // listed twice: not an error
  SslCtxPtr server = Build(Server());
  SslCtxPtr client = Build(o);
  ASSERT_TRUE(server && client);
  EXPECT_TRUE(Handshake(server.get(), client.get(), "localhost").established);

  o.ca_pem = "not a certificate";
  o.ca_pem_name = "the sidecar's CA";
  auto bad = NewTlsContext(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "the sidecar's CA: no PEM certificate in it");
}

TEST_F(TlsContextTest, AClientCertificateGivenAsPemTextIsPresented) {
  const auto read = [](const std::string& path) {
    std::stringstream text;
    text << std::ifstream(path).rdbuf();
    return text.str();
  };
  SslCtxPtr server = Build(Server(ClientCerts::kRequire));
  ASSERT_TRUE(server);
  auto o = Client();
  o.cert_pem = read(certs_->Crt("client"));
  o.key_pem = read(certs_->Key("client"));
  Outcome good = Handshake(server.get(), Build(o).get());
  EXPECT_TRUE(good.established);
  EXPECT_TRUE(good.client_cert);
  EXPECT_EQ(good.verify_result, X509_V_OK);

  o.key_pem = read(certs_->Key("stranger"));
  auto mismatch = NewTlsContext(o);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().message(),
            "client key (PEM text) does not match client certificate (PEM text)");
  o.cert_pem = "no certificate";
  auto garbage = NewTlsContext(o);
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().message(), "client certificate (PEM text): no PEM certificate in it");
  o.key_pem.clear();
  auto half = NewTlsContext(o);
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("go together"), std::string::npos);
}

TEST_F(TlsContextTest, ErrorsNameTheSettingAndTheFile) {
  auto o = Server();
  o.setting_prefix = "x-security.";
  o.cert_file = certs_->File("missing.crt");
  auto r = NewTlsContext(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(
      r.status().message().rfind("x-security.cert-file \"" + o.cert_file + "\": cannot read", 0),
      0u)
      << r.status().message();

  o = Server();
  o.setting_prefix = "x-security.";
  o.key_file = certs_->Key("client");
  r = NewTlsContext(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "x-security.key-file \"" + o.key_file +
                                      "\" does not match x-security.cert-file \"" + o.cert_file +
                                      "\"");

  std::ofstream(certs_->File("empty.crt")) << "not a certificate\n";
  o = Server();
  o.ca_file = certs_->File("empty.crt");
  o.ca_setting = "CA bundle";
  r = NewTlsContext(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "CA bundle \"" + o.ca_file + "\": no PEM certificate in the file");

  o = Server(ClientCerts::kRequire);
  o.ca_file.clear();
  r = NewTlsContext(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("client-cert-auth needs trusted-ca-file"), std::string::npos)
      << r.status().message();

  auto c = Client("client");
  c.key_file.clear();
  r = NewTlsContext(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("go together"), std::string::npos) << r.status().message();

  o = Server();
  o.cert_file.clear();
  o.key_file.clear();
  EXPECT_FALSE(NewTlsContext(o).ok()) << "a server without a certificate";
}

}  // namespace
}  // namespace etcdw::common
