// The peer transport over Boost.Asio: one io_context run by two threads; every connection,
// listener and peer has its own strand, so its handlers never run concurrently.
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
// threads, closes everything on its own thread and drains the aborted handlers; handlers see
// `stopping()` and invoke no callback (except a call's `done`, which Stop() completes with
// Unavailable: a transport thread that would complete a call once Stop() has begun hands it to
// Stop() instead, so that every call outstanding then completes on Stop()'s thread). Threads
// outside the transport (Call, a late `respond`) post to the io_context only under the Life lock
// while it is alive, so that nothing they post is left unserved.
#include "etcdw/server/peer_transport.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>

#include "etcdw/common/hash.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/thread_name.h"
#include "frame.h"
#include "frame_buffer.h"
#include "stream.h"

namespace etcdw::server {
namespace transport {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// One thread: the transport's work is short handlers (a frame parsed, a queue written), and a
// second thread only added wake-ups between the two (cluster puts spent a fifth more CPU).
constexpr int kThreads = 1;
// The first retry after a failed dial; doubled per failure up to max_backoff.
constexpr milliseconds kInitialBackoff{100};
// on_unreachable is reported at most this often per peer.
constexpr milliseconds kUnreachableInterval{200};
// Repeated log lines of one kind about one peer or remote address: at most one per interval.
constexpr std::chrono::seconds kLogInterval{10};
// An inbound connection must complete TLS and the handshake within max(this, dial_timeout).
constexpr milliseconds kMinHandshakeTimeout{5000};
// TCP keepalive and user timeout: a silent peer is detected in about 20-30 s.
constexpr int kKeepIdleSeconds = 10;
constexpr int kKeepIntervalSeconds = 5;
constexpr int kKeepCount = 3;
constexpr unsigned kUserTimeoutMs = 30000;
// Buffers that grew beyond this for one large message are released afterwards.
constexpr size_t kKeepCapacity = 1 << 20;
// The snapshot result frame is small.
constexpr size_t kMaxResultBytes = 64 * 1024;
// A call connection takes new calls while it has fewer than this many in flight; beyond that
// the pool dials another (up to max_call_connections).
constexpr size_t kCallsPerConnection = 8;
// Calls in flight on one inbound call connection; further requests are answered at once with
// ResourceExhausted.
constexpr size_t kMaxInboundCalls = 1024;
// The largest cluster-information answer FetchClusterInfo accepts.
constexpr size_t kMaxClusterInfoBytes = 64 << 20;
// Longer timeouts (e.g. milliseconds::max() for "none") are cut to this, so that adding them to
// the clock cannot overflow.
constexpr milliseconds kMaxTimeout = std::chrono::hours(24 * 365);

milliseconds ClampTimeout(milliseconds t) {
  return std::clamp(t, milliseconds::zero(), kMaxTimeout);
}

using CallDone = std::function<void(Status, std::string)>;

std::string HexId(uint64_t id) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(id));
  return b;
}

std::string Millis(milliseconds d) { return std::to_string(d.count()) + "ms"; }

std::string ErrorText(const error_code& ec) {
  std::string m = ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    // OpenSSL's reason string alone (e.g. "certificate verify failed") is often too terse.
    char buf[256];
    ERR_error_string_n(static_cast<unsigned long>(ec.value()), buf, sizeof buf);
    if (m.empty()) m = buf;
  }
  return m;
}

void SetSocketOptions(Tcp::socket& s) {
  error_code ec;
  s.set_option(Tcp::no_delay(true), ec);
  s.set_option(asio::socket_base::keep_alive(true), ec);
  const int fd = s.native_handle();
  const int idle = kKeepIdleSeconds, intvl = kKeepIntervalSeconds, cnt = kKeepCount;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  const unsigned user_timeout = kUserTimeoutMs;
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

// Holds back repeated log lines: Allow() is true at most once per interval per key.
class LogLimiter {
 public:
  bool Allow(const std::string& key, uint64_t& suppressed) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() > 4096) entries_.clear();
    auto now = Clock::now();
    auto [it, inserted] = entries_.try_emplace(key);
    Entry& e = it->second;
    if (!inserted && now - e.last < kLogInterval) {
      ++e.suppressed;
      return false;
    }
    suppressed = e.suppressed;
    e.suppressed = 0;
    e.last = now;
    return true;
  }

 private:
  struct Entry {
    Clock::time_point last;
    uint64_t suppressed = 0;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
};

// Something Stop() must close: Close() runs on the object's strand, or on Stop()'s thread once
// the transport threads are joined.
class Closable {
 public:
  virtual ~Closable() = default;
  virtual void Close() = 0;
};

class TransportImpl;

// The TLS context of the dialing side (definitions with the other TLS set-up below).
class ClientTls {
 public:
  Status Init(const common::TlsConfig& tls);
  // The context, with the system's CAs loaded on first use when no trusted-ca-file is set.
  ssl::context& Get();

 private:
  std::optional<ssl::context> ctx_;
  bool system_cas_ = false;
  std::once_flag system_cas_once_;
};

// What a DialOp needs from its owner: the transport, or FetchClusterInfo's stand-in.
class DialEnv {
 public:
  virtual const PeerTransportOptions& opts() const = 0;
  virtual bool stopping() const = 0;
  virtual ssl::context& client_tls() = 0;
  virtual bool Limit(const std::string& key, uint64_t& suppressed) = 0;

 protected:
  ~DialEnv() = default;
};

// Whether the transport's io_context still serves what is posted to it. Stop() clears `alive`
// (under `mu`) before anything else; threads outside the transport post only while holding `mu`
// and seeing `alive`, so that whatever they post is run by a transport thread or by Stop()'s
// drain, and never touches a destroyed io_context.
struct Life {
  std::mutex mu;
  bool alive = true;
};

// ---------------------------------------------------------------------------------------------
// DialOp: reach one member on one of its URLs and complete the handshake.

class DialOp : public std::enable_shared_from_this<DialOp> {
 public:
  using Done = std::function<void(Status, std::shared_ptr<Stream>)>;
  DialOp(DialEnv* t, Executor ex, uint64_t peer, StreamKind kind, std::vector<common::Url> urls,
         Done done);
  // Both on the executor given to the constructor.
  void Start() { TryNext(); }
  // Abandons the dial; `done` is not called.
  void Cancel();

 private:
  void TryNext();
  void AttemptFailed(const std::string& why);
  void Connect(std::vector<Tcp::endpoint> endpoints, uint64_t a);
  void OnConnected(std::shared_ptr<Tcp::socket> sock, uint64_t a);
  void WriteHello(uint64_t a);
  void OnAck(uint64_t a);
  void CloseAttempt();
  bool Stale(uint64_t a) const { return finished_ || a != attempt_; }

  DialEnv* t_;
  Executor ex_;
  uint64_t peer_;
  StreamKind kind_;
  std::vector<common::Url> urls_;
  Done done_;
  size_t next_ = 0;
  uint64_t attempt_ = 0;
  bool finished_ = false;
  Tcp::resolver resolver_;
  asio::steady_timer timer_;
  std::shared_ptr<Tcp::socket> connecting_;
  std::shared_ptr<Stream> stream_;
  std::array<uint8_t, kHandshakeSize> hello_{};
  std::array<uint8_t, kAckSize> ack_{};
  std::string errors_;
};

// ---------------------------------------------------------------------------------------------
// CallPool: the call connections to one member. Everything but Call() and stats() runs on the
// pool's strand (its Peer's), or on Stop()'s thread once the transport threads are joined.

struct CallConn;

struct PendingCall {
  PendingCall(Executor ex, uint64_t id, CallDone done)
      : id(id), done(std::move(done)), timer(std::move(ex)) {}
  const uint64_t id;
  CallDone done;  // null once completed
  asio::steady_timer timer;
  std::weak_ptr<CallConn> conn;
};

struct CallConn {
  CallConn(const Executor& ex, size_t max_payload) : in(max_payload), idle_timer(ex) {}
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
  asio::steady_timer idle_timer;
  uint64_t idle_gen = 0;  // bumped whenever the idle timer is re-armed or disarmed
};

class CallPool : public std::enable_shared_from_this<CallPool> {
 public:
  CallPool(TransportImpl* t, uint64_t peer, Executor ex) : t_(t), peer_(peer), ex_(std::move(ex)) {}
  // From any thread, with the transport's Life lock held (the post is then always served).
  // The deadline counts from now, not from when the pool's strand gets to the call.
  void Call(std::vector<common::Url> urls, uint32_t method, std::string payload,
            milliseconds timeout, CallDone done) {
    timeout = ClampTimeout(timeout);
    asio::post(ex_, [self = shared_from_this(), urls = std::move(urls), method,
                     payload = std::move(payload), timeout, deadline = Clock::now() + timeout,
                     done = std::move(done)]() mutable {
      self->Start(urls, method, payload, timeout, deadline, std::move(done));
    });
  }
  // Closes every connection and fails every call (Unavailable); later calls fail at once.
  void Close();
  CallConnectionStats stats() const { return {open_.load(), established_.load()}; }

 private:
  void Start(const std::vector<common::Url>& urls, uint32_t method, const std::string& payload,
             milliseconds timeout, Clock::time_point deadline, CallDone done);
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
  std::atomic<size_t> open_{0};
  std::atomic<uint64_t> established_{0};
};

// ---------------------------------------------------------------------------------------------
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
  // Drops the queue (caller holds mu_); true when on_unreachable should be reported now.
  bool DropQueueLocked();
  bool ShouldReportLocked(Clock::time_point now);
  void PostUnreachable();

  TransportImpl* t_;
  const uint64_t id_;
  Executor ex_;

  // Shared with Send() callers.
  mutable std::mutex mu_;
  State state_ = State::kDialing;
  std::vector<common::Url> urls_;
  std::string pending_;  // encoded frames not yet handed to the socket
  size_t pending_count_ = 0;
  bool write_scheduled_ = false;  // a MaybeWrite is posted or a write is in flight
  Clock::time_point last_report_{};
  std::atomic<bool> connected_{false};

  // Strand only.
  std::shared_ptr<DialOp> dial_;
  std::shared_ptr<Stream> stream_;
  asio::steady_timer backoff_timer_;
  int failures_ = 0;
  bool ever_connected_ = false;
  std::string writing_;  // the frames of the write in flight
  bool write_active_ = false;

  const std::shared_ptr<CallPool> calls_;  // on the same strand
};

