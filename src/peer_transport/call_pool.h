// Calls to one member (PeerTransport::Call): CallPool keeps the call connections to that member
// (CallConn, each dialing or established), picks one per call, writes the request, reads the
// answers and completes each call (PendingCall) with its answer, a transport error or its
// deadline. A Peer owns its CallPool, which runs on the Peer's strand.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "clock_timer.h"
#include "dial.h"
#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/peer_transport/peer_transport.h"
#include "frame_buffer.h"
#include "stream.h"
#include "transport_common.h"

namespace etcdw::peer_transport {

class TransportImpl;

// CallPool: the call connections to one member. Everything but Call() and stats() runs on the
// pool's strand (its Peer's), or on Stop()'s thread once the transport threads are joined.

struct CallConn;

struct PendingCall {
  PendingCall(const Executor& ex, const common::Clock* clock, uint64_t id, CallDone done)
      : id(id), done(std::move(done)), timer(ex, clock) {}
  const uint64_t id;
  CallDone done;  // null once completed
  ClockTimer timer;
  std::weak_ptr<CallConn> conn;
};

struct CallConn {
  CallConn(const Executor& ex, const common::Clock* clock, size_t max_payload)
      : in(max_payload), idle_timer(ex, clock) {}
  bool established = false;  // the handshake was accepted
  bool closed = false;
  std::shared_ptr<DialOp> dial;
  std::shared_ptr<Stream> stream;
  // The calls sent (or about to be) on this connection and not yet completed.
  std::unordered_map<uint64_t, std::shared_ptr<PendingCall>> calls;
  std::string pending;  // request frames not yet handed to the socket
  std::string writing;  // the frames of the write in flight
  bool write_active = false;
  FrameBuffer in;  // answers read and not yet handled
  ClockTimer idle_timer;
  uint64_t idle_gen = 0;  // bumped whenever the idle timer is re-armed or disarmed
};

// No lock: the fields below are the strand's, except the atomic counters stats() reads.
class CallPool : public std::enable_shared_from_this<CallPool> {
 public:
  CallPool(TransportImpl* t, uint64_t peer, Executor ex) : t_(t), peer_(peer), ex_(std::move(ex)) {}
  // From any thread, with the transport's Life lock held (the post is then always served).
  // The deadline counts from now, not from when the pool's strand gets to the call.
  void Call(std::vector<common::Url> urls, uint32_t method, std::string payload,
            milliseconds timeout, CallDone done);
  // Closes every connection and fails every call (Unavailable); later calls fail at once.
  void Close();
  CallConnectionStats stats() const { return {open_.load(), established_.load()}; }

 private:
  void Start(const std::vector<common::Url>& urls, uint32_t method, const std::string& payload,
             milliseconds timeout, TimePoint deadline, CallDone done);
  void Dial(const std::shared_ptr<CallConn>& c, std::vector<common::Url> urls);
  void OnDialed(const std::shared_ptr<CallConn>& c, Status st, std::shared_ptr<Stream> s);
  void WriteMore(const std::shared_ptr<CallConn>& c);
  // Reads more answers, then completes their calls (OnAnswers).
  void ReadAnswers(const std::shared_ptr<CallConn>& c);
  void OnAnswers(const std::shared_ptr<CallConn>& c);
  // False when `c` was lost (a corrupt answer).
  bool OnAnswer(const std::shared_ptr<CallConn>& c, const Frame& f);
  // Logs why `c` is out of step and closes it (Lost).
  void Corrupt(const std::shared_ptr<CallConn>& c, const Status& why);
  void TimedOut(const std::shared_ptr<PendingCall>& call, milliseconds timeout);
  // Closes `c` and fails its calls with `why`.
  void Lost(const std::shared_ptr<CallConn>& c, const Status& why);
  // Arms the idle timer of an established connection without calls.
  void MaybeIdle(const std::shared_ptr<CallConn>& c);
  void Complete(PendingCall& call, Status st, std::string payload);

  TransportImpl* t_;
  const uint64_t peer_;
  Executor ex_;
  bool closed_ = false;
  uint64_t next_id_ = 0;
  std::vector<std::shared_ptr<CallConn>> conns_;  // dialing or established
  std::atomic<size_t> open_{0};                   // atomic: read by stats() from any thread
  std::atomic<uint64_t> established_{0};          // atomic: read by stats() from any thread
};

}  // namespace etcdw::peer_transport
