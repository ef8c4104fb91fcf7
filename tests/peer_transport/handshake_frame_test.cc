// The handshake and the frames, checked by hand with a plain socket following the wire format
// documented in peer_transport.h: rejections and their reasons, the handshake timeout (on the
// clock), corrupt and oversized frames, call and cluster-information frames, and a listen port
// already in use.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/peer_transport/peer_transport.h"
#include "peer_transport/observed_clock.h"
#include "peer_transport/peer_transport_fixture.h"

namespace etcdw::peer_transport {
namespace {

using namespace std::chrono_literals;

TEST(PeerTransportTest, RefusesPortInUse) {
  auto b = StartMember(Options(2));
  ASSERT_TRUE(b);
  const std::string url = "http://127.0.0.1:" + std::to_string(b->transport->ports().at(0));
  auto r = PeerTransport::Start(Options(3, url), MakeHandler(std::make_shared<Recorder>()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(url), std::string::npos) << r.status().ToString();
}

TEST(PeerTransportTest, WrongClusterOrReceiverIsRejected) {
  auto a_opts = Options(1);
  a_opts.cluster_id = kClusterId + 1;
  auto a = StartMember(a_opts);
  auto b = StartMember(Options(2));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  a->transport->Send({Msg(1, 2, 1)});
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) > 0; }));
  EXPECT_FALSE(a->transport->Connected(2));
  EXPECT_EQ(b->rec->MessageCount(), 0u);

  // By hand: the acknowledgement names the reason, then the receiver closes.
  const int port = b->transport->ports().at(0);
  {
    RawConn c(port);
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId + 1, 1, 2)));
    EXPECT_EQ(ReadAck(c), 2);  // cluster ID mismatch
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 7)));
    EXPECT_EQ(ReadAck(c), 3);  // not the receiver
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2, /*kind=*/9)));
    EXPECT_EQ(ReadAck(c), 4);  // unknown stream kind
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);  // not our protocol at all
    ASSERT_TRUE(c.Write("GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789"));
    EXPECT_TRUE(c.WaitClosed());
  }
  EXPECT_EQ(b->rec->MessageCount(), 0u);
}

TEST(PeerTransportTest, HandWrittenFramesFollowTheWireFormat) {
  auto b = StartMember(Options(2));
  ASSERT_TRUE(b);
  RawConn c(b->transport->ports().at(0));
  ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2)));
  ASSERT_EQ(ReadAck(c), 0);
  std::string frames;
  for (uint64_t i = 1; i <= 3; ++i) frames += FrameBytes(1, Msg(1, 2, i, 10).SerializeAsString());
  ASSERT_TRUE(c.Write(frames));
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 3; }));
  EXPECT_EQ(b->rec->Indexes(), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(PeerTransportTest, CorruptFrameClosesTheConnection) {
  auto b = StartMember(Options(2));
  ASSERT_TRUE(b);
  const int port = b->transport->ports().at(0);
  {
    RawConn c(port);
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2)));
    ASSERT_EQ(ReadAck(c), 0);
    std::string good = FrameBytes(1, Msg(1, 2, 1).SerializeAsString());
    std::string bad = FrameBytes(1, Msg(1, 2, 2).SerializeAsString());
    bad.back() ^= 0x40;  // payload no longer matches its checksum
    ASSERT_TRUE(c.Write(good + bad + FrameBytes(1, Msg(1, 2, 3).SerializeAsString())));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);  // a checksum-correct frame whose payload is not a message
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2)));
    ASSERT_EQ(ReadAck(c), 0);
    ASSERT_TRUE(c.Write(FrameBytes(1, std::string("\xff\xff\xff\xff\xff", 5))));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);  // a frame type a message stream does not carry
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2)));
    ASSERT_EQ(ReadAck(c), 0);
    ASSERT_TRUE(c.Write(FrameBytes(3, "chunk")));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);  // a corrupt handshake
    std::string h = HandshakeBytes(kClusterId, 1, 2);
    h[10] ^= 1;
    ASSERT_TRUE(c.Write(h));
    EXPECT_TRUE(c.WaitClosed());
  }
  EXPECT_EQ(b->rec->Indexes(), (std::vector<uint64_t>{1}));
  // The transport is unharmed.
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a);
  a->transport->AddPeer(2, {b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  a->transport->Send({Msg(1, 2, 50)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 2; }));
  // Message 3 (after the corrupt frame) never arrived, not even before this later one.
  EXPECT_EQ(b->rec->Indexes(), (std::vector<uint64_t>{1, 50}));
}