// ---------------------------------------------------------------------------------------------
// SnapshotSender: MsgSnap header, chunks, end; then the receiver's result.

class SnapshotSender : public Closable, public std::enable_shared_from_this<SnapshotSender> {
 public:
  SnapshotSender(TransportImpl* t, Executor ex, raftpb::Message msg,
                 std::unique_ptr<SnapshotSource> source);
  void Start(std::vector<common::Url> urls);
  // Fails the transfer without trying (posted, so that on_snapshot_sent runs on a transport
  // thread).
  void Fail(std::string why) {
    asio::post(ex_,
               [self = shared_from_this(), why = std::move(why)] { self->Finish(false, why); });
  }
  void Close() override;

 private:
  void OnDialed(Status st, std::shared_ptr<Stream> s);
  void WriteNext();
  void ReadResult();
  void OnResultHeader();
  void Finish(bool ok, const std::string& why);

  TransportImpl* t_;
  Executor ex_;
  raftpb::Message msg_;
  std::unique_ptr<SnapshotSource> source_;
  std::shared_ptr<DialOp> dial_;
  std::shared_ptr<Stream> stream_;
  std::string buf_;
  size_t chunk_bytes_;
  uint64_t total_ = 0;
  uint32_t crc_ = 0;
  bool all_sent_ = false;
  bool done_ = false;
  Clock::time_point started_;
  std::array<uint8_t, kFrameHeaderSize> hdr_{};
  FrameHeader result_header_;
  std::string result_;
};

// ---------------------------------------------------------------------------------------------
// InboundConn: one accepted connection.

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
  asio::steady_timer timer_;
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

  std::shared_ptr<Life> life_;
  std::weak_ptr<InboundConn> conn_;
  const uint64_t id_;
  std::atomic<bool> answered_{false};
};

// ---------------------------------------------------------------------------------------------
// Listener

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(TransportImpl* t, common::Url url, Tcp::acceptor acceptor)
      : t_(t),
        url_(std::move(url)),
        acceptor_(std::move(acceptor)),
        retry_(acceptor_.get_executor()) {}
  void Accept();
  void Close() {
    error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
  }
  const common::Url& url() const { return url_; }
  Executor executor() { return acceptor_.get_executor(); }

 private:
  TransportImpl* t_;
  common::Url url_;
  Tcp::acceptor acceptor_;
  asio::steady_timer retry_;
};

// ---------------------------------------------------------------------------------------------
// TransportImpl

class TransportImpl final : public PeerTransport, public DialEnv {
 public:
  TransportImpl(PeerTransportOptions opts, PeerTransportHandler handler)
      : opts_(std::move(opts)), handler_(std::move(handler)) {
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
  Status InitTls();
  Status Listen(const common::Url& url);

  PeerTransportOptions opts_;
  PeerTransportHandler handler_;
  // Declared before the io_context so that they outlive every stream it may still hold.
  std::optional<ssl::context> server_tls_;
  ClientTls client_tls_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<Listener>> listeners_;
  std::vector<int> ports_;
  LogLimiter limiter_;

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Peer>> peers_;
  std::unordered_map<uint64_t, std::weak_ptr<InboundConn>> inbound_;

  std::mutex live_mu_;
  std::vector<std::weak_ptr<Closable>> live_;
  size_t live_sweep_at_ = 64;

  const std::shared_ptr<Life> life_ = std::make_shared<Life>();
  std::atomic<bool> stopping_{false};
  std::atomic<bool> joined_{false};  // Stop() has joined the transport threads
  std::mutex deferred_mu_;
  std::vector<CallDone> deferred_;  // calls a transport thread left for Stop() to complete
  std::mutex stop_mu_;
  bool stopped_ = false;
};

// ---------------------------------------------------------------------------------------------
// DialOp implementation

DialOp::DialOp(DialEnv* t, Executor ex, uint64_t peer, StreamKind kind,
               std::vector<common::Url> urls, Done done)
    : t_(t),
      ex_(ex),
      peer_(peer),
      kind_(kind),
      urls_(std::move(urls)),
      done_(std::move(done)),
      resolver_(ex),
      timer_(ex) {}

void DialOp::Cancel() {
  if (finished_) return;
  finished_ = true;
  done_ = nullptr;
  CloseAttempt();
}

void DialOp::CloseAttempt() {
  resolver_.cancel();
  timer_.cancel();
  error_code ec;
  if (connecting_) connecting_->close(ec);
  connecting_.reset();
  if (stream_) stream_->Close();
  stream_.reset();
}

void DialOp::TryNext() {
  if (finished_) return;
  if (t_->stopping()) return Cancel();
  if (next_ >= urls_.size()) {
    finished_ = true;
    CloseAttempt();
    Done done = std::move(done_);
    done_ = nullptr;
    done(Unavailable(urls_.empty() ? "no peer URLs" : errors_), nullptr);
    return;
  }
  const uint64_t a = ++attempt_;
  const common::Url& url = urls_[next_++];
  timer_.expires_after(t_->opts().dial_timeout);
  timer_.async_wait([self = shared_from_this(), a](const error_code& ec) {
    if (ec || self->Stale(a)) return;
    self->AttemptFailed("timed out after " + std::to_string(self->t_->opts().dial_timeout.count()) +
                        "ms");
  });
  error_code ec;
  auto addr = asio::ip::make_address(url.host, ec);
  if (!ec) {
    Connect({Tcp::endpoint(addr, url.port)}, a);
    return;
  }
  resolver_.async_resolve(
      url.host, std::to_string(url.port),
      [self = shared_from_this(), a](const error_code& ec, Tcp::resolver::results_type results) {
        if (self->Stale(a)) return;
        if (ec) return self->AttemptFailed("resolve: " + ErrorText(ec));
        std::vector<Tcp::endpoint> eps;
        for (const auto& r : results) eps.push_back(r.endpoint());
        self->Connect(std::move(eps), a);
      });
}

void DialOp::Connect(std::vector<Tcp::endpoint> endpoints, uint64_t a) {
  connecting_ = std::make_shared<Tcp::socket>(ex_);
  asio::async_connect(*connecting_, endpoints,
                      [self = shared_from_this(), a, sock = connecting_](const error_code& ec,
                                                                         const Tcp::endpoint&) {
                        if (self->Stale(a)) return;
                        if (ec) return self->AttemptFailed("connect: " + ErrorText(ec));
                        self->OnConnected(sock, a);
                      });
}

void DialOp::OnConnected(std::shared_ptr<Tcp::socket> sock, uint64_t a) {
  connecting_.reset();
  SetSocketOptions(*sock);
  const common::Url& url = urls_[next_ - 1];
  if (!url.tls()) {
    stream_ = std::make_shared<Stream>(std::move(*sock));
    return WriteHello(a);
  }
  stream_ = std::make_shared<Stream>(std::move(*sock), t_->client_tls());
  // Verify the server's name or IP address from the URL (IP SANs for IP literals).
  SSL* ssl = stream_->tls().native_handle();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  error_code ec;
  asio::ip::make_address(url.host, ec);
  if (!ec) {
    X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, url.host.c_str());
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, url.host.c_str(), 0);
  }
  stream_->tls().async_handshake(ssl::stream_base::client,
                                 [self = shared_from_this(), a, s = stream_](const error_code& ec) {
                                   if (self->Stale(a)) return;
                                   if (ec)
                                     return self->AttemptFailed("TLS handshake: " + ErrorText(ec));
                                   self->WriteHello(a);
                                 });
}

void DialOp::WriteHello(uint64_t a) {
  Handshake h;
  h.kind = static_cast<uint8_t>(kind_);
  h.cluster_id = t_->opts().cluster_id;
  h.sender_id = t_->opts().local_id;
  h.receiver_id = peer_;
  hello_ = EncodeHandshake(h);
  stream_->AsyncWrite(asio::buffer(hello_), [self = shared_from_this(), a, s = stream_](
                                                const error_code& ec, size_t) {
    if (self->Stale(a)) return;
    if (ec) return self->AttemptFailed("write handshake: " + ErrorText(ec));
    self->stream_->AsyncRead(asio::buffer(self->ack_), [self, a, s](const error_code& ec, size_t) {
      if (self->Stale(a)) return;
      if (ec) {
        return self->AttemptFailed("no handshake acknowledgement: " + ErrorText(ec));
      }
      self->OnAck(a);
    });
  });
}

void DialOp::OnAck(uint64_t a) {
  auto r = DecodeAck(ack_);
  if (!r.ok()) return AttemptFailed(r.status().message());
  if (*r != HandshakeResult::kAccepted) {
    uint64_t suppressed = 0;
    if (t_->Limit("rejected-by:" + std::to_string(peer_), suppressed)) {
      log::Warn(
          "remote peer rejected the connection",
          {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", peer_),
           log::F("url", urls_[next_ - 1].ToString()), log::F("reason", HandshakeResultName(*r)),
           log::Hex("cluster-id", t_->opts().cluster_id), log::F("suppressed", suppressed)});
    }
    return AttemptFailed(std::string("rejected by the peer: ") + HandshakeResultName(*r));
  }
  finished_ = true;
  timer_.cancel();
  Done done = std::move(done_);
  done_ = nullptr;
  std::shared_ptr<Stream> s = std::move(stream_);
  done(Status::Ok(), std::move(s));
}

void DialOp::AttemptFailed(const std::string& why) {
  const std::string url = urls_[next_ - 1].ToString();
  log::Debug("peer dial attempt failed",
             {log::Hex("remote-peer-id", peer_), log::F("url", url), log::F("error", why)});
  if (!errors_.empty()) errors_ += "; ";
  errors_ += url + ": " + why;
  CloseAttempt();
  TryNext();
}

// ---------------------------------------------------------------------------------------------
// Peer implementation

Peer::Peer(TransportImpl* t, uint64_t id, std::vector<common::Url> urls, Executor ex)
    : t_(t),
      id_(id),
      ex_(ex),
      urls_(std::move(urls)),
      backoff_timer_(ex),
      calls_(std::make_shared<CallPool>(t, id, ex)) {}

bool Peer::ShouldReportLocked(Clock::time_point now) {
  if (now - last_report_ < kUnreachableInterval) return false;
  last_report_ = now;
  return true;
}

