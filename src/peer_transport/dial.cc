#include "dial.h"

#include "etcdw/common/logging.h"
#include "etcdw/common/tls_context.h"

namespace etcdw::peer_transport {

DialOp::DialOp(DialEnv* t, Executor ex, uint64_t peer, StreamKind kind,
               std::vector<common::Url> urls, Done done)
    : t_(t),
      ex_(ex),
      peer_(peer),
      kind_(kind),
      urls_(std::move(urls)),
      done_(std::move(done)),
      resolver_(ex),
      timer_(ex, t->opts().clock) {}

void DialOp::Cancel() {
  if (finished_) return;
  finished_ = true;
  done_ = nullptr;
  CloseAttempt();
}

void DialOp::CloseAttempt() {
  resolver_.cancel();
  timer_.Cancel();
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
  timer_.ExpiresAfter(t_->opts().dial_timeout);
  timer_.AsyncWait([self = shared_from_this(), a](const error_code& ec) {
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
  if (Status st = common::ExpectServerName(stream_->tls().native_handle(), url.host); !st.ok()) {
    return AttemptFailed(st.message());
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
  timer_.Cancel();
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

}  // namespace etcdw::peer_transport
