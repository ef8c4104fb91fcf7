// Counting the client API's calls for /metrics (etcd's grpc_server_* and
// etcd_network_client_grpc_*_bytes_total), as go-grpc-prometheus counts them: a call started,
// each message received and sent, and the status it was handled with. Unary calls are counted
// by MethodTable; streams by wrapping their sink and call in the two classes below.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "etcdw/member/server_metrics.h"
#include "grpc_wire.h"
#include "stream_call.h"

namespace etcdw::client_api {

// What one method's counters and the member's byte counters are, together.
struct CallStats {
  member::GrpcMethodStats* method;
  member::ServerMetrics* server;

  void Received(size_t payload_bytes) const {
    method->msg_received.Add();
    server->grpc_received_bytes.Add(payload_bytes);
  }
  // `framed`: a message with its length prefix.
  void Sent(const std::string& framed) const {
    method->msg_sent.Add();
    server->grpc_sent_bytes.Add(framed.size() - std::min(framed.size(), kMessagePrefixBytes));
  }
  void Handled(const Status& st) const {
    method->handled[static_cast<size_t>(st.code()) % method->handled.size()].Add();
  }
};

// A stream's sink that counts what the server sends and how the stream ends (once).
class CountingSink final : public StreamSink {
 public:
  CountingSink(std::shared_ptr<StreamSink> inner, CallStats stats)
      : inner_(std::move(inner)), stats_(stats) {}
  void Send(std::string framed, Written written) override {
    stats_.Sent(framed);
    inner_->Send(std::move(framed), std::move(written));
  }
  void Finish(const Status& st) override {
    if (!ended_.exchange(true)) stats_.Handled(st);
    inner_->Finish(st);
  }
  // The stream went away without Finish (the client cancelled, or its connection closed):
  // counted as Canceled, as grpc-go reports such a handler's end.
  void Gone() {
    if (!ended_.exchange(true)) stats_.Handled(Status(Code::kCanceled, "gone"));
  }

 private:
  std::shared_ptr<StreamSink> inner_;
  CallStats stats_;
  std::atomic<bool> ended_{false};
};

// A stream's call that counts the messages the client sends.
class CountingCall final : public StreamCall {
 public:
  CountingCall(std::unique_ptr<StreamCall> inner, std::shared_ptr<CountingSink> sink,
               CallStats stats)
      : inner_(std::move(inner)), sink_(std::move(sink)), stats_(stats) {}
  void OnMessage(std::string_view payload) override {
    stats_.Received(payload.size());
    inner_->OnMessage(payload);
  }
  void OnHalfClose() override { inner_->OnHalfClose(); }
  void OnGone() override {
    inner_->OnGone();
    sink_->Gone();
  }

 private:
  std::unique_ptr<StreamCall> inner_;
  std::shared_ptr<CountingSink> sink_;
  CallStats stats_;
};

}  // namespace etcdw::client_api