void Peer::PostUnreachable() {
  asio::post(ex_, [self = shared_from_this()] {
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (self->state_ == State::kRemoved) return;
    }
    self->t_->OnUnreachable(self->id_);
  });
}

void Peer::Enqueue(const std::vector<const raftpb::Message*>& msgs) {
  const size_t max_bytes = t_->opts().max_message_bytes;
  const size_t max_queued = t_->opts().max_queued_messages;
  size_t too_large = 0, full = 0, unreachable = 0;
  bool kick = false, report = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kRemoved) return;
    for (const raftpb::Message* m : msgs) {
      const size_t size = m->ByteSizeLong();
      if (size > max_bytes) {
        ++too_large;
      } else if (state_ == State::kBackoff) {
        ++unreachable;
      } else if (pending_count_ >= max_queued) {
        ++full;
      } else {
        AppendMessageFrame(pending_, *m, size);
        ++pending_count_;
      }
    }
    if (state_ == State::kConnected && pending_count_ > 0 && !write_scheduled_) {
      write_scheduled_ = kick = true;
    }
    if (too_large + full + unreachable > 0) report = ShouldReportLocked(Clock::now());
  }
  if (kick) asio::post(ex_, [self = shared_from_this()] { self->MaybeWrite(); });
  if (report) PostUnreachable();
  uint64_t suppressed = 0;
  if (too_large > 0 && t_->Limit("too-large:" + std::to_string(id_), suppressed)) {
    log::Warn("dropped messages larger than max-message-bytes",
              {log::Hex("remote-peer-id", id_), log::F("dropped", uint64_t{too_large}),
               log::F("max-message-bytes", uint64_t{max_bytes}), log::F("suppressed", suppressed)});
  }
  if (full > 0 && t_->Limit("queue-full:" + std::to_string(id_), suppressed)) {
    log::Warn(
        "dropped messages: the queue to the peer is full",
        {log::Hex("remote-peer-id", id_), log::F("dropped", uint64_t{full}),
         log::F("max-queued-messages", uint64_t{max_queued}), log::F("suppressed", suppressed)});
  }
}

void Peer::SetUrls(std::vector<common::Url> urls) {
  bool redial = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kRemoved) return;
    redial = urls_ != urls && state_ == State::kBackoff;
    urls_ = std::move(urls);
  }
  // A peer that was unreachable at its old URLs is tried at the new ones at once.
  if (redial) {
    asio::post(ex_, [self = shared_from_this()] { self->backoff_timer_.cancel(); });
  }
}

void Peer::Dial() {
  std::vector<common::Url> urls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kRemoved || t_->stopping()) return;
    state_ = State::kDialing;
    urls = urls_;
  }
  dial_ =
      std::make_shared<DialOp>(t_, ex_, id_, StreamKind::kMessages, std::move(urls),
                               [self = shared_from_this()](Status st, std::shared_ptr<Stream> s) {
                                 self->OnDialed(std::move(st), std::move(s));
                               });
  auto op = dial_;  // `done` may run (and reset dial_) inside Start()
  op->Start();
}

void Peer::OnDialed(Status st, std::shared_ptr<Stream> s) {
  dial_.reset();
  if (t_->stopping()) return;
  bool report = false, kick = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kRemoved) {
      if (s) s->Close();
      return;
    }
    if (st.ok()) {
      state_ = State::kConnected;
      if (pending_count_ > 0 && !write_scheduled_) write_scheduled_ = kick = true;
    } else {
      state_ = State::kBackoff;
      report = DropQueueLocked();
    }
  }
  uint64_t suppressed = 0;
  if (!st.ok()) {
    ++failures_;
    if (report) PostUnreachable();
    const milliseconds max_backoff = t_->opts().max_backoff;
    milliseconds delay = std::min(kInitialBackoff, max_backoff);
    for (int i = 1; i < failures_ && delay < max_backoff; ++i) delay *= 2;
    delay = std::min(delay, max_backoff);
    // Jitter (75-100% of the delay) so that members do not redial in lockstep.
    thread_local std::minstd_rand rng(std::random_device{}());
    delay = milliseconds(delay.count() * (75 + static_cast<int64_t>(rng() % 26)) / 100);
    if (t_->Limit("dial-failed:" + std::to_string(id_), suppressed)) {
      log::Info("cannot connect to remote peer",
                {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", id_),
                 log::F("error", st.message()), log::F("failures", failures_),
                 log::F("retry-in-ms", static_cast<int64_t>(delay.count())),
                 log::F("suppressed", suppressed)});
    }
    backoff_timer_.expires_after(delay);
    backoff_timer_.async_wait(
        [self = shared_from_this()](const error_code&) { self->OnBackoffTimer(); });
    return;
  }
  failures_ = 0;
  ever_connected_ = true;
  stream_ = std::move(s);
  connected_ = true;
  if (t_->Limit("established:" + std::to_string(id_), suppressed)) {
    log::Info("established stream connection with remote peer",
              {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", id_),
               log::F("remote-address", stream_->RemoteAddress()), log::F("tls", stream_->is_tls()),
               log::F("suppressed", suppressed)});
  }
  StartRead();
  if (kick) MaybeWrite();
}

void Peer::OnBackoffTimer() {
  if (t_->stopping()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kBackoff) return;
  }
  Dial();
}

// The receiver never writes on a message stream: a read completes only when it closes.
void Peer::StartRead() {
  auto s = stream_;
  s->AsyncRead(asio::buffer(s->scratch()),
               [self = shared_from_this(), s](const error_code& ec, size_t) {
                 if (s != self->stream_) return;
                 self->Lost(ec ? ErrorText(ec) : "unexpected data from the receiver");
               });
}

void Peer::MaybeWrite() {
  if (!stream_ || write_active_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.empty()) {
      write_scheduled_ = false;
      return;
    }
    writing_.swap(pending_);
    pending_count_ = 0;
  }
  write_active_ = true;
  auto s = stream_;
  s->AsyncWrite(asio::buffer(writing_),
                [self = shared_from_this(), s](const error_code& ec, size_t) {
                  self->write_active_ = false;
                  self->writing_.clear();
                  if (self->writing_.capacity() > kKeepCapacity) std::string().swap(self->writing_);
                  if (s != self->stream_) {
                    // The stream was lost meanwhile; a new one may wait for this buffer.
                    if (self->stream_) self->MaybeWrite();
                    return;
                  }
                  if (ec) return self->Lost(ErrorText(ec));
                  self->MaybeWrite();
                });
}

bool Peer::DropQueueLocked() {
  const bool dropped = pending_count_ > 0 || write_active_;
  pending_.clear();
  if (pending_.capacity() > kKeepCapacity) std::string().swap(pending_);
  pending_count_ = 0;
  write_scheduled_ = false;
  return dropped && ShouldReportLocked(Clock::now());
}

void Peer::Lost(const std::string& why) {
  if (!stream_) return;
  const std::string remote = stream_->RemoteAddress();
  stream_->Close();
  stream_.reset();
  connected_ = false;
  bool report = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kRemoved) return;
    // Messages queued for the lost stream are dropped; Raft resends what matters.
    report = DropQueueLocked();
    state_ = State::kDialing;
  }
  if (report) PostUnreachable();
  uint64_t suppressed = 0;
  if (t_->Limit("lost:" + std::to_string(id_), suppressed)) {
    log::Info(
        "lost stream connection with remote peer",
        {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", id_),
         log::F("remote-address", remote), log::F("error", why), log::F("suppressed", suppressed)});
  }
  if (t_->stopping()) return;
  Dial();  // at once; backoff applies from the first failed dial
}

void Peer::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kRemoved;
    pending_.clear();
    pending_count_ = 0;
  }
  if (dial_) dial_->Cancel();
  dial_.reset();
  backoff_timer_.cancel();
  if (stream_) stream_->Close();
  stream_.reset();
  connected_ = false;
  calls_->Close();
}

// ---------------------------------------------------------------------------------------------
// CallPool implementation

void CallPool::Complete(PendingCall& call, Status st, std::string payload) {
  if (!call.done) return;
  CallDone done = std::move(call.done);
  call.done = nullptr;
  call.timer.cancel();
  t_->CompleteCall(std::move(done), std::move(st), std::move(payload));
}

void CallPool::Start(const std::vector<common::Url>& urls, uint32_t method,
                     const std::string& payload, milliseconds timeout, Clock::time_point deadline,
                     CallDone done) {
  if (t_->stopping() || closed_) {
    return t_->CompleteCall(std::move(done),
                            Unavailable(t_->stopping() ? "peer transport stopped"
                                                       : "peer " + HexId(peer_) + " was removed"),
                            std::string());
  }
  const size_t size = kCallRequestOverhead + payload.size();
  if (size > t_->opts().max_message_bytes) {
    return t_->CompleteCall(
        std::move(done),
        Status(Code::kResourceExhausted, "peer call request of " + std::to_string(size) +
                                             " bytes exceeds max-message-bytes (" +
                                             std::to_string(t_->opts().max_message_bytes) + ")"),
        std::string());
  }
  auto call = std::make_shared<PendingCall>(ex_, ++next_id_, std::move(done));
  call->timer.expires_at(deadline);
  call->timer.async_wait([self = shared_from_this(), call, timeout](const error_code& ec) {
    if (!ec) self->TimedOut(call, timeout);
  });

  // The least loaded connection, preferring established ones; a new one when all are busy.
  std::shared_ptr<CallConn> c;
  for (const auto& x : conns_) {
    if (!c || x->calls.size() < c->calls.size() ||
        (x->calls.size() == c->calls.size() && x->established && !c->established)) {
      c = x;
    }
  }
  bool dial = false;
  if (!c ||
      (c->calls.size() >= kCallsPerConnection && conns_.size() < t_->opts().max_call_connections)) {
    c = std::make_shared<CallConn>(ex_, t_->opts().max_message_bytes);
    conns_.push_back(c);
    dial = true;
  }
  call->conn = c;
  c->calls.emplace(call->id, call);
  ++c->idle_gen;  // disarms the idle timer
  c->idle_timer.cancel();
  AppendCallRequest(c->pending, call->id, method, payload);
  if (dial) {
    Dial(c, urls);  // may fail the call at once (no URLs)
  } else {
    WriteMore(c);
  }
}

