// The peer transport: Raft messages and snapshots between members, over TCP or TLS on
// listen-peer-urls (Boost.Asio), plus request/response calls between members and the cluster
// information query of a joining member.
//
// The library (src/peer_transport/, include/etcdw/peer_transport/) owns the wire between members:
// connections, the handshake, frames, TLS, backoff and deadlines. It knows nothing of the member
// that uses it (messages are raftpb messages, calls are opaque bytes) and uses only common and
// proto. The allowed graph: scripts/include-rules.txt.
//
// Wire format (src/peer_transport/frame.h), all integers big-endian. A connection starts with
// a handshake that the dialer writes:
//   u32 magic "EWPT" | u16 version (1) | u8 stream kind | u8 0 |
//   u64 cluster ID | u64 sender ID | u64 receiver ID | u32 CRC-32C of the preceding 32 bytes
// with stream kind 1 (messages), 2 (snapshot), 3 (calls) or 4 (cluster information). The receiver
// checks the version, the cluster ID and that it is the receiver (a cluster-information stream
// may also carry cluster ID 0 and receiver ID 0), and answers
//   u32 magic "EWPA" | u32 result (0 accepted, 1 version, 2 cluster ID, 3 receiver ID, 4 kind)
// closing the connection after a rejection (logged on both sides with the reason). Then frames
//   u32 length | u32 CRC-32C of the payload | u8 frame type | payload
// A corrupt frame (bad checksum, undecodable payload, unexpected type) or one longer than
// max_message_bytes closes the connection. Each member dials every peer for the messages it sends
// (one outbound stream per peer, kMessage frames only, reconnected with capped exponential
// backoff); snapshots travel on their own connection: the MsgSnap (header frame), the data in
// chunk frames of at most 256 KiB, an end frame (total bytes, CRC-32C of all of them), and the
// receiver's result frame back, so that a snapshot is never held whole in memory and never
// delays heartbeats.
//
// Calls (Call / on_call) travel on call connections, separate from the message stream so that a
// slow answer never delays Raft traffic. The caller sends request frames
//   u64 call ID | u32 method | request bytes
// and the receiver answers each exactly once, in any order, with a response frame
//   u64 call ID | u32 status code | u32 message length | message | answer bytes
// so one connection carries many calls at once. The caller keeps a small pool of call
// connections per peer: a call goes to the least loaded connection (established or still being
// dialed) with fewer than 8 calls in flight; when every connection has 8, another is dialed, up
// to max_call_connections, beyond which calls share the least loaded one. A connection without
// calls in flight for call_idle_timeout is closed. Every call has its own deadline; an answer
// arriving after it is dropped. When a connection breaks, each call on it fails (Unavailable);
// calls are never retried by the transport, since a method need not be idempotent.
//
// The cluster-information query (FetchClusterInfo / on_cluster_info) needs no transport: the
// asker dials with cluster ID 0, sender ID 0 and receiver ID 0 (or the real ones, which are then
// checked), the receiver answers one frame
//   u32 status code | u32 message length | message | serialized cluster information
// and closes the connection.
//
// Time: every timeout, deadline, backoff and rate limit above is measured on the injected clock
// (PeerTransportOptions::clock, FetchClusterInfo's `clock`; the system's steady clock unless a
// test passes a common::ManualClock): Now() dates deadlines, and the transport's timers sleep for
// what Clock::RealWaitUntil says and read Now() again before acting, so with a ManualClock nothing
// times out, backs off or is let through a rate limit until the test advances the clock. Only the
// kernel's TCP keepalive and user timeout run on real time.
//
// Threads: the transport runs its own thread. Handler callbacks run on it: those about one
// connection run one at a time, in order (those about different connections may run
// concurrently should the transport ever run more threads). Callbacks must not block: on_call
// answers later through `respond` when its answer takes time, or every connection waits. No
// callback runs after Stop() returns; Stop() must not be called from one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/common/clock.h"
#include "etcdw/common/config.h"
#include "etcdw/common/status.h"
#include "etcdw/raft.pb.h"

namespace etcdw::peer_transport {

// Where a received snapshot's bytes go (the receiving member's staging file). Called on a
// transport thread. A sink destroyed without a successful Finish (the transfer failed or the
// transport stopped) must discard what it received.
class SnapshotSink {
 public:
  virtual ~SnapshotSink() = default;
  virtual Status Write(std::string_view chunk) = 0;
  // All bytes arrived: make them durable. The MsgSnap is delivered only after this succeeds.
  virtual Status Finish() = 0;
};

// Where a sent snapshot's bytes come from (a consistent copy of the sender's state). Called on a
// transport thread, one chunk at a time; destroyed when the transfer ends.
class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;
  // Appends the next chunk (up to max_bytes) to `out`; false at the end (a last chunk may be
  // appended by the call that returns false). An error fails the transfer.
  virtual Result<bool> Next(std::string& out, size_t max_bytes) = 0;
};

struct PeerTransportOptions {
  uint64_t local_id = 0;
  uint64_t cluster_id = 0;
  std::vector<common::Url> listen_urls;          // listen-peer-urls
  common::TlsConfig tls;                         // peer-transport-security (used for https URLs)
  size_t max_message_bytes = 64 << 20;           // larger frames are refused
  size_t max_queued_messages = 4096;             // per peer; beyond it messages are dropped
  std::chrono::milliseconds dial_timeout{1000};  // per URL: connect, TLS and handshake
  std::chrono::milliseconds max_backoff{2000};   // redial delay: 100 ms doubling up to this
  size_t max_call_connections = 4;               // per peer (at least 1)
  std::chrono::milliseconds call_idle_timeout{30000};  // an unused call connection is closed
  // Where time comes from (see "Time" above); must outlive the transport. Null: SystemClock.
  const common::Clock* clock = &common::SystemClock::Instance();
};

