// What the peer transport's tests share: members on loopback (a transport and a Recorder of its
// callbacks), messages and snapshots whose content can be checked, calls and what became of them
// (CallOutcome, Inbox), a plain socket that speaks the wire format by hand (RawConn, following
// peer_transport.h), and listeners that never answer. Definitions in peer_transport_fixture.cc.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/peer_transport/peer_transport.h"
#include "etcdw/raft.pb.h"
#include "support/await.h"

namespace etcdw::peer_transport {

// Real time, for the bounds of the tests' own waits.
using SteadyClock = std::chrono::steady_clock;

inline constexpr uint64_t kClusterId = 0x1000;

using testsupport::WaitUntil;  // support/await.h

// ---------------------------------------------------------------------------------------------
// Messages and snapshots

// A MsgApp from `from` to `to` at `index`, with an entry of `data_bytes` patterned bytes.
raftpb::Message Msg(uint64_t from, uint64_t to, uint64_t index, size_t data_bytes = 0);
// A MsgSnap at `index` (term 3, voters 1 and 2).
raftpb::Message SnapMsg(uint64_t from, uint64_t to, uint64_t index);

// Deterministic snapshot content: byte i of a snapshot with seed s, and the CRC-32C of all.
char SnapByte(uint64_t i, uint32_t seed);
uint32_t SnapCrc(size_t total, uint32_t seed);

// A snapshot of `total` patterned bytes that fails once `fail_at` bytes were produced.
class PatternSource : public SnapshotSource {
 public:
  PatternSource(size_t total, uint32_t seed, size_t fail_at = SIZE_MAX)
      : total_(total), seed_(seed), fail_at_(fail_at) {}
  Result<bool> Next(std::string& out, size_t max_bytes) override;

 private:
  size_t total_;
  uint32_t seed_;
  size_t fail_at_;
  size_t produced_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Members

// What one member's transport saw; shared with the sinks it hands out.
struct Recorder {
  std::mutex mu;
  std::vector<raftpb::Message> messages;
  std::map<uint64_t, int> unreachable;
  std::vector<std::pair<uint64_t, bool>> snapshots_sent;
  std::vector<raftpb::Message> snapshots_received;
  // Per received snapshot: bytes, CRC, largest chunk, and whether Finish preceded delivery.
  uint64_t sink_bytes = 0;
  uint32_t sink_crc = 0;
  size_t sink_max_chunk = 0;
  bool sink_finished = false;
  bool finished_before_delivery = false;
  int sinks_abandoned = 0;
  bool refuse_snapshots = false;
  std::atomic<bool> stopped{false};
  std::atomic<int> late_callbacks{0};

  size_t MessageCount();
  int Unreachable(uint64_t peer);
  std::vector<uint64_t> Indexes();
  size_t SnapshotsSent();
  size_t SnapshotsReceived();
  int Abandoned();
  // Counts a callback that ran after Stop() returned.
  void Late() {
    if (stopped) ++late_callbacks;
  }
};

// A sink that records what it received in a Recorder.
class RecordingSink : public SnapshotSink {
 public:
  explicit RecordingSink(std::shared_ptr<Recorder> rec);
  ~RecordingSink() override;
  Status Write(std::string_view chunk) override;
  Status Finish() override;

 private:
  std::shared_ptr<Recorder> rec_;
  bool finished_ = false;
};

// A handler whose callbacks record into `rec`.
PeerTransportHandler MakeHandler(const std::shared_ptr<Recorder>& rec);

// One member: its transport and what it saw.
struct Member {
  uint64_t id = 0;
  std::shared_ptr<Recorder> rec = std::make_shared<Recorder>();
  std::unique_ptr<PeerTransport> transport;
  std::string scheme = "http";