void CallPool::Dial(const std::shared_ptr<CallConn>& c, std::vector<common::Url> urls) {
  c->dial = std::make_shared<DialOp>(
      t_, ex_, peer_, StreamKind::kCall, std::move(urls),
      [self = shared_from_this(), c](Status st, std::shared_ptr<Stream> s) {
        self->OnDialed(c, std::move(st), std::move(s));
      });
  auto op = c->dial;  // `done` may run (and reset c->dial) inside Start()
  op->Start();
}

void CallPool::OnDialed(const std::shared_ptr<CallConn>& c, Status st, std::shared_ptr<Stream> s) {
  c->dial.reset();
  if (c->closed || t_->stopping()) {
    if (s) s->Close();
    return;  // Close() fails the calls
  }
  if (!st.ok()) {
    uint64_t suppressed = 0;
    if (t_->Limit("call-dial-failed:" + std::to_string(peer_), suppressed)) {
      log::Info(
          "cannot open call connection to remote peer",
          {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", peer_),
           log::F("error", st.message()), log::F("suppressed", suppressed)});
    }
    return Lost(c, Unavailable("cannot connect to peer " + HexId(peer_) + ": " + st.message()));
  }
  c->stream = std::move(s);
  c->established = true;
  ++open_;
  ++established_;
  log::Debug("established call connection with remote peer",
             {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", peer_),
              log::F("remote-address", c->stream->RemoteAddress()),
              log::F("tls", c->stream->is_tls()), log::F("connections", uint64_t{conns_.size()})});
  ReadAnswers(c);
  WriteMore(c);
  MaybeIdle(c);  // every call may have timed out during the dial
}

void CallPool::WriteMore(const std::shared_ptr<CallConn>& c) {
  if (c->closed || !c->established || c->write_active || c->pending.empty()) return;
  c->writing.swap(c->pending);
  c->pending.clear();
  c->write_active = true;
  auto s = c->stream;
  s->AsyncWrite(asio::buffer(c->writing), [self = shared_from_this(), c, s](const error_code& ec,
                                                                            size_t) {
    c->write_active = false;
    c->writing.clear();
    if (c->writing.capacity() > kKeepCapacity) std::string().swap(c->writing);
    if (c->closed) return;
    if (ec) {
      return self->Lost(
          c, Unavailable("connection to peer " + HexId(self->peer_) + " lost: " + ErrorText(ec)));
    }
    self->WriteMore(c);
  });
}

void CallPool::ReadAnswers(const std::shared_ptr<CallConn>& c) {
  auto s = c->stream;
  const FrameBuffer::Span room = c->in.Space();
  s->AsyncReadSome(asio::buffer(room.data, room.size), [self = shared_from_this(), c, s](
                                                           const error_code& ec, size_t n) {
    if (c->closed) return;
    if (ec) {
      return self->Lost(
          c, Unavailable("connection to peer " + HexId(self->peer_) + " lost: " + ErrorText(ec)));
    }
    c->in.Commit(n);
    self->OnAnswers(c);
  });
}

void CallPool::OnAnswers(const std::shared_ptr<CallConn>& c) {
  for (;;) {
    auto next = c->in.Next();
    if (!next.ok()) return Corrupt(c, next.status());
    if (!next->has_value()) break;
    if (!OnAnswer(c, **next) || c->closed) return;
  }
  MaybeIdle(c);
  ReadAnswers(c);
}

bool CallPool::OnAnswer(const std::shared_ptr<CallConn>& c, const Frame& f) {
  if (f.type != static_cast<uint8_t>(FrameType::kCallResponse)) {
    Corrupt(c, DataLoss("unexpected frame type " + std::to_string(f.type)));
    return false;
  }
  auto resp = DecodeCallResponse(f.payload);
  if (!resp.ok()) {
    Corrupt(c, resp.status());
    return false;
  }
  auto it = c->calls.find(resp->id);
  if (it != c->calls.end()) {
    std::shared_ptr<PendingCall> call = std::move(it->second);
    c->calls.erase(it);
    Complete(*call, std::move(resp->reply.status), std::string(resp->reply.payload));
  }  // else: the call timed out; its late answer is dropped
  return true;
}

void CallPool::Corrupt(const std::shared_ptr<CallConn>& c, const Status& why) {
  log::Warn("closing call connection: corrupt answer from remote peer",
            {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", peer_),
             log::F("error", why.message())});
  Lost(c, Unavailable("corrupt answer from peer " + HexId(peer_)));
}

void CallPool::TimedOut(const std::shared_ptr<PendingCall>& call, milliseconds timeout) {
  if (!call->done) return;
  if (auto c = call->conn.lock()) {
    c->calls.erase(call->id);
    MaybeIdle(c);
  }
  Complete(*call,
           Status(Code::kDeadlineExceeded,
                  "call to peer " + HexId(peer_) + " timed out after " + Millis(timeout)),
           std::string());
}

void CallPool::MaybeIdle(const std::shared_ptr<CallConn>& c) {
  if (c->closed || !c->established || !c->calls.empty()) return;
  const uint64_t gen = ++c->idle_gen;
  c->idle_timer.expires_after(t_->opts().call_idle_timeout);
  c->idle_timer.async_wait([self = shared_from_this(), c, gen](const error_code& ec) {
    if (ec || c->closed || gen != c->idle_gen || !c->calls.empty()) return;
    log::Debug("closing idle call connection to remote peer",
               {log::Hex("local-member-id", self->t_->opts().local_id),
                log::Hex("remote-peer-id", self->peer_)});
    self->Lost(c, Unavailable("idle"));
  });
}

void CallPool::Lost(const std::shared_ptr<CallConn>& c, const Status& why) {
  if (c->closed) return;
  c->closed = true;
  if (c->dial) c->dial->Cancel();
  c->dial.reset();
  if (c->stream) c->stream->Close();
  c->stream.reset();
  c->idle_timer.cancel();
  c->pending.clear();
  if (c->established) --open_;
  std::erase(conns_, c);
  auto calls = std::move(c->calls);
  c->calls.clear();
  if (!calls.empty() && !t_->stopping()) {
    uint64_t suppressed = 0;
    if (t_->Limit("call-lost:" + std::to_string(peer_), suppressed)) {
      log::Info("peer calls failed: call connection lost",
                {log::Hex("local-member-id", t_->opts().local_id),
                 log::Hex("remote-peer-id", peer_), log::F("calls", uint64_t{calls.size()}),
                 log::F("error", why.message()), log::F("suppressed", suppressed)});
    }
  }
  for (auto& [id, call] : calls) Complete(*call, why, std::string());
}

void CallPool::Close() {
  if (closed_) return;
  closed_ = true;
  const Status why = Unavailable(t_->stopping() ? "peer transport stopped"
                                                : "peer " + HexId(peer_) + " was removed");
  auto conns = std::move(conns_);
  conns_.clear();
  for (auto& c : conns) Lost(c, why);
}

// ---------------------------------------------------------------------------------------------
// SnapshotSender implementation

SnapshotSender::SnapshotSender(TransportImpl* t, Executor ex, raftpb::Message msg,
                               std::unique_ptr<SnapshotSource> source)
    : t_(t),
      ex_(ex),
      msg_(std::move(msg)),
      source_(std::move(source)),
      chunk_bytes_(t->ChunkBytes()),
      started_(Clock::now()) {}

void SnapshotSender::Start(std::vector<common::Url> urls) {
  asio::post(ex_, [self = shared_from_this(), urls = std::move(urls)]() mutable {
    if (self->done_) return;
    if (self->t_->stopping()) return self->Close();
    self->dial_ =
        std::make_shared<DialOp>(self->t_, self->ex_, self->msg_.to(), StreamKind::kSnapshot,
                                 std::move(urls), [self](Status st, std::shared_ptr<Stream> s) {
                                   self->OnDialed(std::move(st), std::move(s));
                                 });
    auto op = self->dial_;  // `done` may run (and reset dial_) inside Start()
    op->Start();
  });
}

void SnapshotSender::Close() {
  done_ = true;
  if (dial_) dial_->Cancel();
  dial_.reset();
  if (stream_) stream_->Close();
  source_.reset();
}

void SnapshotSender::OnDialed(Status st, std::shared_ptr<Stream> s) {
  dial_.reset();
  if (done_) {
    if (s) s->Close();
    return;
  }
  if (!st.ok()) return Finish(false, "cannot connect: " + st.message());
  stream_ = std::move(s);
  ReadResult();  // the receiver may refuse at any time
  buf_.clear();
  const size_t size = msg_.ByteSizeLong();
  if (size > t_->opts().max_message_bytes) {
    return Finish(false, "MsgSnap larger than max-message-bytes");
  }
  size_t h = BeginFrame(buf_);
  buf_.resize(buf_.size() + size);
  msg_.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(buf_.data() + h + kFrameHeaderSize));
  EndFrame(buf_, h, FrameType::kSnapshotHeader);
  stream_->AsyncWrite(asio::buffer(buf_),
                      [self = shared_from_this()](const error_code& ec, size_t) {
                        if (self->done_) return;
                        if (ec) return self->Finish(false, "write: " + ErrorText(ec));
                        self->WriteNext();
                      });
}

void SnapshotSender::WriteNext() {
  if (done_) return;
  if (t_->stopping()) return Close();
  buf_.clear();
  const size_t h = BeginFrame(buf_);
  Result<bool> more = source_->Next(buf_, chunk_bytes_);
  if (!more.ok()) return Finish(false, "snapshot source: " + more.status().ToString());
  const size_t n = buf_.size() - h - kFrameHeaderSize;
  if (n > chunk_bytes_) return Finish(false, "snapshot source returned a chunk over the limit");
  if (n > 0) {
    std::string_view data = std::string_view(buf_).substr(h + kFrameHeaderSize);
    crc_ = common::Crc32c(crc_, data);
    total_ += n;
    EndFrame(buf_, h, FrameType::kSnapshotChunk);
  } else {
    buf_.clear();
  }
  if (!*more) {
    std::array<uint8_t, kSnapshotEndSize> end{};
    PutU64(&end[0], total_);
    PutU32(&end[8], crc_);
    AppendFrame(buf_, FrameType::kSnapshotEnd,
                std::string_view(reinterpret_cast<const char*>(end.data()), end.size()));
    all_sent_ = true;
  }
  if (buf_.empty()) {
    // The source produced nothing this time; yield to other handlers before asking again.
    asio::post(ex_, [self = shared_from_this()] { self->WriteNext(); });
    return;
  }
  stream_->AsyncWrite(asio::buffer(buf_),
                      [self = shared_from_this()](const error_code& ec, size_t) {
                        if (self->done_) return;
                        if (ec) return self->Finish(false, "write: " + ErrorText(ec));
                        if (!self->all_sent_) return self->WriteNext();
                        self->buf_.clear();
                        std::string().swap(self->buf_);
                        // Everything is sent; the pending read delivers the receiver's result.
                      });
}

