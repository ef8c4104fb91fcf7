// Watch requests for tests that drive Watch streams (the diff suite, the client API's stream
// tests, the command-line tests), and a raw one. Header-only.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "etcd/etcdserverpb/rpc.pb.h"

namespace etcdw::testsupport {

inline etcdserverpb::WatchRequest CreateWatch(const std::string& key, const std::string& end = "",
                                              int64_t start_rev = 0, bool prev_kv = false,
                                              int64_t watch_id = 0) {
  etcdserverpb::WatchRequest req;
  auto* c = req.mutable_create_request();
  c->set_key(key);
  c->set_range_end(end);
  c->set_start_revision(start_rev);
  c->set_prev_kv(prev_kv);
  c->set_watch_id(watch_id);
  return req;
}

inline etcdserverpb::WatchRequest CancelWatch(int64_t watch_id) {
  etcdserverpb::WatchRequest req;
  req.mutable_cancel_request()->set_watch_id(watch_id);
  return req;
}

inline etcdserverpb::WatchRequest ProgressRequest() {
  etcdserverpb::WatchRequest req;
  req.mutable_progress_request();
  return req;
}

// Sends `bytes` as the first message of a new Watch stream on `channel`, expects no response,
// and returns how the server ended the stream.
inline grpc::Status WatchWithRawRequest(const std::shared_ptr<grpc::Channel>& channel,
                                        const std::string& bytes) {
  grpc::CompletionQueue cq;
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = stub.PrepareCall(&ctx, "/etcdserverpb.Watch/Watch", &cq);
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
  grpc::Slice slice(bytes);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  step(2);
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(3));
  EXPECT_FALSE(step(3)) << "a response to the raw request";
  grpc::Status st;
  call->Finish(&st, reinterpret_cast<void*>(4));
  step(4);
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  return st;
}

}  // namespace etcdw::testsupport
