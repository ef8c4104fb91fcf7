#include "inbound_conn.h"

#include <optional>

#include "etcdw/common/hash.h"

namespace etcdw::peer_transport {

namespace {
// Calls in flight on one inbound call connection; further requests are answered at once with
// ResourceExhausted.
constexpr size_t kMaxInboundCalls = 1024;

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
      timer_(stream_->socket().get_executor(), t->opts().clock),
      in_(t->opts().max_message_bytes) {}

void InboundConn::Start() {
  asio::post(executor(), [self = shared_from_this()] {
    if (self->closed_) return;
    self->remote_ = self->stream_->RemoteAddress();
    self->remote_host_ = self->remote_.substr(0, self->remote_.rfind(':'));
    SetSocketOptions(self->stream_->socket());
    self->timer_.ExpiresAfter(self->t_->HandshakeTimeout());
    self->timer_.AsyncWait([self](const error_code& ec) {
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
  timer_.Cancel();
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
  timer_.Cancel();
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

}  // namespace etcdw::peer_transport