void SnapshotSender::ReadResult() {
  stream_->AsyncRead(asio::buffer(hdr_), [self = shared_from_this()](const error_code& ec, size_t) {
    if (self->done_) return;
    if (ec) {
      return self->Finish(false,
                          "connection closed before the receiver's result: " + ErrorText(ec));
    }
    self->OnResultHeader();
  });
}

void SnapshotSender::OnResultHeader() {
  result_header_ = DecodeFrameHeader(hdr_);
  if (result_header_.type != static_cast<uint8_t>(FrameType::kSnapshotResult) ||
      result_header_.length < 1 || result_header_.length > kMaxResultBytes) {
    return Finish(false, "bad result frame from the receiver");
  }
  result_.resize(result_header_.length);
  stream_->AsyncRead(
      asio::buffer(result_), [self = shared_from_this()](const error_code& ec, size_t) {
        if (self->done_) return;
        if (ec) return self->Finish(false, "reading the receiver's result: " + ErrorText(ec));
        if (common::Crc32c(0, self->result_) != self->result_header_.crc) {
          return self->Finish(false, "corrupt result frame from the receiver");
        }
        const bool ok = self->result_[0] == 1;
        if (ok && !self->all_sent_) return self->Finish(false, "premature success result");
        self->Finish(ok, ok ? "" : "receiver: " + self->result_.substr(1));
      });
}

void SnapshotSender::Finish(bool ok, const std::string& why) {
  if (done_) return;
  done_ = true;
  if (stream_) stream_->Close();
  source_.reset();
  const uint64_t to = msg_.to();
  const auto ms = std::chrono::duration_cast<milliseconds>(Clock::now() - started_).count();
  if (ok) {
    log::Info("sent database snapshot to remote peer",
              {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", to),
               log::F("bytes", total_), log::F("index", msg_.snapshot().metadata().index()),
               log::F("took-ms", static_cast<int64_t>(ms))});
  } else {
    log::Warn("failed to send database snapshot to remote peer",
              {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", to),
               log::F("error", why), log::F("bytes-sent", total_),
               log::F("index", msg_.snapshot().metadata().index())});
  }
  t_->OnSnapshotSent(to, ok);
}

// ---------------------------------------------------------------------------------------------
// InboundConn implementation

namespace {
std::shared_ptr<Stream> MakeInboundStream(TransportImpl* t, const common::Url& url,
                                          Tcp::socket sock) {
  if (url.tls()) return std::make_shared<Stream>(std::move(sock), *t->server_tls());
  return std::make_shared<Stream>(std::move(sock));
}
}  // namespace

InboundConn::InboundConn(TransportImpl* t, const common::Url& url, Tcp::socket sock)
    : t_(t),
      url_(url),
      stream_(MakeInboundStream(t, url, std::move(sock))),
      timer_(stream_->socket().get_executor()),
      in_(t->opts().max_message_bytes) {}

void InboundConn::Start() {
  asio::post(executor(), [self = shared_from_this()] {
    if (self->closed_) return;
    self->remote_ = self->stream_->RemoteAddress();
    self->remote_host_ = self->remote_.substr(0, self->remote_.rfind(':'));
    SetSocketOptions(self->stream_->socket());
    self->timer_.expires_after(self->t_->HandshakeTimeout());
    self->timer_.async_wait([self](const error_code& ec) {
      if (ec || self->closed_ || self->phase_ != Phase::kHandshake) return;
      uint64_t suppressed = 0;
      if (self->t_->Limit("handshake-timeout:" + self->remote_host_, suppressed)) {
        log::Warn("rejected peer connection: no handshake in time",
                  {log::Hex("local-member-id", self->t_->opts().local_id),
                   log::F("remote-address", self->remote_),
                   log::F("listen-url", self->url_.ToString()), log::F("suppressed", suppressed)});
      }
      self->Close();
    });
    if (!self->stream_->is_tls()) return self->ReadHello();
    self->stream_->tls().async_handshake(ssl::stream_base::server, [self](const error_code& ec) {
      if (self->closed_) return;
      if (ec) {
        uint64_t suppressed = 0;
        if (self->t_->Limit("tls-rejected:" + self->remote_host_, suppressed)) {
          log::Warn(
              "rejected peer connection: TLS handshake failed",
              {log::Hex("local-member-id", self->t_->opts().local_id),
               log::F("remote-address", self->remote_), log::F("listen-url", self->url_.ToString()),
               log::F("error", ErrorText(ec)), log::F("suppressed", suppressed)});
        }
        return self->Close();
      }
      self->ReadHello();
    });
  });
}

void InboundConn::Close() {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  stream_->Close();
  sink_.reset();  // an unfinished snapshot is abandoned
}

void InboundConn::ReadHello() {
  stream_->AsyncRead(
      asio::buffer(hello_), [self = shared_from_this()](const error_code& ec, size_t) {
        if (self->closed_) return;
        if (ec) {
          log::Debug("peer connection closed before its handshake",
                     {log::F("remote-address", self->remote_), log::F("error", ErrorText(ec))});
          return self->Close();
        }
        self->OnHello();
      });
}

void InboundConn::OnHello() {
  auto h = DecodeHandshake(hello_);
  if (!h.ok()) {
    uint64_t suppressed = 0;
    if (t_->Limit("bad-handshake:" + remote_host_, suppressed)) {
      log::Warn("rejected peer connection: invalid handshake",
                {log::Hex("local-member-id", t_->opts().local_id),
                 log::F("remote-address", remote_), log::F("listen-url", url_.ToString()),
                 log::F("error", h.status().message()), log::F("suppressed", suppressed)});
    }
    return Close();
  }
  hs_ = *h;
  const auto& o = t_->opts();
  // A member joining with a fresh data directory knows neither the cluster ID nor ours.
  const bool info = hs_.kind == static_cast<uint8_t>(StreamKind::kClusterInfo);
  if (hs_.version != kProtocolVersion) return Reject(HandshakeResult::kBadVersion);
  if (hs_.cluster_id != o.cluster_id && !(info && hs_.cluster_id == 0)) {
    return Reject(HandshakeResult::kClusterMismatch);
  }
  if (hs_.receiver_id != o.local_id && !(info && hs_.receiver_id == 0)) {
    return Reject(HandshakeResult::kWrongReceiver);
  }
  switch (static_cast<StreamKind>(hs_.kind)) {
    case StreamKind::kMessages:
    case StreamKind::kSnapshot:
    case StreamKind::kCall:
    case StreamKind::kClusterInfo:
      break;
    default:
      return Reject(HandshakeResult::kBadStreamKind);
  }
  ack_ = EncodeAck(HandshakeResult::kAccepted);
  stream_->AsyncWrite(asio::buffer(ack_),
                      [self = shared_from_this()](const error_code& ec, size_t) {
                        if (self->closed_) return;
                        if (ec) return self->Close();
                        self->Accepted();
                      });
}

void InboundConn::Reject(HandshakeResult r) {
  uint64_t suppressed = 0;
  if (t_->Limit("rejected:" + remote_host_ + ":" + std::to_string(static_cast<uint32_t>(r)),
                suppressed)) {
    log::Warn(
        "rejected peer connection",
        {log::Hex("local-member-id", t_->opts().local_id), log::F("reason", HandshakeResultName(r)),
         log::F("remote-address", remote_), log::Hex("remote-peer-id", hs_.sender_id),
         log::Hex("local-cluster-id", t_->opts().cluster_id),
         log::Hex("remote-cluster-id", hs_.cluster_id),
         log::Hex("requested-member-id", hs_.receiver_id),
         log::F("remote-version", static_cast<int>(hs_.version)),
         log::F("suppressed", suppressed)});
  }
  // Tell the dialer why, then close.
  ack_ = EncodeAck(r);
  stream_->AsyncWrite(asio::buffer(ack_),
                      [self = shared_from_this()](const error_code&, size_t) { self->Close(); });
}

void InboundConn::Accepted() {
  timer_.cancel();
  const auto kind = static_cast<StreamKind>(hs_.kind);
  if (kind == StreamKind::kClusterInfo) return ServeClusterInfo();
  if (kind == StreamKind::kCall) {
    phase_ = Phase::kCalls;
    log::Debug("accepted call connection from remote peer",
               {log::Hex("local-member-id", t_->opts().local_id),
                log::Hex("remote-peer-id", hs_.sender_id), log::F("remote-address", remote_)});
  } else if (kind == StreamKind::kMessages) {
    phase_ = Phase::kMessages;
    t_->RegisterInbound(hs_.sender_id, shared_from_this());
    uint64_t suppressed = 0;
    if (t_->Limit("in-established:" + std::to_string(hs_.sender_id), suppressed)) {
      log::Info("accepted stream connection from remote peer",
                {log::Hex("local-member-id", t_->opts().local_id),
                 log::Hex("remote-peer-id", hs_.sender_id), log::F("remote-address", remote_),
                 log::F("tls", stream_->is_tls()), log::F("suppressed", suppressed)});
    }
  } else {
    phase_ = Phase::kSnapshotHeader;
  }
  ReadFrames();
}

void InboundConn::ReadFrames() {
  const FrameBuffer::Span room = in_.Space();
  stream_->AsyncReadSome(asio::buffer(room.data, room.size),
                         [self = shared_from_this()](const error_code& ec, size_t n) {
                           if (self->closed_) return;
                           if (ec) return self->Closed(ec);
                           self->in_.Commit(n);
                           self->OnFrames();
                         });
}

void InboundConn::OnFrames() {
  for (;;) {
    auto next = in_.Next();
    if (!next.ok()) return Corrupt(next.status().message());
    if (!next->has_value()) return ReadFrames();
    if (!OnFrame(**next)) return;
  }
}

