// A fault-injecting proxy on the peer links of a test cluster. Each member advertises a port of
// the proxy as its peer URL and listens on another; the proxy forwards every connection a member
// dials to the member it fronts. A connection's first bytes are the peer transport's handshake,
// which names the dialing member, so the proxy knows for each byte which link it travels: the
// dialer's bytes go from the sender to the receiver, the receiver's answers the other way.
//
// Links are blocked one direction at a time: the bytes of a blocked link are read and dropped
// (the sender sees no error, as with lost packets), while the other direction still flows. A
// connection that lost bytes is broken mid-frame, so Heal closes it, and the members dial again.
// A connection's bytes are not blocked while the proxy does not know its sender's ID.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace etcdw::testing {

class PeerProxy {
 public:
  // Listens on a fresh loopback port for each of `members` members.
  explicit PeerProxy(int members);
  ~PeerProxy();
  PeerProxy(const PeerProxy&) = delete;
  PeerProxy& operator=(const PeerProxy&) = delete;

  // False when a port could not be opened.
  bool ok() const { return ok_; }
  // The port to advertise as member i's peer URL.
  int port(int i) const { return fronts_[static_cast<size_t>(i)].port; }
  // Where member i really listens; set before it starts.
  void SetTarget(int i, int real_port);
  // Member i's Raft ID, read from its handshakes from now on.
  void SetMemberId(int i, uint64_t id);

  // Drops the bytes member `from` sends to member `to` until Heal.
  void Block(int from, int to);
  void Unblock(int from, int to);
  // Both directions between every member of `a` and every member of `b`.
  void Cut(const std::vector<int>& a, const std::vector<int>& b);
  // Unblocks every link and closes the connections that dropped bytes.
  void Heal();
  // The blocked links, "0->1 2->0"; empty when none.
  std::string Describe();
  // Bytes dropped since the proxy started.
  uint64_t dropped_bytes() const { return dropped_.load(); }

 private:
  struct Front {
    int listen_fd = -1;
    int port = 0;
    int target_port = 0;
  };
  struct Conn;

  void Accept(int member);
  void Pump(const std::shared_ptr<Conn>& c);
  bool Blocked(int from, int to);
  int MemberOf(uint64_t id);
  void Reap(bool all);
  // Closes the connections that lost bytes and whose links are both open again.
  void CloseDamagedLocked();

  bool ok_ = true;
  std::vector<Front> fronts_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> dropped_{0};
  std::vector<std::thread> acceptors_;
  std::mutex mu_;
  std::map<uint64_t, int> ids_;            // member ID -> index
  std::set<std::pair<int, int>> blocked_;  // (from, to)
  std::vector<std::pair<std::shared_ptr<Conn>, std::thread>> conns_;
};

}  // namespace etcdw::testing
