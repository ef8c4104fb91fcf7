// What the peer transport's objects share: the names they use for Boost.Asio and the clock, the
// limits several of them apply, the log and socket helpers, LogLimiter and Closable. Time is the
// transport's clock (PeerTransportOptions::clock), read with Now() and waited for with ClockTimer
// (clock_timer.h); nothing reads std::chrono's clocks directly.
//
// Everything in src/peer_transport is internal to the peer transport and lives in the named
// namespace etcdw::peer_transport, not in anonymous namespaces: the library is a unity
// build (several .cc files in one translation unit), and these headers are shared by several .cc
// files. transport_impl.h describes the objects, their ownership and their threads. Boost.Asio
// comes in through stream.h, which includes <utility> before it (as Boost 1.74 needs).
#pragma once

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"
#include "stream.h"

namespace etcdw::peer_transport {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using boost::system::error_code;
using TimePoint = common::Clock::TimePoint;
using std::chrono::milliseconds;

// Repeated log lines of one kind about one peer or remote address: at most one per interval.
inline constexpr std::chrono::seconds kLogInterval{10};
// Buffers that grew beyond this for one large message are released afterwards.
inline constexpr size_t kKeepCapacity = 1 << 20;
// The snapshot result frame is small.
inline constexpr size_t kMaxResultBytes = size_t{64} << 10;
// Longer timeouts (e.g. milliseconds::max() for "none") are cut to this, so that adding them to
// the clock cannot overflow.
inline constexpr milliseconds kMaxTimeout = std::chrono::hours(24 * 365);

// `t` cut to [0, kMaxTimeout].
milliseconds ClampTimeout(milliseconds t);

using CallDone = std::function<void(Status, std::string)>;

// `id` as 16 hex digits.
std::string HexId(uint64_t id);
// `d` as "<count>ms".
std::string Millis(milliseconds d);
// The error's message; OpenSSL's error string for a TLS error without one.
std::string ErrorText(const error_code& ec);
// TCP_NODELAY, keepalive and the TCP user timeout for a peer connection (errors are ignored).
void SetSocketOptions(Tcp::socket& s);

// Holds back repeated log lines: Allow() is true at most once per interval (of `clock`) per key.
// Thread-safe.
class LogLimiter {
 public:
  explicit LogLimiter(const common::Clock* clock) : clock_(clock) {}
  bool Allow(const std::string& key, uint64_t& suppressed) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() > 4096) entries_.clear();
    const TimePoint now = clock_->Now();
    auto [it, inserted] = entries_.try_emplace(key);
    Entry& e = it->second;
    if (!inserted && now - e.last < kLogInterval) {
      ++e.suppressed;
      return false;
    }
    suppressed = e.suppressed;
    e.suppressed = 0;
    e.last = now;
    return true;
  }

 private:
  struct Entry {
    TimePoint last;
    uint64_t suppressed = 0;
  };
  const common::Clock* const clock_;  // set by the constructor (no lock)
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

// Something Stop() must close: Close() runs on the object's strand, or on Stop()'s thread once
// the transport threads are joined.
class Closable {
 public:
  virtual ~Closable() = default;
  virtual void Close() = 0;
};

}  // namespace etcdw::peer_transport