void InboundConn::Closed(const error_code& ec) {
  uint64_t suppressed = 0;
  if (phase_ == Phase::kMessages) {
    if (t_->Limit("in-lost:" + std::to_string(hs_.sender_id), suppressed)) {
      log::Info("lost stream connection from remote peer",
                {log::Hex("local-member-id", t_->opts().local_id),
                 log::Hex("remote-peer-id", hs_.sender_id), log::F("remote-address", remote_),
                 log::F("error", ErrorText(ec)), log::F("suppressed", suppressed)});
    }
  } else if (phase_ == Phase::kCalls) {
    log::Debug(
        "call connection from remote peer closed",
        {log::Hex("local-member-id", t_->opts().local_id),
         log::Hex("remote-peer-id", hs_.sender_id), log::F("remote-address", remote_),
         log::F("calls-in-flight", uint64_t{calls_in_flight_}), log::F("error", ErrorText(ec))});
  } else if (phase_ == Phase::kSnapshotHeader || phase_ == Phase::kSnapshotData) {
    log::Warn("snapshot transfer from remote peer aborted",
              {log::Hex("local-member-id", t_->opts().local_id),
               log::Hex("remote-peer-id", hs_.sender_id), log::F("remote-address", remote_),
               log::F("bytes", snap_bytes_), log::F("error", ErrorText(ec))});
  }
  Close();
}

void InboundConn::Corrupt(const std::string& what) {
  uint64_t suppressed = 0;
  if (t_->Limit("corrupt:" + remote_host_, suppressed)) {
    log::Warn("closing peer connection: corrupt frame",
              {log::Hex("local-member-id", t_->opts().local_id),
               log::Hex("remote-peer-id", hs_.sender_id), log::F("remote-address", remote_),
               log::F("error", what), log::F("suppressed", suppressed)});
  }
  Close();
}

bool InboundConn::OnFrame(const Frame& f) {
  bool expected = false;
  switch (phase_) {
    case Phase::kMessages:
      expected = f.type == static_cast<uint8_t>(FrameType::kMessage);
      break;
    case Phase::kSnapshotHeader:
      expected = f.type == static_cast<uint8_t>(FrameType::kSnapshotHeader);
      break;
    case Phase::kSnapshotData:
      expected = f.type == static_cast<uint8_t>(FrameType::kSnapshotChunk) ||
                 f.type == static_cast<uint8_t>(FrameType::kSnapshotEnd);
      break;
    case Phase::kCalls:
      expected = f.type == static_cast<uint8_t>(FrameType::kCallRequest);
      break;
    default:
      break;
  }
  if (!expected) {
    Corrupt("unexpected frame type " + std::to_string(f.type));
    return false;
  }
  switch (static_cast<FrameType>(f.type)) {
    case FrameType::kMessage: {
      raftpb::Message m;
      if (!m.ParseFromArray(f.payload.data(), static_cast<int>(f.payload.size()))) {
        Corrupt("undecodable message");
        return false;
      }
      t_->OnMessage(std::move(m));
      return true;
    }
    case FrameType::kSnapshotHeader:
      return OnSnapshotHeader(f.payload);
    case FrameType::kSnapshotChunk:
      OnSnapshotChunk(f.payload);
      return !closed_ && phase_ == Phase::kSnapshotData;
    case FrameType::kSnapshotEnd:
      OnSnapshotEnd(f.payload);
      return false;
    case FrameType::kCallRequest:
      OnCallRequest(f.payload);
      return !closed_;
    default:
      return false;  // not expected in any phase (checked above)
  }
}

bool InboundConn::OnSnapshotHeader(std::string_view payload) {
  if (!snap_msg_.ParseFromArray(payload.data(), static_cast<int>(payload.size())) ||
      snap_msg_.type() != raftpb::MSG_SNAP) {
    Corrupt("snapshot stream does not start with a MsgSnap");
    return false;
  }
  log::Info(
      "receiving database snapshot from remote peer",
      {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", hs_.sender_id),
       log::F("index", snap_msg_.snapshot().metadata().index()),
       log::F("term", snap_msg_.snapshot().metadata().term())});
  sink_ = t_->OnSnapshot(snap_msg_);
  if (!sink_) {
    SendResult(false, "snapshot refused by the receiver");
    return false;
  }
  phase_ = Phase::kSnapshotData;
  return true;
}

void InboundConn::OnSnapshotChunk(std::string_view payload) {
  snap_crc_ = common::Crc32c(snap_crc_, payload);
  snap_bytes_ += payload.size();
  Status st = sink_->Write(payload);
  if (!st.ok()) SendResult(false, "snapshot sink: " + st.ToString());
}

void InboundConn::OnSnapshotEnd(std::string_view payload) {
  if (payload.size() != kSnapshotEndSize) return Corrupt("bad snapshot end frame");
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  if (GetU64(p) != snap_bytes_ || GetU32(p + 8) != snap_crc_) {
    return SendResult(false, "snapshot size or checksum mismatch");
  }
  Status st = sink_->Finish();
  sink_.reset();
  if (!st.ok()) return SendResult(false, "snapshot sink: " + st.ToString());
  log::Info(
      "received database snapshot from remote peer",
      {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", hs_.sender_id),
       log::F("bytes", snap_bytes_), log::F("index", snap_msg_.snapshot().metadata().index())});
  t_->OnSnapshotReceived(std::move(snap_msg_));
  SendResult(true, "");
}

void InboundConn::SendResult(bool ok, const std::string& why) {
  phase_ = Phase::kSnapshotDone;
  sink_.reset();
  if (!ok) {
    log::Warn("failed to receive database snapshot from remote peer",
              {log::Hex("local-member-id", t_->opts().local_id),
               log::Hex("remote-peer-id", hs_.sender_id), log::F("error", why),
               log::F("bytes", snap_bytes_)});
  }
  std::string payload(1, ok ? '\1' : '\0');
  payload += why.substr(0, kMaxResultBytes - 1);
  result_.clear();
  AppendFrame(result_, FrameType::kSnapshotResult, payload);
  stream_->AsyncWrite(asio::buffer(result_),
                      [self = shared_from_this()](const error_code&, size_t) { self->Close(); });
}

void InboundConn::OnCallRequest(std::string_view payload) {
  auto req = DecodeCallRequest(payload);
  if (!req.ok()) return Corrupt(req.status().message());
  const uint64_t id = req->id;
  ++calls_in_flight_;  // until QueueResponse
  if (calls_in_flight_ > kMaxInboundCalls) {
    return QueueResponse(id,
                         Status(Code::kResourceExhausted, "too many concurrent peer calls (" +
                                                              std::to_string(kMaxInboundCalls) +
                                                              ") on one connection"),
                         std::string());
  }
  auto responder = std::make_shared<CallResponder>(t_->life(), weak_from_this(), id);
  auto respond = [responder](Status st, std::string payload) {
    responder->Respond(std::move(st), std::move(payload));
  };
  if (!t_->OnCall(req->method, std::string(req->payload), std::move(respond))) {
    // No on_call. The responder (still unanswered) would say "dropped"; say why instead.
    responder->Respond(Status(Code::kUnimplemented, "peer calls are not served by this member"),
                       std::string());
  }
}

void InboundConn::QueueResponse(uint64_t id, Status st, std::string payload) {
  if (closed_) return;
  if (calls_in_flight_ > 0) --calls_in_flight_;
  const size_t size = kCallResponseOverhead + st.message().size() + payload.size();
  if (size > t_->opts().max_message_bytes) {
    log::Warn("peer call answer exceeds max-message-bytes; answering with an error instead",
              {log::Hex("local-member-id", t_->opts().local_id),
               log::Hex("remote-peer-id", hs_.sender_id), log::F("bytes", uint64_t{size}),
               log::F("max-message-bytes", uint64_t{t_->opts().max_message_bytes})});
    st = Status(Code::kResourceExhausted,
                "peer call answer of " + std::to_string(size) + " bytes exceeds max-message-bytes");
    payload.clear();
  }
  AppendCallResponse(out_, id, st, payload);
  WriteResponses();
}

void InboundConn::WriteResponses() {
  if (closed_ || out_active_ || out_.empty()) return;
  out_writing_.swap(out_);
  out_.clear();
  out_active_ = true;
  stream_->AsyncWrite(asio::buffer(out_writing_),
                      [self = shared_from_this()](const error_code& ec, size_t) {
                        self->out_active_ = false;
                        self->out_writing_.clear();
                        if (self->out_writing_.capacity() > kKeepCapacity) {
                          std::string().swap(self->out_writing_);
                        }
                        if (self->closed_) return;
                        if (ec) return self->Closed(ec);
                        self->WriteResponses();
                      });
}

void InboundConn::ServeClusterInfo() {
  phase_ = Phase::kClusterInfo;
  std::optional<std::string> info = t_->OnClusterInfo();
  Status st;
  if (!info) {
    st = Unavailable("member " + HexId(t_->opts().local_id) +
                     " has no cluster information to share");
    info.emplace();
  } else if (kReplyOverhead + info->size() > t_->opts().max_message_bytes) {
    st = Status(Code::kResourceExhausted, "cluster information exceeds max-message-bytes");
    info->clear();
  }
  log::Info(
      "serving cluster information to a peer",
      {log::Hex("local-member-id", t_->opts().local_id), log::Hex("remote-peer-id", hs_.sender_id),
       log::F("remote-address", remote_), log::F("error", st.message())});
  result_.clear();
  AppendClusterInfo(result_, st, *info);
  stream_->AsyncWrite(asio::buffer(result_),
                      [self = shared_from_this()](const error_code&, size_t) { self->Close(); });
}

// ---------------------------------------------------------------------------------------------
// Listener implementation

void Listener::Accept() {
  acceptor_.async_accept(
      t_->NewStrand(), [self = shared_from_this()](const error_code& ec, Tcp::socket sock) {
        if (self->t_->stopping() || ec == asio::error::operation_aborted) return;
        if (ec) {
          uint64_t suppressed = 0;
          if (self->t_->Limit("accept:" + self->url_.ToString(), suppressed)) {
            log::Warn("peer listener: accept failed",
                      {log::F("listen-url", self->url_.ToString()), log::F("error", ErrorText(ec)),
                       log::F("suppressed", suppressed)});
          }
          // E.g. out of file descriptors: retry shortly rather than spin.
          self->retry_.expires_after(milliseconds(100));
          self->retry_.async_wait([self](const error_code& ec) {
            if (!ec && !self->t_->stopping()) self->Accept();
          });
          return;
        }
        auto conn = std::make_shared<InboundConn>(self->t_, self->url_, std::move(sock));
        self->t_->Track(conn);
        conn->Start();
        self->Accept();
      });
}

