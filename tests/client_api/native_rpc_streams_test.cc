// The native RPC server's Watch and Maintenance services: watch events, status, hashes and the
// snapshot's blobs as etcd gives them (tests/diff compares with etcd itself), a watch request
// that does not parse ends its stream with grpc-go's words, and a watch client that stops
// reading makes its watchers wait in history instead of growing the server's memory, then
// receives every event.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <string>
#include <thread>
#include <vector>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcdw/member/watch_hub.h"
#include "native_rpc_fixture.h"
#include "support/await.h"
#include "support/watch_requests.h"

namespace etcdw::client_api {
namespace {

using etcdserverpb::Maintenance;
using etcdserverpb::Watch;
using etcdserverpb::WatchRequest;
using etcdserverpb::WatchResponse;

using WatchStreamPtr = std::unique_ptr<grpc::ClientReaderWriter<WatchRequest, WatchResponse>>;

// Without a start revision: what the stream tests watch is what happens after.
WatchRequest CreateWatch(const std::string& key, const std::string& end, bool prev_kv) {
  return testsupport::CreateWatch(key, end, /*start_rev=*/0, prev_kv);
}

// Reads responses until `want` events arrived; their serialized events in order.
std::vector<std::string> ReadEvents(grpc::ClientReaderWriter<WatchRequest, WatchResponse>& s,
                                    size_t want, int64_t* last_rev = nullptr) {
  std::vector<std::string> events;
  WatchResponse r;
  while (events.size() < want && s.Read(&r)) {
    for (const auto& ev : r.events()) events.push_back(ev.SerializeAsString());
    if (last_rev) *last_rev = r.header().revision();
  }
  return events;
}

using NativeRpcStreamsTest = NativeRpcServerTest;

TEST_F(NativeRpcStreamsTest, WatchDeliversEventsAndCancels) {
  StartNative();
  ASSERT_TRUE(Put(*kv_, "k0", "before").ok());
  auto native = Watch::NewStub(channel_);
  grpc::ClientContext nctx;
  WatchStreamPtr n = native->Watch(&nctx);
  ASSERT_TRUE(n->Write(CreateWatch("k", "l", true)));
  WatchResponse nc;
  ASSERT_TRUE(n->Read(&nc));
  EXPECT_TRUE(nc.created());
  EXPECT_EQ(nc.header().revision(), 2);
  EXPECT_EQ(nc.header().member_id(), server_->member_id());
  EXPECT_EQ(nc.events_size(), 0);

  ASSERT_TRUE(Put(*kv_, "k1", "one").ok());
  ASSERT_TRUE(Put(*kv_, "k0", "after").ok());
  ASSERT_TRUE(Put(*kv_, "other", "unwatched").ok());
  etcdserverpb::DeleteRangeRequest del;
  del.set_key("k1");
  etcdserverpb::DeleteRangeResponse deleted;
  ASSERT_TRUE(kv_->DeleteRange(Ctx().get(), del, &deleted).ok());
  // Responses may carry one revision or several (merged under load): the events must match.
  std::vector<std::string> ne = ReadEvents(*n, 3);
  ASSERT_EQ(ne.size(), 3u);
  std::vector<mvccpb::Event> ev(3);
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(ev[i].ParseFromString(ne[i]));
  EXPECT_EQ(ev[0].type(), mvccpb::Event::PUT);
  EXPECT_EQ(ev[0].kv().key(), "k1");
  EXPECT_EQ(ev[0].kv().mod_revision(), 3);
  EXPECT_FALSE(ev[0].has_prev_kv()) << "a new key has no previous version";
  EXPECT_EQ(ev[1].kv().value(), "after");
  EXPECT_EQ(ev[1].kv().version(), 2);
  EXPECT_EQ(ev[1].prev_kv().value(), "before") << "prev_kv delivered";
  EXPECT_EQ(ev[2].type(), mvccpb::Event::DELETE);
  EXPECT_EQ(ev[2].kv().key(), "k1");
  EXPECT_EQ(ev[2].kv().mod_revision(), 6);
  EXPECT_EQ(ev[2].prev_kv().value(), "one");

  WatchRequest cancel;
  cancel.mutable_cancel_request()->set_watch_id(nc.watch_id());
  ASSERT_TRUE(n->Write(cancel));
  ASSERT_TRUE(n->Read(&nc));
  EXPECT_TRUE(nc.canceled());
  EXPECT_EQ(nc.events_size(), 0);
  nctx.TryCancel();
  EXPECT_EQ(n->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(Put(*kv_, "k2", "served on").ok());
}

TEST_F(NativeRpcStreamsTest, AWatchRequestThatDoesNotParseEndsTheStreamWithGrpcGosWords) {
  StartNative();
  // Field 1 (create_request) announcing 100 bytes, followed by 2.
  grpc::Status st = testsupport::WatchWithRawRequest(channel_, std::string("\x0a\x64\x0a\x01", 4));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(st.error_message(), "grpc: failed to unmarshal the received message");
  EXPECT_TRUE(Put(*kv_, "k", "served on").ok());
}

// Without back-pressure from the transport, every event would be queued in the server for a
// client that does not read; with it, the stream's queue fills, its watcher falls back to
// history, and the client still gets every event, in order, once it reads.
TEST_F(NativeRpcStreamsTest, AWatchClientThatStopsReadingMakesItsWatcherWaitInHistory) {
  StartNative();
  auto watch = Watch::NewStub(NewChannel(native_->ports().at(0)));
  grpc::ClientContext ctx;
  WatchStreamPtr w = watch->Watch(&ctx);
  ASSERT_TRUE(w->Write(CreateWatch("big/", "big0", false)));
  WatchResponse created;
  ASSERT_TRUE(w->Read(&created));
  ASSERT_TRUE(created.created());

  const std::string value(1 << 20, 'v');
  constexpr int kPuts = 60;  // 60 MiB: beyond the queue, the windows and the socket buffers
  bool fell_behind = false;
  for (int i = 0; i < kPuts; ++i) {
    ASSERT_TRUE(Put(*kv_, "big/" + std::to_string(i), value).ok());
    fell_behind = fell_behind || server_->watch_hub().UnsyncedCount() > 0;
  }
  EXPECT_TRUE(fell_behind) << "the watcher should have left the synced set";

  int64_t last_rev = 0;
  std::vector<std::string> events = ReadEvents(*w, kPuts, &last_rev);
  ASSERT_EQ(events.size(), static_cast<size_t>(kPuts));
  for (int i = 0; i < kPuts; ++i) {
    mvccpb::Event ev;
    ASSERT_TRUE(ev.ParseFromString(events[i]));
    EXPECT_EQ(ev.kv().key(), "big/" + std::to_string(i));
    EXPECT_EQ(ev.kv().value().size(), value.size());
  }
  EXPECT_TRUE(testsupport::WaitUntil([&] { return server_->watch_hub().UnsyncedCount() == 0; }))
      << "caught up, synced again";
  ctx.TryCancel();
  w->Finish();
}

TEST_F(NativeRpcStreamsTest, MaintenanceAnswersAsEtcd) {
  StartNative();
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(Put(*kv_, "m/" + std::to_string(i), std::string(1000, 'a' + i % 26)).ok());
  }
  auto native = Maintenance::NewStub(channel_);

  etcdserverpb::StatusResponse ns;
  ASSERT_TRUE(native->Status(Ctx().get(), {}, &ns).ok());
  EXPECT_EQ(ns.header().revision(), 201);
  EXPECT_EQ(ns.header().member_id(), server_->member_id());
  EXPECT_EQ(ns.leader(), server_->member_id());
  EXPECT_EQ(ns.raftindex(), server_->node().CommitIndex());
  EXPECT_GT(ns.dbsize(), 200 * 1000);
  EXPECT_FALSE(ns.version().empty());

  etcdserverpb::HashKVRequest hkv;
  etcdserverpb::HashKVResponse nh;
  ASSERT_TRUE(native->HashKV(Ctx().get(), hkv, &nh).ok());
  auto direct =
      testsupport::Await<etcdserverpb::HashKVResponse>([&](auto cb) { server_->HashKV(hkv, cb); });
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  EXPECT_EQ(nh.hash(), direct->hash());
  EXPECT_NE(nh.hash(), 0u);
  EXPECT_EQ(nh.header().revision(), 201);

  etcdserverpb::AlarmRequest alarms;
  alarms.set_action(etcdserverpb::AlarmRequest::GET);
  etcdserverpb::AlarmResponse na;
  ASSERT_TRUE(native->Alarm(Ctx().get(), alarms, &na).ok());
  EXPECT_EQ(na.alarms_size(), 0);
  EXPECT_FALSE(na.has_header()) << "etcd answers alarms without a header";

  etcdserverpb::DefragmentResponse defrag;
  ASSERT_TRUE(native->Defragment(Ctx().get(), {}, &defrag).ok());
  EXPECT_FALSE(defrag.has_header());

  // The snapshot as etcd streams it: blobs of at most 32 KiB, remaining_bytes counting the data
  // still to come, then the data's SHA-256 (remaining 0); no headers.
  grpc::ClientContext ctx;
  auto reader = native->Snapshot(&ctx, {});
  std::vector<etcdserverpb::SnapshotResponse> msgs;
  etcdserverpb::SnapshotResponse r;
  while (reader->Read(&r)) msgs.push_back(r);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_GT(msgs.size(), 3u) << "200 KB come in several blobs";
  uint64_t total = 0;
  for (size_t i = 0; i + 1 < msgs.size(); ++i) total += msgs[i].blob().size();
  std::string data;
  for (size_t i = 0; i + 1 < msgs.size(); ++i) {
    EXPECT_FALSE(msgs[i].has_header());
    EXPECT_EQ(msgs[i].blob().size(), std::min<uint64_t>(32 * 1024, total - data.size()));
    data += msgs[i].blob();
    EXPECT_EQ(msgs[i].remaining_bytes(), total - data.size());
  }
  const etcdserverpb::SnapshotResponse& last = msgs.back();
  EXPECT_EQ(last.remaining_bytes(), 0u);
  ASSERT_EQ(last.blob().size(), 32u);
  unsigned char sha[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), sha);
  EXPECT_EQ(last.blob(), std::string(reinterpret_cast<const char*>(sha), sizeof sha));
}

TEST_F(NativeRpcStreamsTest, ASnapshotClientLeavingMidwayLeavesTheServerServing) {
  StartNative();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(Put(*kv_, "s/" + std::to_string(i), std::string(10000, 'x')).ok());
  }
  auto stub = Maintenance::NewStub(channel_);
  for (int round = 0; round < 5; ++round) {
    grpc::ClientContext ctx;
    auto reader = stub->Snapshot(&ctx, {});
    etcdserverpb::SnapshotResponse r;
    ASSERT_TRUE(reader->Read(&r));
    EXPECT_GT(r.remaining_bytes(), 0u);
    ctx.TryCancel();
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(Put(*kv_, "k", "served on").ok());
}

}  // namespace
}  // namespace etcdw::client_api
