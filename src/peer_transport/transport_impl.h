// The peer transport over Boost.Asio: one io_context run by one thread (kThreads); every
// connection, listener and peer has its own strand all the same, so its handlers would never run
// concurrently should the transport run more threads.
//
// Objects and ownership:
//   TransportImpl  owns the io_context, the TLS contexts, the listeners and the Peer table.
//   Listener       accepts connections on one listen URL and starts an InboundConn for each.
//   InboundConn    checks the handshake, then reads a message stream or receives a snapshot.
//   Peer           the outbound message stream to one member: queue, dialing, backoff, writes.
//   DialOp         one attempt to reach a member: each URL in turn, TCP/TLS, handshake, ack.
//   SnapshotSender one outbound snapshot transfer on its own connection.
//   CallPool       the call connections to one member (on its Peer's strand): pending calls, their
//                  deadlines, request writes and response reads.
//   CallResponder  the `respond` handed to on_call: posts the answer to its InboundConn.
//   ClusterInfoFetch  FetchClusterInfo's dialer, on a private io_context (no TransportImpl).
// Asynchronous handlers hold shared_ptrs to the object they complete for (and so to its Stream),
// which keeps it alive until the last of them has run. Stop() stops the io_context, joins the
// thread, closes everything on its own thread and drains the aborted handlers; handlers see
// `stopping()` and invoke no callback (except a call's `done`, which Stop() completes with
// Unavailable: a transport thread that would complete a call once Stop() has begun hands it to
// Stop() instead, so that every call outstanding then completes on Stop()'s thread). Threads
// outside the transport (Call, a late `respond`) post to the io_context only under the Life lock
// while it is alive, so that nothing they post is left unserved.
//
// Files: transport_impl.{h,cc} TransportImpl, Life, Listener and PeerTransport::Start;
// peer.{h,cc} Peer; dial.{h,cc} DialEnv and DialOp; call_pool.{h,cc} CallPool, CallConn and
// PendingCall; snapshot_sender.{h,cc} SnapshotSender; inbound_conn.{h,cc} InboundConn and
// CallResponder; tls.{h,cc} ClientTls and the TLS set-up of both sides (TransportImpl::InitTls);
// cluster_info_fetch.cc ClusterInfoFetch, StandaloneEnv and PeerTransport::FetchClusterInfo;
// transport_common.{h,cc} what they share (LogLimiter, Closable, limits, log and socket
// helpers); clock_timer.h the timers on the injected clock; frame.{h,cc} and frame_buffer.{h,cc}
// the wire format; stream.h the byte stream.
#pragma once

#include <absl/base/thread_annotations.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "clock_timer.h"
#include "dial.h"
#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/peer_transport/peer_transport.h"
#include "etcdw/raft.pb.h"
#include "frame.h"
#include "stream.h"
#include "tls.h"
#include "transport_common.h"

namespace etcdw::peer_transport {

// An inbound connection must complete TLS and the handshake within max(this, dial_timeout).
inline constexpr milliseconds kMinHandshakeTimeout{5000};

class InboundConn;
class Peer;
class TransportImpl;

// Whether the transport's io_context still serves what is posted to it. Stop() clears `alive`
// (under `mu`) before anything else; threads outside the transport post only while holding `mu`
// and seeing `alive`, so that whatever they post is run by a transport thread or by Stop()'s
// drain, and never touches a destroyed io_context.
struct Life {
  std::mutex mu;
  bool alive ABSL_GUARDED_BY(mu) = true;
};

// ---------------------------------------------------------------------------------------------
// Listener

// Everything but the constructor runs on the acceptor's strand, or on Stop()'s thread once the
// transport threads are joined.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(TransportImpl* t, common::Url url, Tcp::acceptor acceptor, const common::Clock* clock)
      : t_(t),
        url_(std::move(url)),
        acceptor_(std::move(acceptor)),
        retry_(acceptor_.get_executor(), clock) {}
  void Accept();
  void Close() {
    error_code ec;
    acceptor_.close(ec);
    retry_.Cancel();
  }
  const common::Url& url() const { return url_; }
  Executor executor() { return acceptor_.get_executor(); }

 private:
  TransportImpl* t_;
  common::Url url_;
  Tcp::acceptor acceptor_;
  ClockTimer retry_;
};

// ---------------------------------------------------------------------------------------------
// TransportImpl

class TransportImpl final : public PeerTransport, public DialEnv {
 public:
  // A null opts.clock is the system clock.
  TransportImpl(PeerTransportOptions opts, PeerTransportHandler handler)
      : opts_(std::move(opts)), handler_(std::move(handler)), limiter_(ClockOrSystem(opts_)) {
    opts_.clock = ClockOrSystem(opts_);
    work_.emplace(io_.get_executor());
  }
  ~TransportImpl() override { Stop(); }

  Status Init();
  void Run();

  std::vector<int> ports() const override { return ports_; }
  void AddPeer(uint64_t id, const std::vector<std::string>& urls) override;
  void UpdatePeer(uint64_t id, const std::vector<std::string>& urls) override { AddPeer(id, urls); }
  void RemovePeer(uint64_t id) override;
  void Send(std::vector<raftpb::Message> msgs) override;
  void SendSnapshot(raftpb::Message msg, std::unique_ptr<SnapshotSource> source) override;
  bool Connected(uint64_t peer) const override;
  void Call(uint64_t peer, uint32_t method, std::string payload, milliseconds timeout,
            CallDone done) override;
  CallConnectionStats CallStats(uint64_t peer) const override;
  void Stop() override;

