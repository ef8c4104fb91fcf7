// The receiving side: InboundConn serves one accepted connection (started by a Listener): TLS and
// the handshake check, then the stream its kind says: messages (on_message), a snapshot
// (on_snapshot, on_snapshot_received), calls (on_call, answered through a CallResponder) or the
// cluster information (on_cluster_info).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "clock_timer.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/peer_transport/peer_transport.h"
#include "etcdw/raft.pb.h"
#include "frame.h"
#include "frame_buffer.h"
#include "stream.h"
#include "transport_common.h"
#include "transport_impl.h"

namespace etcdw::peer_transport {

// InboundConn: one accepted connection. No lock: everything runs on the connection's strand (or
// on Stop()'s thread once the transport threads are joined); threads outside the transport reach
// it only by posting (CallResponder).

class InboundConn : public Closable, public std::enable_shared_from_this<InboundConn> {
 public:
  InboundConn(TransportImpl* t, const common::Url& url, Tcp::socket sock);
  void Start();
  void Close() override;
  Executor executor() { return stream_->socket().get_executor(); }
  // The answer to call `id` (on the strand); ignored once the connection is closed.
  void QueueResponse(uint64_t id, Status st, std::string payload);

 private:
  enum class Phase {
    kHandshake,
    kMessages,
    kSnapshotHeader,
    kSnapshotData,
    kSnapshotDone,
    kCalls,
    kClusterInfo,
  };

  void ReadHello();
  void OnHello();
  void Reject(HandshakeResult r);
  void Accepted();
  // Reads more of the stream, then hands out its frames (OnFrames).
  void ReadFrames();
  // Serves every whole frame buffered, then reads more unless a frame ended the reading.
  void OnFrames();
  // Serves one frame; false when the connection is closed or expects nothing more.
  bool OnFrame(const Frame& f);
  bool OnSnapshotHeader(std::string_view payload);
  void OnSnapshotChunk(std::string_view payload);
  void OnSnapshotEnd(std::string_view payload);
  void SendResult(bool ok, const std::string& why);
  void OnCallRequest(std::string_view payload);
  void WriteResponses();
  void ServeClusterInfo();
  void Corrupt(const std::string& what);
  void Closed(const error_code& ec);

  TransportImpl* t_;
  common::Url url_;
  std::shared_ptr<Stream> stream_;
  ClockTimer timer_;
  std::string remote_;       // ip:port
  std::string remote_host_;  // ip: the key for rate-limited log lines
  Phase phase_ = Phase::kHandshake;
  bool closed_ = false;
  Handshake hs_;
  std::array<uint8_t, kHandshakeSize> hello_{};
  std::array<uint8_t, kAckSize> ack_{};
  FrameBuffer in_;
  raftpb::Message snap_msg_;
  std::unique_ptr<SnapshotSink> sink_;
  uint64_t snap_bytes_ = 0;
  uint32_t snap_crc_ = 0;
  std::string result_;
  // Call streams.
  size_t calls_in_flight_ = 0;
  std::string out_;          // response frames not yet handed to the socket
  std::string out_writing_;  // the frames of the write in flight
  bool out_active_ = false;
};

// The shared state behind the `respond` functions handed to on_call (copies share it).
class CallResponder {
 public:
  CallResponder(std::shared_ptr<Life> life, std::weak_ptr<InboundConn> conn, uint64_t id)
      : life_(std::move(life)), conn_(std::move(conn)), id_(id) {}
  CallResponder(const CallResponder&) = delete;
  CallResponder& operator=(const CallResponder&) = delete;
  // Every copy of `respond` is gone without an answer: tell the caller rather than let it wait
  // for its deadline.
  ~CallResponder() {
    if (!answered_.exchange(true)) {
      Deliver(Unavailable("the peer dropped the call without answering"), std::string());
    }
  }
  void Respond(Status st, std::string payload) {
    if (answered_.exchange(true)) {
      log::Warn("peer call answered more than once; the extra answer is ignored",
                {log::F("call-id", id_)});
      return;
    }
    Deliver(std::move(st), std::move(payload));
  }

 private:
  void Deliver(Status st, std::string payload) {
    std::lock_guard<std::mutex> lock(life_->mu);
    if (!life_->alive) return;  // the transport stopped (and may be gone)
    std::shared_ptr<InboundConn> conn = conn_.lock();
    if (!conn) return;  // the caller's connection is gone
    Executor ex = conn->executor();
    asio::post(ex, [conn = std::move(conn), id = id_, st = std::move(st),
                    payload = std::move(payload)]() mutable {
      conn->QueueResponse(id, std::move(st), std::move(payload));
    });
  }

  // Set by the constructor, read-only after; Deliver() posts only under life_->mu.
  std::shared_ptr<Life> life_;
  std::weak_ptr<InboundConn> conn_;
  const uint64_t id_;
  std::atomic<bool> answered_{false};  // atomic: copies of `respond` run on any thread
};

}  // namespace etcdw::peer_transport
