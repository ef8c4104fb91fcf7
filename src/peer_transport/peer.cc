#include "peer.h"

#include <algorithm>
#include <random>

#include "etcdw/common/logging.h"
#include "frame.h"
#include "transport_impl.h"

namespace etcdw::peer_transport {

namespace {
// The first retry after a failed dial; doubled per failure up to max_backoff.
constexpr milliseconds kInitialBackoff{100};
// on_unreachable is reported at most this often per peer.
constexpr milliseconds kUnreachableInterval{200};
}  // namespace

Peer::Peer(TransportImpl* t, uint64_t id, std::vector<common::Url> urls, Executor ex)
    : t_(t),
      id_(id),
      ex_(ex),
      urls_(std::move(urls)),
      backoff_timer_(ex, t->opts().clock),
      calls_(std::make_shared<CallPool>(t, id, ex)) {}

bool Peer::ShouldReportLocked(TimePoint now) {
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
    if (too_large + full + unreachable > 0) report = ShouldReportLocked(t_->opts().clock->Now());
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
    asio::post(ex_, [self = shared_from_this()] { self->backoff_timer_.Cancel(); });
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
    backoff_timer_.ExpiresAfter(delay);
    backoff_timer_.AsyncWait(
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
  return dropped && ShouldReportLocked(t_->opts().clock->Now());
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
  backoff_timer_.Cancel();
  if (stream_) stream_->Close();
  stream_.reset();
  connected_ = false;
  calls_->Close();
}

}  // namespace etcdw::peer_transport