TEST(PeerTransportTest, HandshakeTimeoutFollowsTheClock) {
  ObservedClock clock;
  auto o = Options(2);
  o.clock = &clock;
  o.dial_timeout = 7s;  // the handshake timeout is max(5 s, dial_timeout)
  auto b = StartMember(o);
  ASSERT_TRUE(b);
  const auto t0 = clock.Now();
  RawConn c(b->transport->ports().at(0));  // connects, then says nothing
  ASSERT_TRUE(c.connected());
  // Just before the timeout the connection's timer looks at the clock and sleeps on, and the
  // connection is still open; at the timeout it is closed.
  ASSERT_TRUE(clock.WaitForSleep(t0 + 7s, t0));
  clock.Advance(7s - 1ms);
  ASSERT_TRUE(clock.WaitForSleep(t0 + 7s, t0 + 7s - 1ms));
  EXPECT_FALSE(c.Closed()) << "closed before the handshake timeout";
  clock.Advance(1ms);
  EXPECT_TRUE(c.WaitClosed());
}

TEST(PeerTransportTest, FrameLargerThanLimitIsRefused) {
  auto o = Options(2);
  o.max_message_bytes = 1 << 20;
  auto b = StartMember(o);
  ASSERT_TRUE(b);
  RawConn c(b->transport->ports().at(0));
  ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2)));
  ASSERT_EQ(ReadAck(c), 0);
  std::string header;
  Put32(header, (1 << 20) + 1);
  Put32(header, 0);
  header.push_back(1);
  ASSERT_TRUE(c.Write(header));  // refused on the header alone
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_EQ(b->rec->MessageCount(), 0u);
}

TEST(PeerTransportCallTest, HandWrittenCallFramesFollowTheWireFormat) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  ASSERT_TRUE(b);
  RawConn c(b->transport->ports().at(0));
  ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2, /*kind=*/3)));
  ASSERT_EQ(ReadAck(c), 0);
  // u64 call ID | u32 method | request bytes
  std::string req7, req9;
  Put64(req7, 7);
  Put32(req7, 70);
  req7 += "seven";
  Put64(req9, 9);
  Put32(req9, 90);
  ASSERT_TRUE(c.Write(FrameBytes(6, req7) + FrameBytes(6, req9)));
  ASSERT_TRUE(inbox.WaitFor(2));
  auto reqs = inbox.Take();
  EXPECT_EQ(reqs[0].method, 70u);
  EXPECT_EQ(reqs[0].payload, "seven");
  EXPECT_EQ(reqs[1].method, 90u);
  EXPECT_EQ(reqs[1].payload, "");
  reqs[1].respond(Status(Code::kPermissionDenied, "etcdserver: permission denied"), "nine");
  reqs[0].respond(Status::Ok(), "answer");
  // u64 call ID | u32 code | u32 message length | message | answer bytes, in answer order.
  auto [t1, p1] = ReadFrame(c);
  ASSERT_EQ(t1, 7);
  ASSERT_GE(p1.size(), 16u);
  EXPECT_EQ(Get64(p1, 0), 9u);
  EXPECT_EQ(Get32(p1, 8), 7u);
  ASSERT_EQ(Get32(p1, 12), 29u);
  EXPECT_EQ(p1.substr(16, 29), "etcdserver: permission denied");
  EXPECT_EQ(p1.substr(16 + 29), "nine");
  auto [t2, p2] = ReadFrame(c);
  ASSERT_EQ(t2, 7);
  EXPECT_EQ(p2.size(), 16u + 6);
  EXPECT_EQ(Get64(p2, 0), 7u);
  EXPECT_EQ(Get32(p2, 8), 0u);
  EXPECT_EQ(Get32(p2, 12), 0u);
  EXPECT_EQ(p2.substr(16), "answer");

  // A message frame on a call stream is corrupt: the connection closes.
  ASSERT_TRUE(c.Write(FrameBytes(1, Msg(1, 2, 1).SerializeAsString())));
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_EQ(b->rec->MessageCount(), 0u);
}

TEST(PeerTransportCallTest, HandWrittenClusterInfoFrameFollowsTheWireFormat) {
  // The cluster-information stream: cluster ID 0 and receiver ID 0 are accepted; one frame
  // (u32 code | u32 message length | message | information), then the receiver closes.
  auto info = StartMember(Options(3), [](PeerTransportHandler& h) {
    h.on_cluster_info = [] { return std::string("members\0!", 9); };
  });
  ASSERT_TRUE(info);
  RawConn q(info->transport->ports().at(0));
  ASSERT_TRUE(q.Write(HandshakeBytes(0, 0, 0, /*kind=*/4)));
  ASSERT_EQ(ReadAck(q), 0);
  auto [t3, p3] = ReadFrame(q);
  ASSERT_EQ(t3, 8);
  EXPECT_EQ(p3.size(), 8u + 9);
  EXPECT_EQ(Get32(p3, 0), 0u);
  EXPECT_EQ(Get32(p3, 4), 0u);
  EXPECT_EQ(p3.substr(8), std::string("members\0!", 9));
  EXPECT_TRUE(q.WaitClosed());
  // A wrong cluster ID is still refused.
  RawConn w(info->transport->ports().at(0));
  ASSERT_TRUE(w.Write(HandshakeBytes(kClusterId + 5, 0, 0, /*kind=*/4)));
  EXPECT_EQ(ReadAck(w), 2);
}

}  // namespace
}  // namespace etcdw::peer_transport
