// SnapshotSender: one outbound snapshot transfer (PeerTransport::SendSnapshot), on a connection
// of its own: the MsgSnap header frame, the source's bytes in chunk frames, the end frame, then
// the receiver's result, reported through on_snapshot_sent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dial.h"
#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/peer_transport/peer_transport.h"
#include "etcdw/raft.pb.h"
#include "frame.h"
#include "stream.h"
#include "transport_common.h"

namespace etcdw::peer_transport {

class TransportImpl;

// SnapshotSender: MsgSnap header, chunks, end; then the receiver's result. No lock: everything
// but the constructor runs on its strand (Start and Fail post to it), or on Stop()'s thread once
// the transport threads are joined.

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
  TimePoint started_;
  std::array<uint8_t, kFrameHeaderSize> hdr_{};
  FrameHeader result_header_;
  std::string result_;
};

}  // namespace etcdw::peer_transport