// ---------------------------------------------------------------------------------------------
// TransportImpl implementation

namespace {
constexpr auto kTlsOptions = ssl::context::default_workarounds | ssl::context::no_sslv2 |
                             ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                             ssl::context::no_tlsv1_1 | ssl::context::single_dh_use;

Status TlsFileError(const std::string& what, const std::string& file, const error_code& ec) {
  return InvalidArgument("peer-transport-security: " + what + " \"" + file +
                         "\": " + ErrorText(ec));
}

}  // namespace

// The dialing side presents the peer certificate (as etcd peers do) and verifies the server
// against trusted-ca-file, or without one against the system's CAs. Those are loaded at the
// first dial that uses the context: reading the system's bundle takes ~40 ms, which every start
// would pay without a single https peer.
Status ClientTls::Init(const common::TlsConfig& tls) {
  error_code ec;
  ctx_.emplace(ssl::context::tls_client);
  ssl::context& c = *ctx_;
  c.set_options(kTlsOptions);
  if (tls.HasCertificate()) {
    if (c.use_certificate_chain_file(tls.cert_file, ec); ec) {
      return TlsFileError("cert-file", tls.cert_file, ec);
    }
    if (c.use_private_key_file(tls.key_file, ssl::context::pem, ec); ec) {
      return TlsFileError("key-file", tls.key_file, ec);
    }
  }
  if (!tls.trusted_ca_file.empty()) {
    if (c.load_verify_file(tls.trusted_ca_file, ec); ec) {
      return TlsFileError("trusted-ca-file", tls.trusted_ca_file, ec);
    }
  }
  system_cas_ = tls.trusted_ca_file.empty();
  c.set_verify_mode(ssl::verify_peer);
  return Status::Ok();
}

ssl::context& ClientTls::Get() {
  if (system_cas_) {
    std::call_once(system_cas_once_, [this] {
      error_code ec;
      ctx_->set_default_verify_paths(ec);
      if (ec)
        log::Warn("cannot load the system's CA certificates", {log::F("error", ec.message())});
    });
  }
  return *ctx_;
}

Status TransportImpl::InitTls() {
  const common::TlsConfig& tls = opts_.tls;
  error_code ec;
  bool https_listener = false;
  for (const auto& u : opts_.listen_urls) https_listener |= u.tls();
  if (https_listener) {
    if (!tls.HasCertificate()) {
      for (const auto& u : opts_.listen_urls) {
        if (u.tls()) {
          return InvalidArgument("listen-peer-urls " + u.ToString() +
                                 ": https requires peer-transport-security cert-file and key-file");
        }
      }
    }
    server_tls_.emplace(ssl::context::tls_server);
    ssl::context& c = *server_tls_;
    c.set_options(kTlsOptions);
    if (c.use_certificate_chain_file(tls.cert_file, ec); ec)
      return TlsFileError("cert-file", tls.cert_file, ec);
    if (c.use_private_key_file(tls.key_file, ssl::context::pem, ec); ec) {
      return TlsFileError("key-file", tls.key_file, ec);
    }
    static const unsigned char kSessionContext[] = "etcdw-peer";
    SSL_CTX_set_session_id_context(c.native_handle(), kSessionContext, sizeof kSessionContext - 1);
    if (tls.client_cert_auth) {
      if (tls.trusted_ca_file.empty()) {
        return InvalidArgument(
            "peer-transport-security: client-cert-auth requires trusted-ca-file");
      }
      if (c.load_verify_file(tls.trusted_ca_file, ec); ec) {
        return TlsFileError("trusted-ca-file", tls.trusted_ca_file, ec);
      }
      if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(tls.trusted_ca_file.c_str())) {
        SSL_CTX_set_client_CA_list(c.native_handle(), names);
      }
      c.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    } else {
      c.set_verify_mode(ssl::verify_none);
    }
  }
  return client_tls_.Init(tls);
}

Status TransportImpl::Listen(const common::Url& url) {
  const std::string where = "listen-peer-urls " + url.ToString() + ": ";
  error_code ec;
  Tcp::endpoint ep;
  if (url.host.empty()) {
    ep = Tcp::endpoint(Tcp::v4(), url.port);
  } else if (auto addr = asio::ip::make_address(url.host, ec); !ec) {
    ep = Tcp::endpoint(addr, url.port);
  } else {
    Tcp::resolver resolver(io_);
    auto results = resolver.resolve(url.host, std::to_string(url.port), ec);
    if (ec || results.empty()) {
      return InvalidArgument(where + "cannot resolve host: " + (ec ? ErrorText(ec) : "no address"));
    }
    // As Go's net.Listen: an IPv4 address when the name has one.
    ep = results.begin()->endpoint();
    for (const auto& r : results) {
      if (r.endpoint().address().is_v4()) {
        ep = r.endpoint();
        break;
      }
    }
  }
  Tcp::acceptor acceptor(NewStrand());
  if (acceptor.open(ep.protocol(), ec); ec) return Unavailable(where + "socket: " + ErrorText(ec));
  // SO_REUSEADDR only (rebinding while old connections linger in TIME_WAIT); never
  // SO_REUSEPORT, so a port held by another process is an error.
  acceptor.set_option(Tcp::acceptor::reuse_address(true), ec);
  if (acceptor.bind(ep, ec); ec) return Unavailable(where + "bind: " + ErrorText(ec));
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) {
    return Unavailable(where + "listen: " + ErrorText(ec));
  }
  common::Url bound = url;
  bound.port = acceptor.local_endpoint(ec).port();
  auto l = std::make_shared<Listener>(this, bound, std::move(acceptor));
  ports_.push_back(bound.port);
  listeners_.push_back(std::move(l));
  return Status::Ok();
}

Status TransportImpl::Init() {
  if (opts_.local_id == 0) return InvalidArgument("peer transport: local member ID must not be 0");
  if (opts_.max_message_bytes < 1024 || opts_.max_message_bytes > 0xffffffffu) {
    return InvalidArgument("peer transport: max_message_bytes out of range");
  }
  if (opts_.max_queued_messages == 0) {
    return InvalidArgument("peer transport: max_queued_messages must be positive");
  }
  if (opts_.dial_timeout.count() <= 0 || opts_.max_backoff.count() <= 0) {
    return InvalidArgument("peer transport: dial_timeout and max_backoff must be positive");
  }
  if (opts_.max_call_connections == 0 || opts_.call_idle_timeout.count() <= 0) {
    return InvalidArgument(
        "peer transport: max_call_connections and call_idle_timeout must be positive");
  }
  opts_.dial_timeout = ClampTimeout(opts_.dial_timeout);
  opts_.max_backoff = ClampTimeout(opts_.max_backoff);
  opts_.call_idle_timeout = ClampTimeout(opts_.call_idle_timeout);
  ETCDW_RETURN_IF_ERROR(InitTls());
  for (const auto& url : opts_.listen_urls) ETCDW_RETURN_IF_ERROR(Listen(url));
  return Status::Ok();
}

void TransportImpl::Run() {
  for (auto& l : listeners_) {
    asio::post(l->executor(), [l] { l->Accept(); });
  }
  for (int i = 0; i < kThreads; ++i) {
    threads_.push_back(common::NamedThread("peer-transport", [this] {
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          log::Error("peer transport: a handler threw", {log::F("error", e.what())});
        }
      }
    }));
  }
  std::string urls;
  for (const auto& l : listeners_) urls += (urls.empty() ? "" : ",") + l->url().ToString();
  log::Info("peer transport listening",
            {log::Hex("local-member-id", opts_.local_id), log::Hex("cluster-id", opts_.cluster_id),
             log::F("listen-peer-urls", urls)});
}

void TransportImpl::Track(const std::shared_ptr<Closable>& c) {
  std::lock_guard<std::mutex> lock(live_mu_);
  if (live_.size() >= live_sweep_at_) {
    std::erase_if(live_, [](const std::weak_ptr<Closable>& w) { return w.expired(); });
    live_sweep_at_ = std::max<size_t>(64, live_.size() * 2);
  }
  live_.push_back(c);
}

void TransportImpl::RegisterInbound(uint64_t sender, const std::shared_ptr<InboundConn>& conn) {
  std::shared_ptr<InboundConn> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = inbound_[sender];
    old = slot.lock();
    slot = conn;
  }
  if (old && old != conn) asio::post(old->executor(), [old] { old->Close(); });
}

void TransportImpl::AddPeer(uint64_t id, const std::vector<std::string>& urls) {
  if (stopping() || id == opts_.local_id || id == 0) return;
  std::vector<common::Url> parsed;
  for (const auto& s : urls) {
    auto u = common::ParseUrl(s);
    if (!u.ok()) {
      log::Warn("ignoring invalid peer URL", {log::Hex("remote-peer-id", id), log::F("url", s),
                                              log::F("error", u.status().message())});
      continue;
    }
    parsed.push_back(*u);
  }
  std::shared_ptr<Peer> peer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = peers_.find(id);
    if (it != peers_.end()) {
      it->second->SetUrls(std::move(parsed));
      return;
    }
    peer = std::make_shared<Peer>(this, id, std::move(parsed), NewStrand());
    peers_.emplace(id, peer);
  }
  peer->Start();
}

void TransportImpl::RemovePeer(uint64_t id) {
  std::shared_ptr<Peer> peer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = peers_.find(id);
    if (it == peers_.end()) return;
    peer = std::move(it->second);
    peers_.erase(it);
  }
  peer->Remove();
}

void TransportImpl::Send(std::vector<raftpb::Message> msgs) {
  if (stopping()) return;
  // Group by recipient so that each peer's share is queued under one lock, in order.
  std::vector<std::pair<uint64_t, std::vector<const raftpb::Message*>>> groups;
  for (const auto& m : msgs) {
    if (m.type() == raftpb::MSG_SNAP) {
      log::Warn("peer transport: MsgSnap must be sent with SendSnapshot; dropped",
                {log::Hex("remote-peer-id", m.to())});
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == m.to(); });
    if (it == groups.end()) {
      groups.emplace_back(m.to(), std::vector<const raftpb::Message*>{});
      it = std::prev(groups.end());
    }
    it->second.push_back(&m);
  }
  for (auto& [to, group] : groups) {
    std::shared_ptr<Peer> peer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = peers_.find(to);
      if (it != peers_.end()) peer = it->second;
    }
    if (!peer) {
      log::Debug("peer transport: message to unknown peer dropped",
                 {log::Hex("remote-peer-id", to)});
      continue;
    }
    peer->Enqueue(group);
  }
}