  std::string Url(const std::string& host = "127.0.0.1") const;
  void Stop();
  ~Member();  // stops, and checks that no callback ran after Stop() returned
};

PeerTransportOptions Options(uint64_t id, const std::string& listen = "http://127.0.0.1:0");

// Adds to the recording handler (on_call, on_cluster_info); what it adds is also checked never
// to run after Stop() returns.
using HandlerExtra = std::function<void(PeerTransportHandler&)>;

std::unique_ptr<Member> TryStartMember(PeerTransportOptions o, Status* error = nullptr,
                                       const HandlerExtra& extra = nullptr);
// The same, failing the test when the member does not start.
std::unique_ptr<Member> StartMember(PeerTransportOptions o, const HandlerExtra& extra = nullptr);

// ---------------------------------------------------------------------------------------------
// A plain socket speaking the wire format by hand.

void Put32(std::string& out, uint32_t v);
void Put64(std::string& out, uint64_t v);
uint32_t Get32(const std::string& s, size_t at);
uint64_t Get64(const std::string& s, size_t at);

// magic "EWPT" | u16 version 1 | u8 kind | u8 0 | u64 cluster | u64 sender | u64 receiver | crc
std::string HandshakeBytes(uint64_t cluster, uint64_t sender, uint64_t receiver, uint8_t kind = 1);
// u32 length | u32 CRC-32C(payload) | u8 type | payload
std::string FrameBytes(uint8_t type, const std::string& payload);

class RawConn {
 public:
  explicit RawConn(int port);
  ~RawConn();
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;
  bool connected() const { return connected_; }
  bool Write(const std::string& bytes);
  // Reads exactly n bytes; empty on timeout, close or error.
  std::string Read(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // True when the other side closes the connection (EOF or reset) before the deadline.
  bool WaitClosed(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Whether the other side has closed the connection by now (does not wait, consumes nothing).
  bool Closed();

 private:
  bool WaitReadable(SteadyClock::time_point deadline);
  int fd_ = -1;
  bool connected_ = false;
};

// Reads the 8-byte acknowledgement: the handshake result, or -1.
int ReadAck(RawConn& c);
// Reads one frame: {type, payload}; type -1 on a short read or a bad checksum.
std::pair<int, std::string> ReadFrame(RawConn& c);

// A loopback listening socket that accepts connections on a thread of its own and counts them,
// but never speaks the protocol: a kSilent listener holds each connection open without a word
// (a dial waits for the handshake acknowledgement until its timeout), a kClosing one closes each
// at once (a dial fails right after connecting).
class RawListener {
 public:
  enum class Mode { kSilent, kClosing };
  explicit RawListener(Mode mode);
  ~RawListener();
  RawListener(const RawListener&) = delete;
  RawListener& operator=(const RawListener&) = delete;
  bool ok() const { return ok_; }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  int fd_ = -1;
  int port_ = 0;
  bool ok_ = false;
  std::atomic<int> accepted_{0};
  std::vector<int> held_;  // kSilent: the open connections (the acceptor thread's, then ~)
  std::thread acceptor_;
};

struct SilentListener : RawListener {
  SilentListener() : RawListener(Mode::kSilent) {}
};
struct ClosingListener : RawListener {
  ClosingListener() : RawListener(Mode::kClosing) {}
};

// A loopback URL nobody listens on (a member's port, freed again).
std::string DeadUrl();
std::vector<common::Url> ParseUrls(const std::vector<std::string>& urls);

// ---------------------------------------------------------------------------------------------
// Calls (Call / on_call)

using Respond = std::function<void(Status, std::string)>;

// What became of one Call: how often `done` ran, with what, on which thread and when.
struct CallOutcome {
  std::mutex mu;
  std::condition_variable cv;
  int runs = 0;
  Status status;
  std::string payload;
  std::thread::id thread;
  SteadyClock::time_point at;

  int Runs() {
    std::lock_guard<std::mutex> lock(mu);
    return runs;
  }
  // True once `done` has run; false when it has not within `timeout`.
  bool Wait(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return runs > 0; });
  }
};

// A `done` that records into `o`.
Respond Record(const std::shared_ptr<CallOutcome>& o);

std::shared_ptr<CallOutcome> StartCall(
    PeerTransport& t, uint64_t peer, uint32_t method, std::string payload,
    std::chrono::milliseconds timeout = std::chrono::seconds(20));

// Calls and waits for `done` (generously: a missing answer fails the test, it never hangs it).
std::shared_ptr<CallOutcome> CallAndWait(
    PeerTransport& t, uint64_t peer, uint32_t method, std::string payload,
    std::chrono::milliseconds timeout = std::chrono::seconds(20));

// The calls a member received and has not answered yet.
struct Inbox {
  struct Request {
    uint32_t method = 0;
    std::string payload;
    Respond respond;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Request> requests;

  // Makes on_call keep every request here.
  HandlerExtra Holder();
  bool WaitFor(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  size_t Size();
  std::vector<Request> Take();
};

// Answers every call at once: the method, a marker and the request, or an error for method 13.
HandlerExtra Echo();

}  // namespace etcdw::peer_transport
