// PeerTransport::FetchClusterInfo: a joining member asks a peer for its cluster information,
// without a running transport. ClusterInfoFetch tries each URL in turn through a DialOp whose
// environment is StandaloneEnv (no cluster ID, no member IDs), on a private io_context run by the
// calling thread, and reads the one kClusterInfo frame the peer answers with.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "clock_timer.h"
#include "dial.h"
#include "etcdw/common/hash.h"
#include "etcdw/common/logging.h"
#include "etcdw/peer_transport/peer_transport.h"
#include "frame.h"
#include "stream.h"
#include "tls.h"
#include "transport_common.h"

namespace etcdw::peer_transport {
namespace {

// The largest cluster-information answer FetchClusterInfo accepts.
constexpr size_t kMaxClusterInfoBytes = 64 << 20;

// FetchClusterInfo: a DialOp without a transport, on a private io_context run by the caller.

class StandaloneEnv final : public DialEnv {
 public:
  StandaloneEnv(const common::TlsConfig& tls, milliseconds timeout, const common::Clock& clock)
      : limiter_(&clock) {
    opts_.tls = tls;
    opts_.dial_timeout = timeout;  // cluster ID, sender and receiver: 0
    opts_.clock = &clock;
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
      : env_(env),
        ex_(ex),
        urls_(std::move(urls)),
        timeout_(timeout),
        timer_(ex, env->opts().clock) {}
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
    timer_.ExpiresAfter(timeout_);
    timer_.AsyncWait([self = shared_from_this(), a](const error_code& ec) {
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
    timer_.Cancel();
    if (dial_) dial_->Cancel();
    dial_.reset();
    if (stream_) stream_->Close();
    stream_.reset();
  }

  DialEnv* env_;
  Executor ex_;
  std::vector<common::Url> urls_;
  milliseconds timeout_;
  ClockTimer timer_;
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

Result<std::string> PeerTransport::FetchClusterInfo(const std::vector<common::Url>& urls,
                                                    const common::TlsConfig& tls,
                                                    std::chrono::milliseconds timeout,
                                                    const common::Clock& clock) {
  namespace asio = boost::asio;
  if (urls.empty()) return InvalidArgument("cluster information: no peer URLs to ask");
  if (timeout.count() <= 0) return InvalidArgument("cluster information: timeout must be positive");
  timeout = ClampTimeout(timeout);
  // Declared before the io_context: the TLS context must outlive every stream.
  StandaloneEnv env(tls, timeout, clock);
  if (std::any_of(urls.begin(), urls.end(), [](const common::Url& u) { return u.tls(); })) {
    ETCDW_RETURN_IF_ERROR(env.InitTls());
  }
  asio::io_context io;
  auto fetch = std::make_shared<ClusterInfoFetch>(&env, io.get_executor(), urls, timeout);
  asio::post(io, [fetch] { fetch->Start(); });
  io.run();  // until the last URL is answered or has failed
  return fetch->TakeResult();
}
}  // namespace etcdw::peer_transport
