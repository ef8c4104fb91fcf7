#include "transport_impl.h"

#include "etcdw/common/logging.h"
#include "etcdw/common/thread_name.h"
#include "inbound_conn.h"
#include "peer.h"
#include "snapshot_sender.h"

namespace etcdw::peer_transport {

namespace {
// One thread: the transport's work is short handlers (a frame parsed, a queue written), and a
// second thread only added wake-ups between the two (cluster puts spent a fifth more CPU).
constexpr int kThreads = 1;
}  // namespace

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
          self->retry_.ExpiresAfter(milliseconds(100));
          self->retry_.AsyncWait([self](const error_code& ec) {
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
  auto l = std::make_shared<Listener>(this, bound, std::move(acceptor), opts_.clock);
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

Result<std::unique_ptr<PeerTransport>> PeerTransport::Start(PeerTransportOptions opts,
                                                            PeerTransportHandler handler) {
  auto t = std::make_unique<TransportImpl>(std::move(opts), std::move(handler));
  ETCDW_RETURN_IF_ERROR(t->Init());
  t->Run();
  return std::unique_ptr<PeerTransport>(std::move(t));
}

}  // namespace etcdw::peer_transport
