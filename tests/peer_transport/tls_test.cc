// TLS between members: client certificates, mixed schemes, rejected certificates and schemes,
// bad configuration, and calls and the cluster information over TLS.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/peer_transport/peer_transport.h"
#include "peer_transport/peer_transport_fixture.h"
#include "test_certs.h"

namespace etcdw::peer_transport {
namespace {

using namespace std::chrono_literals;

class PeerTransportTlsTest : public ::testing::Test {
 protected:
  // A CA with a peer certificate, and another CA with its own ("other"), as the tests need.
  static void SetUpTestSuite() {
    certs_ = std::make_unique<testing::TestCerts>();
    ASSERT_TRUE(certs_->AddCa("ca") && certs_->AddCa("other-ca") && certs_->Issue("peer", "ca") &&
                certs_->Issue("other", "other-ca"))
        << certs_->log();
    dir_ = certs_->dir();
  }
  static void TearDownTestSuite() { certs_.reset(); }

  static common::TlsConfig Tls(const std::string& cert, bool client_cert_auth = true) {
    common::TlsConfig t;
    if (!cert.empty()) {
      t.cert_file = dir_ + "/" + cert + ".crt";
      t.key_file = dir_ + "/" + cert + ".key";
    }
    t.trusted_ca_file = dir_ + "/ca.crt";
    t.client_cert_auth = client_cert_auth;
    return t;
  }

  static PeerTransportOptions TlsOptions(uint64_t id, const std::string& cert = "peer") {
    auto o = Options(id, "https://127.0.0.1:0");
    o.tls = Tls(cert);
    return o;
  }

  // `a` (a client of `b`, listening on plain http) sends to `b` and must be turned away.
  static void ExpectRejected(Member& a, Member& b, const std::string& url) {
    a.transport->AddPeer(b.id, {url});
    a.transport->Send({Msg(a.id, b.id, 1)});
    ASSERT_TRUE(WaitUntil([&] { return a.rec->Unreachable(b.id) > 0; }));
    EXPECT_FALSE(a.transport->Connected(b.id));
    EXPECT_EQ(b.rec->MessageCount(), 0u);
  }

  static std::unique_ptr<testing::TestCerts> certs_;
  static std::string dir_;
};

std::unique_ptr<testing::TestCerts> PeerTransportTlsTest::certs_;
std::string PeerTransportTlsTest::dir_;

TEST_F(PeerTransportTlsTest, ClientCertAuthMessagesAndSnapshot) {
  auto a = StartMember(TlsOptions(1));
  auto b = StartMember(TlsOptions(2));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url("localhost")});  // DNS SAN
  b->transport->AddPeer(1, {a->Url()});             // IP SAN
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2) && b->transport->Connected(1); }));
  std::vector<raftpb::Message> batch;
  for (uint64_t i = 1; i <= 200; ++i) batch.push_back(Msg(1, 2, i, i == 100 ? (2 << 20) : 64));
  a->transport->Send(batch);
  b->transport->Send({Msg(2, 1, 1)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 200; }));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->MessageCount() == 1; }));
  std::vector<uint64_t> want;
  for (uint64_t i = 1; i <= 200; ++i) want.push_back(i);
  EXPECT_EQ(b->rec->Indexes(), want);

  constexpr size_t kSize = (2 << 20) + 7;
  a->transport->SendSnapshot(SnapMsg(1, 2, 9), std::make_unique<PatternSource>(kSize, 9));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 1; }, 60s));
  std::lock_guard<std::mutex> lock(b->rec->mu);
  EXPECT_TRUE(a->rec->snapshots_sent[0].second);
  EXPECT_EQ(b->rec->sink_crc, SnapCrc(kSize, 9));
  EXPECT_EQ(b->rec->snapshots_received.size(), 1u);
}

TEST_F(PeerTransportTlsTest, MixedSchemesPerPeer) {
  // `b` listens on both; `a` (plain) reaches it over http, `c` over https.
  auto ob = Options(2, "https://127.0.0.1:0");
  ob.listen_urls.push_back(*common::ParseUrl("http://127.0.0.1:0"));
  ob.tls = Tls("peer", /*client_cert_auth=*/false);
  auto b = StartMember(ob);
  auto a = StartMember(Options(1));
  auto oc = Options(3);
  oc.tls = Tls("");  // verifies the server, presents no certificate
  auto c = StartMember(oc);
  ASSERT_TRUE(a && b && c);
  const auto ports = b->transport->ports();
  ASSERT_EQ(ports.size(), 2u);
  a->transport->AddPeer(2, {"http://127.0.0.1:" + std::to_string(ports[1])});
  c->transport->AddPeer(2, {"https://127.0.0.1:" + std::to_string(ports[0])});
  // Queued while the first dial is under way, delivered once it succeeds.
  a->transport->Send({Msg(1, 2, 1)});
  c->transport->Send({Msg(3, 2, 2)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 2; }));
  EXPECT_TRUE(a->transport->Connected(2));
  EXPECT_TRUE(c->transport->Connected(2));
}

