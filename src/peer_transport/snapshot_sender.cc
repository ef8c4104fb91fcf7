#include "snapshot_sender.h"

#include "etcdw/common/hash.h"
#include "etcdw/common/logging.h"
#include "transport_impl.h"

namespace etcdw::peer_transport {

SnapshotSender::SnapshotSender(TransportImpl* t, Executor ex, raftpb::Message msg,
                               std::unique_ptr<SnapshotSource> source)
    : t_(t),
      ex_(ex),
      msg_(std::move(msg)),
      source_(std::move(source)),
      chunk_bytes_(t->ChunkBytes()),
      started_(t->opts().clock->Now()) {}

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
  const auto ms =
      std::chrono::duration_cast<milliseconds>(t_->opts().clock->Now() - started_).count();
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

}  // namespace etcdw::peer_transport
