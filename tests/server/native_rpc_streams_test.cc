// The native RPC server's Watch and Maintenance services: answers as the gRPC library's server
// gives them (watch events, status, hashes, snapshot bytes), a watch request that does not parse
// ends its stream with grpc-go's words, and a watch client that stops reading makes its watchers
// wait in history instead of growing the server's memory, then receives every event.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcdw/server/watch_hub.h"
#include "native_rpc_fixture.h"

namespace etcdw::server {
namespace {

using etcdserverpb::Maintenance;
using etcdserverpb::Watch;
using etcdserverpb::WatchRequest;
using etcdserverpb::WatchResponse;

using WatchStreamPtr = std::unique_ptr<grpc::ClientReaderWriter<WatchRequest, WatchResponse>>;

WatchRequest CreateWatch(const std::string& key, const std::string& end, bool prev_kv) {
  WatchRequest req;
  auto* c = req.mutable_create_request();
  c->set_key(key);
  c->set_range_end(end);
  c->set_prev_kv(prev_kv);
  return req;
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

class NativeRpcStreamsTest : public NativeRpcServerTest {
 protected:
  void StartBoth() {
    StartNative();
    auto g = GrpcServer::Start(*server_);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    grpc_ = std::move(g).value();
    via_grpc_ = NewChannel(grpc_->ports().at(0));
  }
  std::shared_ptr<grpc::Channel> via_grpc_;
};

TEST_F(NativeRpcStreamsTest, WatchAnswersAsTheGrpcLibrarysServerDoes) {
  StartBoth();
  ASSERT_TRUE(Put(*kv_, "k0", "before").ok());
  auto native = Watch::NewStub(channel_);
  auto library = Watch::NewStub(via_grpc_);
  grpc::ClientContext nctx, lctx;
  WatchStreamPtr n = native->Watch(&nctx);
  WatchStreamPtr l = library->Watch(&lctx);
  for (auto* s : {n.get(), l.get()}) ASSERT_TRUE(s->Write(CreateWatch("k", "l", true)));
  WatchResponse nc, lc;
  ASSERT_TRUE(n->Read(&nc));
  ASSERT_TRUE(l->Read(&lc));
  EXPECT_TRUE(nc.created());
  EXPECT_EQ(nc.SerializeAsString(), lc.SerializeAsString());

  ASSERT_TRUE(Put(*kv_, "k1", "one").ok());
  ASSERT_TRUE(Put(*kv_, "k0", "after").ok());
  ASSERT_TRUE(Put(*kv_, "other", "unwatched").ok());
  etcdserverpb::DeleteRangeRequest del;
  del.set_key("k1");
  etcdserverpb::DeleteRangeResponse deleted;
  ASSERT_TRUE(kv_->DeleteRange(Ctx().get(), del, &deleted).ok());
  // Responses may carry one revision or several (merged under load): the events must match.
  std::vector<std::string> ne = ReadEvents(*n, 3), le = ReadEvents(*l, 3);
  ASSERT_EQ(ne.size(), 3u);
  EXPECT_EQ(ne, le);
  mvccpb::Event prev_checked;
  ASSERT_TRUE(prev_checked.ParseFromString(ne[1]));
  EXPECT_EQ(prev_checked.prev_kv().value(), "before") << "prev_kv delivered";

  WatchRequest cancel;
  cancel.mutable_cancel_request()->set_watch_id(nc.watch_id());
  for (auto* s : {n.get(), l.get()}) ASSERT_TRUE(s->Write(cancel));
  ASSERT_TRUE(n->Read(&nc));
  ASSERT_TRUE(l->Read(&lc));
  EXPECT_TRUE(nc.canceled());
  EXPECT_EQ(nc.SerializeAsString(), lc.SerializeAsString());
  nctx.TryCancel();
  EXPECT_EQ(n->Finish().error_code(), grpc::StatusCode::CANCELLED);
  lctx.TryCancel();
  l->Finish();
  EXPECT_TRUE(Put(*kv_, "k2", "served on").ok());
}

TEST_F(NativeRpcStreamsTest, AWatchRequestThatDoesNotParseEndsTheStreamWithGrpcGosWords) {
  StartNative();
  grpc::CompletionQueue cq;
  grpc::GenericStub stub(channel_);
  auto ctx = Ctx();
  auto call = stub.PrepareCall(ctx.get(), "/etcdserverpb.Watch/Watch", &cq);
  auto step = [&cq](intptr_t want) {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_EQ(cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + std::chrono::seconds(10)),
              grpc::CompletionQueue::GOT_EVENT);
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), want);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  step(1);
  // Field 1 (create_request) announcing 100 bytes, followed by 2.
  grpc::Slice slice(std::string("\x0a\x64\x0a\x01", 4));
  grpc::ByteBuffer out(&slice, 1), in;
  call->Write(out, reinterpret_cast<void*>(2));
  step(2);
  call->Read(&in, reinterpret_cast<void*>(3));
  EXPECT_FALSE(step(3)) << "no response to a request that does not parse";
  grpc::Status st;
  call->Finish(&st, reinterpret_cast<void*>(4));
  step(4);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(st.error_message(), "grpc: failed to unmarshal the received message");
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
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
  for (int i = 0; i < 500 && server_->watch_hub().UnsyncedCount() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->watch_hub().UnsyncedCount(), 0u) << "caught up, synced again";
  ctx.TryCancel();
  w->Finish();
}

TEST_F(NativeRpcStreamsTest, MaintenanceAnswersAsTheGrpcLibrarysServerDoes) {
  StartBoth();
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(Put(*kv_, "m/" + std::to_string(i), std::string(1000, 'a' + i % 26)).ok());
  }
  auto native = Maintenance::NewStub(channel_);
  auto library = Maintenance::NewStub(via_grpc_);