struct PeerTransportHandler {
  // A Raft message arrived from a peer (called on a transport thread).
  std::function<void(raftpb::Message)> on_message;
  // A MsgSnap is arriving: returns the sink for its data, or null to refuse it.
  std::function<std::unique_ptr<SnapshotSink>(const raftpb::Message&)> on_snapshot;
  // The MsgSnap whose data is now durable in the sink returned for it.
  std::function<void(raftpb::Message)> on_snapshot_received;
  // Messages to `peer` were dropped (peer unreachable, queue full, message too large); the node
  // reports it to Raft. At most one call per peer per 200 ms.
  std::function<void(uint64_t peer)> on_unreachable;
  // A snapshot sent to `peer` finished (ok: the receiver made it durable and delivered the
  // MsgSnap) or failed. Once per SendSnapshot, unless Stop() comes first.
  std::function<void(uint64_t peer, bool ok)> on_snapshot_sent;
  // A peer calls `method` here; answer by calling `respond` exactly once, from any thread (it may
  // be later, e.g. after a Raft round). on_call itself must return promptly: it runs on the
  // transport's thread, which every connection waits for. The status (code and message) and the
  // answer reach the caller verbatim. `respond` may be copied; only its first invocation counts.
  // Destroying every copy without calling it answers Unavailable ("the peer dropped the call").
  // After Stop(), or once the caller's connection is gone, `respond` does nothing (it stays safe to
  // call, even after the transport is destroyed). An answer larger than max_message_bytes is
  // replaced by a ResourceExhausted error. Without on_call, calls fail with Unimplemented.
  std::function<void(uint32_t method, std::string payload,
                     std::function<void(etcdw::Status, std::string)> respond)>
      on_call;
  // A member (possibly one joining, without cluster ID) asks for this member's view of the
  // cluster: return the serialized answer (the lead fills it with cluster ID and members).
  // Without it, the asker gets Unavailable.
  std::function<std::string()> on_cluster_info;
};

// Open call connections to one peer, and how many were established since the transport started
// (for metrics and tests).
struct CallConnectionStats {
  size_t open = 0;
  uint64_t established = 0;
};

class PeerTransport {
 public:
  static Result<std::unique_ptr<PeerTransport>> Start(PeerTransportOptions opts,
                                                      PeerTransportHandler handler);
  virtual ~PeerTransport() = default;

  // The ports actually bound, in listen_urls order (useful with port 0).
  virtual std::vector<int> ports() const = 0;

  // Peers and their URLs (initial-cluster, then membership changes). AddPeer of a known peer
  // updates its URLs, as UpdatePeer does; new URLs are used from the next dial (at once if the
  // peer is unreachable). Invalid URLs are logged and ignored. RemovePeer discards its queue.
  virtual void AddPeer(uint64_t id, const std::vector<std::string>& urls) = 0;
  virtual void UpdatePeer(uint64_t id, const std::vector<std::string>& urls) = 0;
  virtual void RemovePeer(uint64_t id) = 0;

  // Queues messages for their recipients; never blocks. MsgSnap messages must go through
  // SendSnapshot instead. Messages to one peer are delivered in order; they are queued while
  // its stream is being dialed and dropped (on_unreachable) while it is unreachable, when the
  // stream breaks, when the queue is full, or when larger than max_message_bytes. Messages to
  // unknown peers are dropped.
  virtual void Send(std::vector<raftpb::Message> msgs) = 0;
  // Streams a snapshot: the MsgSnap header, then the source's bytes in chunks.
  virtual void SendSnapshot(raftpb::Message msg, std::unique_ptr<SnapshotSource> source) = 0;

  // Whether the outbound stream to `peer` is currently established (handshake accepted).
  virtual bool Connected(uint64_t peer) const = 0;

  // Calls `method` on `peer`; `done` runs exactly once, on a transport thread: with the answer, a
  // transport error (Unavailable) or a timeout (DeadlineExceeded). The answer's Status (code and
  // message) travels verbatim, so etcd error strings reach the client unchanged. Never blocks.
  // Unavailable covers: unknown peer, peer unreachable, connection lost before the answer (the
  // method may or may not have run), peer removed. A request larger than max_message_bytes fails
  // with ResourceExhausted. Calls outstanding when Stop() begins complete with Unavailable on
  // Stop()'s thread before it returns; after Stop(), Call() runs `done` at once on the calling
  // thread with Unavailable. `done` must not call Stop().
  virtual void Call(uint64_t peer, uint32_t method, std::string payload,
                    std::chrono::milliseconds timeout,
                    std::function<void(etcdw::Status, std::string)> done) = 0;
  virtual CallConnectionStats CallStats(uint64_t peer) const = 0;

  // Asks the member at one of `urls` (tried in order) for its cluster information. No cluster ID
  // or member ID needed. Blocks the calling thread (the transport need not be running). `tls` is
  // used for https URLs: the member's peer-transport-security, whose certificate is presented as
  // client certificate and whose trusted-ca-file verifies the server. `timeout` applies to each
  // URL (connect, TLS, handshake and answer), measured on `clock`. The first answer with an OK
  // status wins; when none does, the error (Unavailable) names every URL and why it failed.
  static Result<std::string> FetchClusterInfo(
      const std::vector<common::Url>& urls, const common::TlsConfig& tls,
      std::chrono::milliseconds timeout,
      const common::Clock& clock = common::SystemClock::Instance());

  // Stops listening, closes every connection and joins the transport threads, without waiting
  // for backoffs or transfers (unfinished snapshots fail without on_snapshot_sent). Idempotent;
  // the destructor calls it.
  virtual void Stop() = 0;
};

}  // namespace etcdw::peer_transport
