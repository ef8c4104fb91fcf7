#include "call_pool.h"

#include "etcdw/common/logging.h"
#include "frame.h"
#include "transport_impl.h"

namespace etcdw::peer_transport {

namespace {
// A call connection takes new calls while it has fewer than this many in flight; beyond that
// the pool dials another (up to max_call_connections).
constexpr size_t kCallsPerConnection = 8;
}  // namespace

void CallPool::Call(std::vector<common::Url> urls, uint32_t method, std::string payload,
                    milliseconds timeout, CallDone done) {
  timeout = ClampTimeout(timeout);
  const TimePoint deadline = t_->opts().clock->Now() + timeout;
  asio::post(
      ex_, [self = shared_from_this(), urls = std::move(urls), method, payload = std::move(payload),
            timeout, deadline, done = std::move(done)]() mutable {
        self->Start(urls, method, payload, timeout, deadline, std::move(done));
      });
}

void CallPool::Complete(PendingCall& call, Status st, std::string payload) {
  if (!call.done) return;
  CallDone done = std::move(call.done);
  call.done = nullptr;
  call.timer.Cancel();
  t_->CompleteCall(std::move(done), std::move(st), std::move(payload));
}

void CallPool::Start(const std::vector<common::Url>& urls, uint32_t method,
                     const std::string& payload, milliseconds timeout, TimePoint deadline,
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
  auto call = std::make_shared<PendingCall>(ex_, t_->opts().clock, ++next_id_, std::move(done));
  call->timer.ExpiresAt(deadline);
  call->timer.AsyncWait([self = shared_from_this(), call, timeout](const error_code& ec) {
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
    c = std::make_shared<CallConn>(ex_, t_->opts().clock, t_->opts().max_message_bytes);
    conns_.push_back(c);
    dial = true;
  }
  call->conn = c;
  c->calls.emplace(call->id, call);
  ++c->idle_gen;  // disarms the idle timer
  c->idle_timer.Cancel();
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
  c->idle_timer.ExpiresAfter(t_->opts().call_idle_timeout);
  c->idle_timer.AsyncWait([self = shared_from_this(), c, gen](const error_code& ec) {
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
  c->idle_timer.Cancel();
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

}  // namespace etcdw::peer_transport
