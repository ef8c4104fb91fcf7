// Dialing a member: DialOp tries each of its URLs in turn (resolve, TCP connect, TLS, handshake,
// acknowledgement) and hands the accepted stream to its `done`. DialEnv is what it needs from its
// owner: the transport (TransportImpl), or FetchClusterInfo's stand-in (StandaloneEnv). Peer,
// CallPool, SnapshotSender and ClusterInfoFetch each dial through a DialOp on their own strand.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "clock_timer.h"
#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/peer_transport/peer_transport.h"
#include "frame.h"
#include "stream.h"
#include "transport_common.h"

namespace etcdw::peer_transport {

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

// DialOp: reach one member on one of its URLs and complete the handshake. No lock: everything
// runs on the executor given to the constructor (its owner's strand).

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
  ClockTimer timer_;
  std::shared_ptr<Tcp::socket> connecting_;
  std::shared_ptr<Stream> stream_;
  std::array<uint8_t, kHandshakeSize> hello_{};
  std::array<uint8_t, kAckSize> ack_{};
  std::string errors_;
};

}  // namespace etcdw::peer_transport
