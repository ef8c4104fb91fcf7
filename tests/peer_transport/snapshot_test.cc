// Snapshots on their own connection: streamed in chunks beside the message stream, and every way
// a transfer fails reported to the sender.
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
#include "peer_transport/peer_transport_fixture.h"

namespace etcdw::peer_transport {
namespace {

using namespace std::chrono_literals;

TEST(PeerTransportTest, StreamsSnapshotInChunks) {
  auto a = StartMember(Options(1));
  auto b = StartMember(Options(2));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  constexpr size_t kSize = (6 << 20) + 12345;
  a->transport->SendSnapshot(SnapMsg(1, 2, 777), std::make_unique<PatternSource>(kSize, 7));
  // Messages keep flowing on their own stream meanwhile.
  a->transport->Send({Msg(1, 2, 1)});
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 1; }, 60s));
  ASSERT_EQ(b->rec->SnapshotsReceived(), 1u);
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 1; }));
  std::lock_guard<std::mutex> lock(b->rec->mu);
  EXPECT_EQ(a->rec->snapshots_sent[0], std::make_pair(uint64_t{2}, true));
  EXPECT_EQ(b->rec->snapshots_received[0].snapshot().metadata().index(), 777u);
  EXPECT_EQ(b->rec->snapshots_received[0].type(), raftpb::MSG_SNAP);
  EXPECT_EQ(b->rec->sink_bytes, kSize);
  EXPECT_EQ(b->rec->sink_crc, SnapCrc(kSize, 7));
  EXPECT_LE(b->rec->sink_max_chunk, 256u << 10);
  EXPECT_TRUE(b->rec->finished_before_delivery);
  EXPECT_EQ(b->rec->sinks_abandoned, 0);
}

TEST(PeerTransportTest, SnapshotFailuresAreReported) {
  auto a = StartMember(Options(1));
  auto b = StartMember(Options(2));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});

  // The source fails midway: the sender reports failure, the receiver abandons its sink.
  a->transport->SendSnapshot(SnapMsg(1, 2, 5),
                             std::make_unique<PatternSource>(4 << 20, 1, /*fail_at=*/1 << 20));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 1; }));
  ASSERT_TRUE(WaitUntil([&] { return b->rec->Abandoned() == 1; }));
  EXPECT_EQ(b->rec->SnapshotsReceived(), 0u);

  // The receiver refuses it.
  b->rec->refuse_snapshots = true;
  a->transport->SendSnapshot(SnapMsg(1, 2, 6), std::make_unique<PatternSource>(1 << 20, 2));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 2; }));

  // An unknown peer, and a message that is not a MsgSnap.
  a->transport->SendSnapshot(SnapMsg(1, 9, 7), std::make_unique<PatternSource>(10, 3));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 3; }));
  a->transport->SendSnapshot(Msg(1, 2, 8), std::make_unique<PatternSource>(10, 3));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 4; }));

  std::lock_guard<std::mutex> lock(a->rec->mu);
  EXPECT_EQ(a->rec->snapshots_sent[0], std::make_pair(uint64_t{2}, false));
  EXPECT_EQ(a->rec->snapshots_sent[1], std::make_pair(uint64_t{2}, false));
  EXPECT_EQ(a->rec->snapshots_sent[2], std::make_pair(uint64_t{9}, false));
  EXPECT_EQ(a->rec->snapshots_sent[3], std::make_pair(uint64_t{2}, false));
  EXPECT_EQ(b->rec->SnapshotsReceived(), 0u);
}

}  // namespace
}  // namespace etcdw::peer_transport