  // For the connection objects.
  const PeerTransportOptions& opts() const override { return opts_; }
  bool stopping() const override { return stopping_.load(); }
  Executor NewStrand() { return asio::make_strand(io_); }
  ssl::context* server_tls() { return server_tls_ ? &*server_tls_ : nullptr; }
  ssl::context& client_tls() override { return client_tls_.Get(); }
  bool Limit(const std::string& key, uint64_t& suppressed) override {
    return limiter_.Allow(key, suppressed);
  }
  const std::shared_ptr<Life>& life() const { return life_; }
  void Track(const std::shared_ptr<Closable>& c);
  // A new message stream from `sender`: an older one from the same sender is closed.
  void RegisterInbound(uint64_t sender, const std::shared_ptr<InboundConn>& conn);
  milliseconds HandshakeTimeout() const {
    return std::max(kMinHandshakeTimeout, opts_.dial_timeout);
  }
  size_t ChunkBytes() const { return std::min(kSnapshotChunkBytes, opts_.max_message_bytes); }

  // Callbacks; never after Stop() has begun.
  void OnMessage(raftpb::Message m) {
    if (!stopping() && handler_.on_message) handler_.on_message(std::move(m));
  }
  std::unique_ptr<SnapshotSink> OnSnapshot(const raftpb::Message& m) {
    if (stopping() || !handler_.on_snapshot) return nullptr;
    return handler_.on_snapshot(m);
  }
  void OnSnapshotReceived(raftpb::Message m) {
    if (!stopping() && handler_.on_snapshot_received) handler_.on_snapshot_received(std::move(m));
  }
  void OnUnreachable(uint64_t peer) {
    if (!stopping() && handler_.on_unreachable) handler_.on_unreachable(peer);
  }
  void OnSnapshotSent(uint64_t peer, bool ok) {
    if (!stopping() && handler_.on_snapshot_sent) handler_.on_snapshot_sent(peer, ok);
  }
  // False when there is no on_call (`respond` is then untouched).
  bool OnCall(uint32_t method, std::string payload, CallDone respond) {
    if (!handler_.on_call) return false;
    if (!stopping()) handler_.on_call(method, std::move(payload), std::move(respond));
    return true;
  }
  // Runs a call's `done`; but on a transport thread once Stop() has begun, keeps it for Stop(),
  // which completes it with Unavailable on its own thread (as Call() promises).
  void CompleteCall(CallDone done, Status st, std::string payload) {
    if (stopping() && !joined_.load()) {
      std::lock_guard<std::mutex> lock(deferred_mu_);
      deferred_.push_back(std::move(done));
      return;
    }
    done(std::move(st), std::move(payload));
  }
  // Nothing without on_cluster_info or while stopping.
  std::optional<std::string> OnClusterInfo() {
    if (stopping() || !handler_.on_cluster_info) return std::nullopt;
    return handler_.on_cluster_info();
  }

 private:
  static const common::Clock* ClockOrSystem(const PeerTransportOptions& o) {
    return o.clock ? o.clock : &common::SystemClock::Instance();
  }
  Status InitTls();
  Status Listen(const common::Url& url);

  // Set by the constructor and Init() (before Run), read-only after: no lock.
  PeerTransportOptions opts_;
  PeerTransportHandler handler_;
  // Declared before the io_context so that they outlive every stream it may still hold. Set by
  // Init(), read-only after (client_tls_ loads the system's CAs once, under its own once_flag).
  std::optional<ssl::context> server_tls_;
  ClientTls client_tls_;
  asio::io_context io_;  // thread-safe
  // Constructor, Run() and Stop() only (the owner's thread, never concurrently).
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  // Set by Init(); Listener objects run on their own strands; Stop() clears the vector once the
  // transport threads are joined.
  std::vector<std::shared_ptr<Listener>> listeners_;
  std::vector<int> ports_;  // set by Init(), read-only after
  LogLimiter limiter_;      // thread-safe (its own lock)

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Peer>> peers_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, std::weak_ptr<InboundConn>> inbound_ ABSL_GUARDED_BY(mu_);

  std::mutex live_mu_;
  std::vector<std::weak_ptr<Closable>> live_ ABSL_GUARDED_BY(live_mu_);
  size_t live_sweep_at_ ABSL_GUARDED_BY(live_mu_) = 64;

  const std::shared_ptr<Life> life_ = std::make_shared<Life>();  // const pointer; Life locks
  std::atomic<bool> stopping_{false};                            // atomic
  std::atomic<bool> joined_{false};  // atomic: Stop() has joined the transport threads
  std::mutex deferred_mu_;
  // Calls a transport thread left for Stop() to complete.
  std::vector<CallDone> deferred_ ABSL_GUARDED_BY(deferred_mu_);
  std::mutex stop_mu_;  // serializes Stop() calls
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace etcdw::peer_transport