TEST_F(PeerTransportTlsTest, ClientWithoutCertificateIsRejected) {
  auto b = StartMember(TlsOptions(2));
  auto o = Options(1);
  o.tls = Tls("");  // trusts the CA but has no certificate of its own
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  ExpectRejected(*a, *b, b->Url());
}

TEST_F(PeerTransportTlsTest, ClientCertificateFromAnotherCaIsRejected) {
  auto b = StartMember(TlsOptions(2));
  auto o = Options(1);
  o.tls = Tls("other");
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  ExpectRejected(*a, *b, b->Url());
}

TEST_F(PeerTransportTlsTest, ServerCertificateFromAnotherCaIsRejected) {
  auto ob = TlsOptions(2, "other");
  ob.tls.trusted_ca_file = dir_ + "/other-ca.crt";
  auto b = StartMember(ob);
  auto o = Options(1);
  o.tls = Tls("peer");
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  ExpectRejected(*a, *b, b->Url());
}

TEST_F(PeerTransportTlsTest, PlaintextToTlsPortFailsCleanly) {
  auto b = StartMember(TlsOptions(2));
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  ExpectRejected(*a, *b, "http://127.0.0.1:" + std::to_string(b->transport->ports().at(0)));
  // And TLS to a plaintext port.
  auto o = Options(3);
  o.tls = Tls("peer");
  auto c = StartMember(o);
  ASSERT_TRUE(c);
  ExpectRejected(*c, *a, "https://127.0.0.1:" + std::to_string(a->transport->ports().at(0)));
}

TEST_F(PeerTransportTlsTest, BadTlsConfigurationFailsStart) {
  auto o = Options(1, "https://127.0.0.1:0");
  auto r = PeerTransport::Start(o, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("https://127.0.0.1:0"), std::string::npos);
  o.tls = Tls("peer");
  o.tls.cert_file = dir_ + "/missing.crt";
  r = PeerTransport::Start(o, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.crt"), std::string::npos) << r.status().ToString();
}

TEST_F(PeerTransportTlsTest, CallsAndClusterInfoOverTls) {
  auto b = StartMember(TlsOptions(2), [](PeerTransportHandler& h) {
    Echo()(h);
    h.on_cluster_info = [] { return std::string("tls cluster info"); };
  });
  auto a = StartMember(TlsOptions(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url("localhost")});  // DNS SAN

  constexpr int kCalls = 40;
  std::vector<std::shared_ptr<CallOutcome>> calls(kCalls);
  for (auto& c : calls) c = std::make_shared<CallOutcome>();
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&, t] {
      for (int i = t; i < kCalls; i += 2) {
        a->transport->Call(2, static_cast<uint32_t>(i), "tls-" + std::to_string(i), 20s,
                           Record(calls[i]));
      }
    });
  }
  for (auto& th : callers) th.join();
  const std::string big = std::string(1 << 20, 'b') + "end";
  auto large = CallAndWait(*a->transport, 2, 7, big);
  EXPECT_TRUE(large->status.ok()) << large->status.ToString();
  EXPECT_TRUE(large->payload == "7:" + big);
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(calls[i]->Wait());
    if (i == 13) {
      EXPECT_EQ(calls[i]->status, Status(Code::kNotFound, "no such thing: tls-13"));
    } else {
      EXPECT_TRUE(calls[i]->status.ok()) << i << ": " << calls[i]->status.ToString();
      EXPECT_EQ(calls[i]->payload, std::to_string(i) + ":tls-" + std::to_string(i));
    }
  }
  const auto stats = a->transport->CallStats(2);
  EXPECT_GE(stats.open, 1u);
  EXPECT_LE(stats.established, 4u);

  // The cluster information over https, with the member's own TLS configuration.
  auto r = PeerTransport::FetchClusterInfo(ParseUrls({b->Url()}), Tls("peer"), 2s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "tls cluster info");
  r = PeerTransport::FetchClusterInfo(ParseUrls({DeadUrl(), b->Url("localhost")}), Tls("peer"), 2s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "tls cluster info");
  // No client certificate (client-cert-auth), or a server from another CA: refused.
  r = PeerTransport::FetchClusterInfo(ParseUrls({b->Url()}), Tls(""), 2s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find(b->Url()), std::string::npos) << r.status().ToString();
  auto other = Tls("other");
  other.trusted_ca_file = dir_ + "/other-ca.crt";
  r = PeerTransport::FetchClusterInfo(ParseUrls({b->Url()}), other, 2s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace etcdw::peer_transport
