// Peer: the outbound message stream to one member (PeerTransport::Send): the queue of encoded
// messages, dialing with capped exponential backoff, the writes, and the reports of dropped
// messages (on_unreachable). A Peer also owns the member's CallPool, on the same strand.
#pragma once

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "call_pool.h"
#include "clock_timer.h"
#include "dial.h"
#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/raft.pb.h"
#include "stream.h"
#include "transport_common.h"

namespace etcdw::peer_transport {

class TransportImpl;

// Peer: the outbound message stream to one member.

class Peer : public Closable, public std::enable_shared_from_this<Peer> {
 public:
  Peer(TransportImpl* t, uint64_t id, std::vector<common::Url> urls, Executor ex);
  void Start() {
    asio::post(ex_, [self = shared_from_this()] { self->Dial(); });
  }
  // From any thread.
  void Enqueue(const std::vector<const raftpb::Message*>& msgs);
  void SetUrls(std::vector<common::Url> urls);
  std::vector<common::Url> urls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return urls_;
  }
  bool connected() const { return connected_.load(); }
  const std::shared_ptr<CallPool>& calls() const { return calls_; }
  // Stops dialing and closes the stream; queued messages are discarded without a report. Calls
  // in flight fail (Unavailable).
  void Remove() {
    asio::post(ex_, [self = shared_from_this()] { self->Close(); });
  }
  void Close() override;

 private:
  enum class State { kDialing, kConnected, kBackoff, kRemoved };

  void Dial();
  void OnDialed(Status st, std::shared_ptr<Stream> s);
  void OnBackoffTimer();
  void StartRead();
  void MaybeWrite();
  void Lost(const std::string& why);
  // Drops the queue; true when on_unreachable should be reported now.
  bool DropQueueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether on_unreachable may be reported at `now` (at most once per kUnreachableInterval).
  bool ShouldReportLocked(TimePoint now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PostUnreachable();

  // Set by the constructor, read-only after.
  TransportImpl* t_;
  const uint64_t id_;
  Executor ex_;

  // Shared with Send() callers.
  mutable std::mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kDialing;
  std::vector<common::Url> urls_ ABSL_GUARDED_BY(mu_);
  // Encoded frames not yet handed to the socket.
  std::string pending_ ABSL_GUARDED_BY(mu_);
  size_t pending_count_ ABSL_GUARDED_BY(mu_) = 0;
  // A MaybeWrite is posted or a write is in flight.
  bool write_scheduled_ ABSL_GUARDED_BY(mu_) = false;
  TimePoint last_report_ ABSL_GUARDED_BY(mu_);  // epoch: never
  std::atomic<bool> connected_{false};  // atomic: written on the strand, read by Connected()

  // Strand only (no lock).
  std::shared_ptr<DialOp> dial_;
  std::shared_ptr<Stream> stream_;
  ClockTimer backoff_timer_;
  int failures_ = 0;
  bool ever_connected_ = false;
  std::string writing_;  // the frames of the write in flight
  bool write_active_ = false;

  const std::shared_ptr<CallPool> calls_;  // on the same strand
};

}  // namespace etcdw::peer_transport