void TransportImpl::SendSnapshot(raftpb::Message msg, std::unique_ptr<SnapshotSource> source) {
  if (stopping()) return;
  const uint64_t to = msg.to();
  std::vector<common::Url> urls;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = peers_.find(to);
    if (it != peers_.end()) {
      known = true;
      urls = it->second->urls();
    }
  }
  const bool is_snap = msg.type() == raftpb::MSG_SNAP;
  auto sender =
      std::make_shared<SnapshotSender>(this, NewStrand(), std::move(msg), std::move(source));
  Track(sender);
  if (!is_snap) return sender->Fail("not a MsgSnap");
  if (!known) return sender->Fail("unknown peer");
  sender->Start(std::move(urls));
}

bool TransportImpl::Connected(uint64_t peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(peer);
  return it != peers_.end() && it->second->connected();
}

void TransportImpl::Call(uint64_t peer, uint32_t method, std::string payload, milliseconds timeout,
                         CallDone done) {
  std::shared_ptr<Peer> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = peers_.find(peer);
    if (it != peers_.end()) p = it->second;
  }
  std::vector<common::Url> urls;
  if (p) urls = p->urls();
  {
    std::lock_guard<std::mutex> lock(life_->mu);
    if (life_->alive) {
      if (p) {
        p->calls()->Call(std::move(urls), method, std::move(payload), timeout, std::move(done));
      } else {
        asio::post(io_, [this, peer, done = std::move(done)]() mutable {
          CompleteCall(std::move(done), Unavailable("unknown peer " + HexId(peer)), std::string());
        });
      }
      return;
    }
  }
  done(Unavailable("peer transport stopped"), std::string());
}

CallConnectionStats TransportImpl::CallStats(uint64_t peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(peer);
  return it == peers_.end() ? CallConnectionStats{} : it->second->calls()->stats();
}

void TransportImpl::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  {
    // From here on, nobody outside the transport posts to the io_context.
    std::lock_guard<std::mutex> lock(life_->mu);
    life_->alive = false;
  }
  stopping_ = true;
  // Prompt: the threads finish the handler they are in (callbacks included) and return.
  const bool started = !threads_.empty();
  work_.reset();
  io_.stop();
  for (auto& th : threads_) th.join();
  threads_.clear();
  joined_ = true;
  // Single-threaded from here: close everything, then run the aborted handlers so that they
  // release what they hold (they see stopping() and do nothing else).
  for (auto& l : listeners_) l->Close();
  std::unordered_map<uint64_t, std::shared_ptr<Peer>> peers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    peers.swap(peers_);
    inbound_.clear();
  }
  for (auto& [id, p] : peers) p->Close();
  std::vector<std::weak_ptr<Closable>> live;
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    live.swap(live_);
  }
  for (auto& w : live) {
    if (auto c = w.lock()) c->Close();
  }
  io_.restart();
  io_.poll();
  listeners_.clear();
  // Calls that a transport thread would have completed after Stop() began.
  std::vector<CallDone> deferred;
  {
    std::lock_guard<std::mutex> lock(deferred_mu_);
    deferred.swap(deferred_);
  }
  for (auto& done : deferred) done(Unavailable("peer transport stopped"), std::string());
  if (started) log::Info("peer transport stopped", {log::Hex("local-member-id", opts_.local_id)});
}

// ---------------------------------------------------------------------------------------------
// FetchClusterInfo: a DialOp without a transport, on a private io_context run by the caller.

class StandaloneEnv final : public DialEnv {
 public:
  StandaloneEnv(const common::TlsConfig& tls, milliseconds timeout) {
    opts_.tls = tls;
    opts_.dial_timeout = timeout;  // cluster ID, sender and receiver: 0
  }
  Status InitTls() { return client_tls_.Init(opts_.tls); }
  const PeerTransportOptions& opts() const override { return opts_; }
  bool stopping() const override { return false; }
  ssl::context& client_tls() override { return client_tls_.Get(); }
  bool Limit(const std::string& key, uint64_t& suppressed) override {
    return limiter_.Allow(key, suppressed);
  }

 private:
  PeerTransportOptions opts_;
  LogLimiter limiter_;
  ClientTls client_tls_;
};

class ClusterInfoFetch : public std::enable_shared_from_this<ClusterInfoFetch> {
 public:
  ClusterInfoFetch(DialEnv* env, Executor ex, std::vector<common::Url> urls, milliseconds timeout)
      : env_(env), ex_(ex), urls_(std::move(urls)), timeout_(timeout), timer_(ex) {}
  void Start() { Next(); }
  // Once the io_context has run out of work.
  Result<std::string> TakeResult() {
    if (ok_) return std::move(answer_);
    return Unavailable("cannot fetch cluster information from any peer URL: " + errors_);
  }

 private:
  bool Stale(uint64_t a) const { return done_ || a != attempt_; }
  const common::Url& url() const { return urls_[next_ - 1]; }

  void Next() {
    if (next_ >= urls_.size()) {
      done_ = true;
      return;
    }
    const uint64_t a = ++attempt_;
    ++next_;
    timer_.expires_after(timeout_);
    timer_.async_wait([self = shared_from_this(), a](const error_code& ec) {
      if (ec || self->Stale(a)) return;
      self->Fail(self->url().ToString() + ": timed out after " + Millis(self->timeout_));
    });
    dial_ = std::make_shared<DialOp>(
        env_, ex_, 0, StreamKind::kClusterInfo, std::vector<common::Url>{url()},
        [self = shared_from_this(), a](Status st, std::shared_ptr<Stream> s) {
          self->OnDialed(a, std::move(st), std::move(s));
        });
    auto op = dial_;  // `done` may run (and reset dial_) inside Start()
    op->Start();
  }

  void OnDialed(uint64_t a, Status st, std::shared_ptr<Stream> s) {
    if (Stale(a)) {
      if (s) s->Close();
      return;
    }
    dial_.reset();
    if (!st.ok()) return Fail(st.message());  // names the URL
    stream_ = std::move(s);
    stream_->AsyncRead(asio::buffer(hdr_), [self = shared_from_this(), a, s = stream_](
                                               const error_code& ec, size_t) {
      if (self->Stale(a)) return;
      if (ec) return self->Fail(self->url().ToString() + ": no answer: " + ErrorText(ec));
      self->OnHeader(a);
    });
  }

  void OnHeader(uint64_t a) {
    fh_ = DecodeFrameHeader(hdr_);
    if (fh_.type != static_cast<uint8_t>(FrameType::kClusterInfo) || fh_.length < kReplyOverhead ||
        fh_.length > kMaxClusterInfoBytes) {
      return Fail(url().ToString() + ": bad answer frame");
    }
    payload_.resize(fh_.length);
    stream_->AsyncRead(asio::buffer(payload_), [self = shared_from_this(), a, s = stream_](
                                                   const error_code& ec, size_t) {
      if (self->Stale(a)) return;
      if (ec) return self->Fail(self->url().ToString() + ": answer cut short: " + ErrorText(ec));
      self->OnPayload();
    });
  }

  void OnPayload() {
    if (common::Crc32c(0, payload_) != fh_.crc) {
      return Fail(url().ToString() + ": corrupt answer (checksum mismatch)");
    }
    auto reply = DecodeReply(payload_);
    if (!reply.ok())
      return Fail(url().ToString() + ": corrupt answer: " + reply.status().message());
    if (!reply->status.ok()) return Fail(url().ToString() + ": " + reply->status.message());
    answer_ = std::string(reply->payload);
    ok_ = true;
    done_ = true;
    log::Info("fetched cluster information from peer",
              {log::F("url", url().ToString()), log::F("bytes", uint64_t{answer_.size()})});
    EndAttempt();
  }

  void Fail(const std::string& why) {
    log::Debug("cannot fetch cluster information", {log::F("error", why)});
    if (!errors_.empty()) errors_ += "; ";
    errors_ += why;
    EndAttempt();
    Next();
  }

  void EndAttempt() {
    timer_.cancel();
    if (dial_) dial_->Cancel();
    dial_.reset();
    if (stream_) stream_->Close();
    stream_.reset();
  }

  DialEnv* env_;
  Executor ex_;
  std::vector<common::Url> urls_;
  milliseconds timeout_;
  asio::steady_timer timer_;
  size_t next_ = 0;
  uint64_t attempt_ = 0;
  bool done_ = false;
  bool ok_ = false;
  std::shared_ptr<DialOp> dial_;
  std::shared_ptr<Stream> stream_;
  std::array<uint8_t, kFrameHeaderSize> hdr_{};
  FrameHeader fh_;
  std::string payload_;
  std::string answer_;
  std::string errors_;
};

}  // namespace
}  // namespace transport

Result<std::string> PeerTransport::FetchClusterInfo(const std::vector<common::Url>& urls,
                                                    const common::TlsConfig& tls,
                                                    std::chrono::milliseconds timeout) {
  namespace asio = boost::asio;
  if (urls.empty()) return InvalidArgument("cluster information: no peer URLs to ask");
  if (timeout.count() <= 0) return InvalidArgument("cluster information: timeout must be positive");
  timeout = transport::ClampTimeout(timeout);
  // Declared before the io_context: the TLS context must outlive every stream.
  transport::StandaloneEnv env(tls, timeout);
  if (std::any_of(urls.begin(), urls.end(), [](const common::Url& u) { return u.tls(); })) {
    ETCDW_RETURN_IF_ERROR(env.InitTls());
  }
  asio::io_context io;
  auto fetch =
      std::make_shared<transport::ClusterInfoFetch>(&env, io.get_executor(), urls, timeout);
  asio::post(io, [fetch] { fetch->Start(); });
  io.run();  // until the last URL is answered or has failed
  return fetch->TakeResult();
}

Result<std::unique_ptr<PeerTransport>> PeerTransport::Start(PeerTransportOptions opts,
                                                            PeerTransportHandler handler) {
  auto t = std::make_unique<transport::TransportImpl>(std::move(opts), std::move(handler));
  ETCDW_RETURN_IF_ERROR(t->Init());
  t->Run();
  return std::unique_ptr<PeerTransport>(std::move(t));
}

}  // namespace etcdw::server