  etcdserverpb::StatusResponse ns, ls;
  ASSERT_TRUE(native->Status(Ctx().get(), {}, &ns).ok());
  ASSERT_TRUE(library->Status(Ctx().get(), {}, &ls).ok());
  EXPECT_EQ(ns.SerializeAsString(), ls.SerializeAsString());
  EXPECT_EQ(ns.header().revision(), 201);

  etcdserverpb::HashKVRequest hkv;
  etcdserverpb::HashKVResponse nh, lh;
  ASSERT_TRUE(native->HashKV(Ctx().get(), hkv, &nh).ok());
  ASSERT_TRUE(library->HashKV(Ctx().get(), hkv, &lh).ok());
  EXPECT_EQ(nh.SerializeAsString(), lh.SerializeAsString());
  EXPECT_NE(nh.hash(), 0u);

  etcdserverpb::AlarmRequest alarms;
  alarms.set_action(etcdserverpb::AlarmRequest::GET);
  etcdserverpb::AlarmResponse na, la;
  ASSERT_TRUE(native->Alarm(Ctx().get(), alarms, &na).ok());
  ASSERT_TRUE(library->Alarm(Ctx().get(), alarms, &la).ok());
  EXPECT_EQ(na.SerializeAsString(), la.SerializeAsString());
  EXPECT_FALSE(na.has_header()) << "etcd answers alarms without a header";

  etcdserverpb::DefragmentResponse defrag;
  ASSERT_TRUE(native->Defragment(Ctx().get(), {}, &defrag).ok());
  EXPECT_FALSE(defrag.has_header());

  // The snapshot: the same messages, blob sizes and remaining_bytes included.
  auto snapshot = [](Maintenance::Stub& stub) {
    grpc::ClientContext ctx;
    auto reader = stub.Snapshot(&ctx, {});
    std::vector<std::string> msgs;
    etcdserverpb::SnapshotResponse r;
    while (reader->Read(&r)) msgs.push_back(r.SerializeAsString());
    EXPECT_TRUE(reader->Finish().ok());
    return msgs;
  };
  std::vector<std::string> nsnap = snapshot(*native), lsnap = snapshot(*library);
  EXPECT_GT(nsnap.size(), 3u) << "200 KB come in several blobs";
  EXPECT_EQ(nsnap, lsnap);
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
}  // namespace etcdw::server
