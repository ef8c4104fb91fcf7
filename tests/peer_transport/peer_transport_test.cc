// The peer transport on loopback: delivery and order, large messages, reconnection, handshake
// checks, corrupt and oversized frames (written by hand with a plain socket, following the wire
// format documented in peer_transport.h), snapshot streaming, TLS with client certificates,
// request/response calls (answers, deadlines, failures, the connection pool, Stop) and the
// cluster-information query.
#include "etcdw/peer_transport/peer_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "etcdw/common/hash.h"
#include "etcdw/common/url.h"

namespace etcdw::peer_transport {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kClusterId = 0x1000;

// Polls `pred` until it holds or `timeout` passes (generous: the machine may be loaded).
template <typename Pred>
bool WaitUntil(Pred pred, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

raftpb::Message Msg(uint64_t from, uint64_t to, uint64_t index, size_t data_bytes = 0) {
  raftpb::Message m;
  m.set_type(raftpb::MSG_APP);
  m.set_from(from);
  m.set_to(to);
  m.set_term(1);
  m.set_index(index);
  if (data_bytes > 0) {
    auto* e = m.add_entries();
    e->set_index(index);
    std::string data(data_bytes, '\0');
    for (size_t i = 0; i < data_bytes; ++i) data[i] = static_cast<char>((i * 31 + index) & 0xff);
    e->set_data(std::move(data));
  }
  return m;
}

// Deterministic snapshot content: byte i of a snapshot with seed s.
char SnapByte(uint64_t i, uint32_t seed) {
  uint64_t x = (i + seed) * 0x9E3779B97F4A7C15ull;
  return static_cast<char>(x >> 56);
}

uint32_t SnapCrc(size_t total, uint32_t seed) {
  std::string buf;
  uint32_t crc = 0;
  for (size_t off = 0; off < total; off += buf.size()) {
    buf.resize(std::min<size_t>(1 << 16, total - off));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = SnapByte(off + i, seed);
    crc = common::Crc32c(crc, buf);
  }
  return crc;
}

class PatternSource : public SnapshotSource {
 public:
  PatternSource(size_t total, uint32_t seed, size_t fail_at = SIZE_MAX)
      : total_(total), seed_(seed), fail_at_(fail_at) {}
  Result<bool> Next(std::string& out, size_t max_bytes) override {
    if (produced_ >= fail_at_) return Internal("disk read failed");
    size_t n = std::min(max_bytes, total_ - produced_);
    for (size_t i = 0; i < n; ++i) out.push_back(SnapByte(produced_ + i, seed_));
    produced_ += n;
    return produced_ < total_;
  }

 private:
  size_t total_;
  uint32_t seed_;
  size_t fail_at_;
  size_t produced_ = 0;
};

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

  size_t MessageCount() {
    std::lock_guard<std::mutex> lock(mu);
    return messages.size();
  }
  int Unreachable(uint64_t peer) {
    std::lock_guard<std::mutex> lock(mu);
    return unreachable[peer];
  }
  std::vector<uint64_t> Indexes() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<uint64_t> out;
    for (const auto& m : messages) out.push_back(m.index());
    return out;
  }
  size_t SnapshotsSent() {
    std::lock_guard<std::mutex> lock(mu);
    return snapshots_sent.size();
  }
  size_t SnapshotsReceived() {
    std::lock_guard<std::mutex> lock(mu);
    return snapshots_received.size();
  }
  int Abandoned() {
    std::lock_guard<std::mutex> lock(mu);
    return sinks_abandoned;
  }
  void Late() {
    if (stopped) ++late_callbacks;
  }
};

class RecordingSink : public SnapshotSink {
 public:
  explicit RecordingSink(std::shared_ptr<Recorder> rec) : rec_(std::move(rec)) {
    std::lock_guard<std::mutex> lock(rec_->mu);
    rec_->sink_bytes = 0;
    rec_->sink_crc = 0;
    rec_->sink_max_chunk = 0;
    rec_->sink_finished = false;
  }
  ~RecordingSink() override {
    std::lock_guard<std::mutex> lock(rec_->mu);
    if (!finished_) ++rec_->sinks_abandoned;
  }
  Status Write(std::string_view chunk) override {
    std::lock_guard<std::mutex> lock(rec_->mu);
    rec_->sink_bytes += chunk.size();
    rec_->sink_crc = common::Crc32c(rec_->sink_crc, chunk);
    rec_->sink_max_chunk = std::max(rec_->sink_max_chunk, chunk.size());
    return Status::Ok();
  }
  Status Finish() override {
    std::lock_guard<std::mutex> lock(rec_->mu);
    rec_->sink_finished = finished_ = true;
    return Status::Ok();
  }

 private:
  std::shared_ptr<Recorder> rec_;
  bool finished_ = false;
};

PeerTransportHandler MakeHandler(const std::shared_ptr<Recorder>& rec) {
  PeerTransportHandler h;
  h.on_message = [rec](raftpb::Message m) {
    rec->Late();
    std::lock_guard<std::mutex> lock(rec->mu);
    rec->messages.push_back(std::move(m));
  };
  h.on_snapshot = [rec](const raftpb::Message&) -> std::unique_ptr<SnapshotSink> {
    rec->Late();
    if (rec->refuse_snapshots) return nullptr;
    return std::make_unique<RecordingSink>(rec);
  };
  h.on_snapshot_received = [rec](raftpb::Message m) {
    rec->Late();
    std::lock_guard<std::mutex> lock(rec->mu);
    rec->finished_before_delivery = rec->sink_finished;
    rec->snapshots_received.push_back(std::move(m));
  };
  h.on_unreachable = [rec](uint64_t peer) {
    rec->Late();
    std::lock_guard<std::mutex> lock(rec->mu);
    ++rec->unreachable[peer];
  };
  h.on_snapshot_sent = [rec](uint64_t peer, bool ok) {
    rec->Late();
    std::lock_guard<std::mutex> lock(rec->mu);
    rec->snapshots_sent.emplace_back(peer, ok);
  };
  return h;
}

// One member: its transport and what it saw.
struct Member {
  uint64_t id = 0;
  std::shared_ptr<Recorder> rec = std::make_shared<Recorder>();
  std::unique_ptr<PeerTransport> transport;
  std::string scheme = "http";

  std::string Url(const std::string& host = "127.0.0.1") const {
    return scheme + "://" + host + ":" + std::to_string(transport->ports().at(0));
  }
  void Stop() {
    if (!transport) return;
    transport->Stop();
    rec->stopped = true;
    transport.reset();
  }
  ~Member() {
    Stop();
    EXPECT_EQ(rec->late_callbacks.load(), 0) << "callback after Stop() returned";
  }
};

PeerTransportOptions Options(uint64_t id, const std::string& listen = "http://127.0.0.1:0") {
  PeerTransportOptions o;
  o.local_id = id;
  o.cluster_id = kClusterId;
  o.listen_urls = {*common::ParseUrl(listen)};
  o.dial_timeout = 2000ms;
  o.max_backoff = 200ms;
  return o;
}

// Adds to the recording handler (on_call, on_cluster_info); what it adds is also checked never
// to run after Stop() returns.
using HandlerExtra = std::function<void(PeerTransportHandler&)>;

std::unique_ptr<Member> TryStartMember(PeerTransportOptions o, Status* error = nullptr,
                                       const HandlerExtra& extra = nullptr) {
  auto m = std::make_unique<Member>();
  m->id = o.local_id;
  m->scheme = o.listen_urls.empty() ? "http" : o.listen_urls[0].scheme;
  PeerTransportHandler h = MakeHandler(m->rec);
  if (extra) extra(h);
  if (h.on_call) {
    h.on_call = [rec = m->rec, f = std::move(h.on_call)](
                    uint32_t method, std::string payload,
                    std::function<void(Status, std::string)> respond) {
      rec->Late();
      f(method, std::move(payload), std::move(respond));
    };
  }
  if (h.on_cluster_info) {
    h.on_cluster_info = [rec = m->rec, f = std::move(h.on_cluster_info)] {
      rec->Late();
      return f();
    };
  }
  auto t = PeerTransport::Start(std::move(o), std::move(h));
  if (!t.ok()) {
    if (error) *error = t.status();
    return nullptr;
  }
  m->transport = std::move(t).value();
  return m;
}

std::unique_ptr<Member> StartMember(PeerTransportOptions o, const HandlerExtra& extra = nullptr) {
  Status error;
  auto m = TryStartMember(std::move(o), &error, extra);
  EXPECT_TRUE(m) << error.ToString();
  return m;
}

// ---------------------------------------------------------------------------------------------
// A plain socket speaking the wire format by hand.

void Put32(std::string& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void Put64(std::string& out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// magic "EWPT" | u16 version 1 | u8 kind | u8 0 | u64 cluster | u64 sender | u64 receiver | crc
std::string HandshakeBytes(uint64_t cluster, uint64_t sender, uint64_t receiver, uint8_t kind = 1) {
  std::string b;
  Put32(b, 0x45575054);
  b.push_back(0);
  b.push_back(1);
  b.push_back(static_cast<char>(kind));
  b.push_back(0);
  Put64(b, cluster);
  Put64(b, sender);
  Put64(b, receiver);
  Put32(b, common::Crc32c(0, b));
  return b;
}

// u32 length | u32 CRC-32C(payload) | u8 type | payload
std::string FrameBytes(uint8_t type, const std::string& payload) {
  std::string b;
  Put32(b, static_cast<uint32_t>(payload.size()));
  Put32(b, common::Crc32c(0, payload));
  b.push_back(static_cast<char>(type));
  return b + payload;
}

class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConn() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool Write(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads exactly n bytes; empty on timeout, close or error.
  std::string Read(size_t n, std::chrono::milliseconds timeout = 20s) {
    std::string out;
    const auto deadline = Clock::now() + timeout;
    while (out.size() < n) {
      if (!WaitReadable(deadline)) return "";
      char buf[256];
      ssize_t r = ::recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
      if (r <= 0) return "";
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  // True when the other side closes the connection (EOF or reset) before the deadline.
  bool WaitClosed(std::chrono::milliseconds timeout = 20s) {
    const auto deadline = Clock::now() + timeout;
    while (true) {
      if (!WaitReadable(deadline)) return false;
      char buf[256];
      ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
      if (r <= 0) return true;
    }
  }

 private:
  bool WaitReadable(Clock::time_point deadline) {
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
  }
  int fd_ = -1;
  bool connected_ = false;
};

// Reads the 8-byte acknowledgement: the handshake result, or -1.
int ReadAck(RawConn& c) {
  std::string ack = c.Read(8);
  if (ack.size() != 8 || ack.substr(0, 4) != "EWPA") return -1;
  return static_cast<int>(static_cast<uint8_t>(ack[7]));
}

// ---------------------------------------------------------------------------------------------

TEST(PeerTransportTest, DeliversInOrderBetweenThreeMembers) {
  auto a = StartMember(Options(1));
  auto b = StartMember(Options(2));
  auto c = StartMember(Options(3));
  ASSERT_TRUE(a && b && c);
  a->transport->AddPeer(2, {b->Url()});
  a->transport->AddPeer(3, {c->Url()});
  b->transport->AddPeer(1, {a->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2) && a->transport->Connected(3); }));
  ASSERT_TRUE(WaitUntil([&] { return b->transport->Connected(1); }));

  constexpr uint64_t kCount = 2000;
  for (uint64_t i = 1; i <= kCount; i += 10) {
    std::vector<raftpb::Message> batch;
    for (uint64_t j = i; j < i + 10; ++j) {
      batch.push_back(Msg(1, 2, j, j % 7 * 100));
      batch.push_back(Msg(1, 3, j));
    }
    a->transport->Send(std::move(batch));
    b->transport->Send({Msg(2, 1, i)});
  }
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == kCount; }))
      << b->rec->MessageCount();
  ASSERT_TRUE(WaitUntil([&] { return c->rec->MessageCount() == kCount; }));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->MessageCount() == kCount / 10; }));
  std::vector<uint64_t> want(kCount);
  for (uint64_t i = 0; i < kCount; ++i) want[i] = i + 1;
  EXPECT_EQ(b->rec->Indexes(), want);
  EXPECT_EQ(c->rec->Indexes(), want);
  {
    std::lock_guard<std::mutex> lock(b->rec->mu);
    for (const auto& m : b->rec->messages) {
      ASSERT_EQ(m.from(), 1u);
      ASSERT_EQ(m.to(), 2u);
      ASSERT_EQ(m.SerializeAsString(),
                Msg(1, 2, m.index(), m.index() % 7 * 100).SerializeAsString());
    }
  }
  EXPECT_EQ(a->rec->Unreachable(2), 0);
  EXPECT_EQ(a->rec->Unreachable(3), 0);
}

TEST(PeerTransportTest, LargeMessages) {
  auto o = Options(1);
  o.max_message_bytes = 16 << 20;
  auto a = StartMember(o);
  auto ob = Options(2);
  ob.max_message_bytes = 16 << 20;
  auto b = StartMember(ob);
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  std::vector<raftpb::Message> batch;
  for (uint64_t i = 1; i <= 6; ++i) batch.push_back(Msg(1, 2, i, i % 2 ? (12 << 20) : 10));
  a->transport->Send(batch);
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 6; }));
  std::lock_guard<std::mutex> lock(b->rec->mu);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(b->rec->messages[i].index(), i + 1);
    EXPECT_TRUE(b->rec->messages[i].SerializeAsString() == batch[i].SerializeAsString());
  }
}

TEST(PeerTransportTest, OversizedMessageIsDroppedBySenderAndReported) {
  auto o = Options(1);
  o.max_message_bytes = 64 << 10;
  auto a = StartMember(o);
  auto b = StartMember(Options(2));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  a->transport->Send({Msg(1, 2, 1), Msg(1, 2, 2, 100 << 10), Msg(1, 2, 3)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 2; }));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) > 0; }));
  EXPECT_EQ(b->rec->Indexes(), (std::vector<uint64_t>{1, 3}));
  EXPECT_TRUE(a->transport->Connected(2));
}

TEST(PeerTransportTest, ReconnectsAfterReceiverRestarts) {
  auto a = StartMember(Options(1));
  auto b = StartMember(Options(2));
  ASSERT_TRUE(a && b);
  const int port = b->transport->ports().at(0);
  const std::string url = b->Url();
  a->transport->AddPeer(2, {url});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  std::vector<raftpb::Message> batch;
  for (uint64_t i = 1; i <= 10; ++i) batch.push_back(Msg(1, 2, i));
  a->transport->Send(batch);
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 10; }));

  b->Stop();
  ASSERT_TRUE(WaitUntil([&] { return !a->transport->Connected(2); }));
  const int before = a->rec->Unreachable(2);
  batch.clear();
  for (uint64_t i = 11; i <= 20; ++i) batch.push_back(Msg(1, 2, i));
  a->transport->Send(batch);  // dropped: the peer is down
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) > before; }));

  // The receiver comes back on the same port.
  std::unique_ptr<Member> b2;
  ASSERT_TRUE(WaitUntil([&] {
    b2 = TryStartMember(Options(2, "http://127.0.0.1:" + std::to_string(port)));
    return b2 != nullptr;
  }));
  ASSERT_TRUE(b2);
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  batch.clear();
  for (uint64_t i = 21; i <= 30; ++i) batch.push_back(Msg(1, 2, i));
  a->transport->Send(batch);
  ASSERT_TRUE(WaitUntil([&] { return b2->rec->MessageCount() == 10; }));
  std::vector<uint64_t> want;
  for (uint64_t i = 21; i <= 30; ++i) want.push_back(i);
  EXPECT_EQ(b2->rec->Indexes(), want);
}

TEST(PeerTransportTest, UnreachablePeerDropsAndReports) {
  // A port with nobody listening.
  int port = 0;
  {
    auto tmp = StartMember(Options(9));
    ASSERT_TRUE(tmp);
    port = tmp->transport->ports().at(0);
  }
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a);
  const auto t0 = Clock::now();
  a->transport->AddPeer(2, {"http://127.0.0.1:" + std::to_string(port)});
  for (uint64_t i = 1; i <= 5; ++i) a->transport->Send({Msg(1, 2, i)});
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) > 0; }));
  EXPECT_FALSE(a->transport->Connected(2));
  // Reports are rate limited: a burst of drops is not a burst of reports.
  for (int round = 0; round < 200; ++round) a->transport->Send({Msg(1, 2, 100 + round)});
  const int reports = a->rec->Unreachable(2);
  const auto elapsed = Clock::now() - t0;
  EXPECT_LE(reports, elapsed / 200ms + 2) << "on_unreachable is not rate limited";

  // A peer at new URLs is tried there.
  auto b = StartMember(Options(2));
  ASSERT_TRUE(b);
  a->transport->UpdatePeer(2, {"http://127.0.0.1:" + std::to_string(port), b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  a->transport->Send({Msg(1, 2, 1000)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 1; }));

  a->transport->RemovePeer(2);
  EXPECT_FALSE(a->transport->Connected(2));
  a->transport->Send({Msg(1, 2, 1001)});  // to an unknown peer: dropped quietly
}

TEST(PeerTransportTest, FullQueueDropsAndStopIsPrompt) {
  // A listener that never accepts: the dial hangs waiting for the handshake acknowledgement.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);

  auto o = Options(1);
  o.max_queued_messages = 4;
  o.dial_timeout = 30s;
  o.max_backoff = 30s;
  auto a = StartMember(o);
  ASSERT_TRUE(a);
  a->transport->AddPeer(2, {"http://127.0.0.1:" + std::to_string(port)});
  std::vector<raftpb::Message> batch;
  for (uint64_t i = 1; i <= 10; ++i) batch.push_back(Msg(1, 2, i));
  a->transport->Send(batch);
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) > 0; }, 10s));
  EXPECT_FALSE(a->transport->Connected(2));

  const auto t0 = Clock::now();
  a->Stop();
  EXPECT_LT(Clock::now() - t0, 2s);
  ::close(fd);
}

TEST(PeerTransportTest, RefusesPortInUse) {
  auto b = StartMember(Options(2));
  ASSERT_TRUE(b);
  const std::string url = "http://127.0.0.1:" + std::to_string(b->transport->ports().at(0));
  auto r = PeerTransport::Start(Options(3, url), MakeHandler(std::make_shared<Recorder>()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(url), std::string::npos) << r.status().ToString();
}

TEST(PeerTransportTest, WrongClusterOrReceiverIsRejected) {
  auto a_opts = Options(1);
  a_opts.cluster_id = kClusterId + 1;
  auto a = StartMember(a_opts);
  auto b = StartMember(Options(2));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  a->transport->Send({Msg(1, 2, 1)});
  ASSERT_TRUE(WaitUntil([&] { return a->rec->Unreachable(2) > 0; }));
  EXPECT_FALSE(a->transport->Connected(2));
  EXPECT_EQ(b->rec->MessageCount(), 0u);

  // By hand: the acknowledgement names the reason, then the receiver closes.
  const int port = b->transport->ports().at(0);
  {
    RawConn c(port);
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId + 1, 1, 2)));
    EXPECT_EQ(ReadAck(c), 2);  // cluster ID mismatch
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 7)));
    EXPECT_EQ(ReadAck(c), 3);  // not the receiver
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2, /*kind=*/9)));
    EXPECT_EQ(ReadAck(c), 4);  // unknown stream kind
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);  // not our protocol at all
    ASSERT_TRUE(c.Write("GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789"));
    EXPECT_TRUE(c.WaitClosed());
  }
  EXPECT_EQ(b->rec->MessageCount(), 0u);
}

TEST(PeerTransportTest, HandWrittenFramesFollowTheWireFormat) {
  auto b = StartMember(Options(2));
  ASSERT_TRUE(b);
  RawConn c(b->transport->ports().at(0));
  ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2)));
  ASSERT_EQ(ReadAck(c), 0);
  std::string frames;
  for (uint64_t i = 1; i <= 3; ++i) frames += FrameBytes(1, Msg(1, 2, i, 10).SerializeAsString());
  ASSERT_TRUE(c.Write(frames));
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 3; }));
  EXPECT_EQ(b->rec->Indexes(), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(PeerTransportTest, CorruptFrameClosesTheConnection) {
  auto b = StartMember(Options(2));
  ASSERT_TRUE(b);
  const int port = b->transport->ports().at(0);
  {
    RawConn c(port);
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2)));
    ASSERT_EQ(ReadAck(c), 0);
    std::string good = FrameBytes(1, Msg(1, 2, 1).SerializeAsString());
    std::string bad = FrameBytes(1, Msg(1, 2, 2).SerializeAsString());
    bad.back() ^= 0x40;  // payload no longer matches its checksum
    ASSERT_TRUE(c.Write(good + bad + FrameBytes(1, Msg(1, 2, 3).SerializeAsString())));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);  // a checksum-correct frame whose payload is not a message
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2)));
    ASSERT_EQ(ReadAck(c), 0);
    ASSERT_TRUE(c.Write(FrameBytes(1, std::string("\xff\xff\xff\xff\xff", 5))));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);  // a frame type a message stream does not carry
    ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2)));
    ASSERT_EQ(ReadAck(c), 0);
    ASSERT_TRUE(c.Write(FrameBytes(3, "chunk")));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(port);  // a corrupt handshake
    std::string h = HandshakeBytes(kClusterId, 1, 2);
    h[10] ^= 1;
    ASSERT_TRUE(c.Write(h));
    EXPECT_TRUE(c.WaitClosed());
  }
  EXPECT_EQ(b->rec->Indexes(), (std::vector<uint64_t>{1}));
  // The transport is unharmed.
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a);
  a->transport->AddPeer(2, {b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  a->transport->Send({Msg(1, 2, 50)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 2; }));
}

TEST(PeerTransportTest, FrameLargerThanLimitIsRefused) {
  auto o = Options(2);
  o.max_message_bytes = 1 << 20;
  auto b = StartMember(o);
  ASSERT_TRUE(b);
  RawConn c(b->transport->ports().at(0));
  ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2)));
  ASSERT_EQ(ReadAck(c), 0);
  std::string header;
  Put32(header, (1 << 20) + 1);
  Put32(header, 0);
  header.push_back(1);
  ASSERT_TRUE(c.Write(header));  // refused on the header alone
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_EQ(b->rec->MessageCount(), 0u);
}

raftpb::Message SnapMsg(uint64_t from, uint64_t to, uint64_t index) {
  raftpb::Message m;
  m.set_type(raftpb::MSG_SNAP);
  m.set_from(from);
  m.set_to(to);
  m.set_term(3);
  m.mutable_snapshot()->mutable_metadata()->set_index(index);
  m.mutable_snapshot()->mutable_metadata()->set_term(3);
  m.mutable_snapshot()->mutable_metadata()->mutable_conf_state()->add_voters(1);
  m.mutable_snapshot()->mutable_metadata()->mutable_conf_state()->add_voters(2);
  return m;
}

TEST(PeerTransportTest, StreamsSnapshotInChunks) {
  auto a = StartMember(Options(1));
  auto b = StartMember(Options(2));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));
  constexpr size_t kSize = (6 << 20) + 12345;
  a->transport->SendSnapshot(SnapMsg(1, 2, 777), std::make_unique<PatternSource>(kSize, 7));
  // Messages keep flowing on their own stream meanwhile.
  a->transport->Send({Msg(1, 2, 1)});
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 1; }, 60s));
  ASSERT_EQ(b->rec->SnapshotsReceived(), 1u);
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 1; }));
  std::lock_guard<std::mutex> lock(b->rec->mu);
  EXPECT_EQ(a->rec->snapshots_sent[0], std::make_pair(uint64_t{2}, true));
  EXPECT_EQ(b->rec->snapshots_received[0].snapshot().metadata().index(), 777u);
  EXPECT_EQ(b->rec->snapshots_received[0].type(), raftpb::MSG_SNAP);
  EXPECT_EQ(b->rec->sink_bytes, kSize);
  EXPECT_EQ(b->rec->sink_crc, SnapCrc(kSize, 7));
  EXPECT_LE(b->rec->sink_max_chunk, 256u << 10);
  EXPECT_TRUE(b->rec->finished_before_delivery);
  EXPECT_EQ(b->rec->sinks_abandoned, 0);
}

TEST(PeerTransportTest, SnapshotFailuresAreReported) {
  auto a = StartMember(Options(1));
  auto b = StartMember(Options(2));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});

  // The source fails midway: the sender reports failure, the receiver abandons its sink.
  a->transport->SendSnapshot(SnapMsg(1, 2, 5),
                             std::make_unique<PatternSource>(4 << 20, 1, /*fail_at=*/1 << 20));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 1; }));
  ASSERT_TRUE(WaitUntil([&] { return b->rec->Abandoned() == 1; }));
  EXPECT_EQ(b->rec->SnapshotsReceived(), 0u);

  // The receiver refuses it.
  b->rec->refuse_snapshots = true;
  a->transport->SendSnapshot(SnapMsg(1, 2, 6), std::make_unique<PatternSource>(1 << 20, 2));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 2; }));

  // An unknown peer, and a message that is not a MsgSnap.
  a->transport->SendSnapshot(SnapMsg(1, 9, 7), std::make_unique<PatternSource>(10, 3));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 3; }));
  a->transport->SendSnapshot(Msg(1, 2, 8), std::make_unique<PatternSource>(10, 3));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 4; }));

  std::lock_guard<std::mutex> lock(a->rec->mu);
  EXPECT_EQ(a->rec->snapshots_sent[0], std::make_pair(uint64_t{2}, false));
  EXPECT_EQ(a->rec->snapshots_sent[1], std::make_pair(uint64_t{2}, false));
  EXPECT_EQ(a->rec->snapshots_sent[2], std::make_pair(uint64_t{9}, false));
  EXPECT_EQ(a->rec->snapshots_sent[3], std::make_pair(uint64_t{2}, false));
  EXPECT_EQ(b->rec->SnapshotsReceived(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Calls (Call / on_call) and the cluster-information query.

using Respond = std::function<void(Status, std::string)>;

// What became of one Call: how often `done` ran, with what, on which thread and when.
struct CallOutcome {
  std::mutex mu;
  std::condition_variable cv;
  int runs = 0;
  Status status;
  std::string payload;
  std::thread::id thread;
  Clock::time_point at;

  int Runs() {
    std::lock_guard<std::mutex> lock(mu);
    return runs;
  }
  // True once `done` has run; false when it has not within `timeout`.
  bool Wait(std::chrono::milliseconds timeout = 20s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return runs > 0; });
  }
};

Respond Record(const std::shared_ptr<CallOutcome>& o) {
  return [o](Status st, std::string payload) {
    std::lock_guard<std::mutex> lock(o->mu);
    if (++o->runs == 1) {
      o->status = std::move(st);
      o->payload = std::move(payload);
      o->thread = std::this_thread::get_id();
      o->at = Clock::now();
    }
    o->cv.notify_all();
  };
}

std::shared_ptr<CallOutcome> StartCall(PeerTransport& t, uint64_t peer, uint32_t method,
                                       std::string payload,
                                       std::chrono::milliseconds timeout = 20s) {
  auto o = std::make_shared<CallOutcome>();
  t.Call(peer, method, std::move(payload), timeout, Record(o));
  return o;
}

// Calls and waits for `done` (generously: a missing answer fails the test, it never hangs it).
std::shared_ptr<CallOutcome> CallAndWait(PeerTransport& t, uint64_t peer, uint32_t method,
                                         std::string payload,
                                         std::chrono::milliseconds timeout = 20s) {
  auto o = StartCall(t, peer, method, std::move(payload), timeout);
  EXPECT_TRUE(o->Wait(timeout + 10s)) << "done never ran";
  return o;
}

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

  HandlerExtra Holder() {
    return [this](PeerTransportHandler& h) {
      h.on_call = [this](uint32_t method, std::string payload, Respond respond) {
        std::lock_guard<std::mutex> lock(mu);
        requests.push_back({method, std::move(payload), std::move(respond)});
        cv.notify_all();
      };
    };
  }
  bool WaitFor(size_t n, std::chrono::milliseconds timeout = 20s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return requests.size() >= n; });
  }
  size_t Size() {
    std::lock_guard<std::mutex> lock(mu);
    return requests.size();
  }
  std::vector<Request> Take() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(requests, {});
  }
};

// Answers every call at once: the method, a marker and the request, or an error for method 13.
HandlerExtra Echo() {
  return [](PeerTransportHandler& h) {
    h.on_call = [](uint32_t method, std::string payload, Respond respond) {
      if (method == 13) return respond(Status(Code::kNotFound, "no such thing: " + payload), "");
      respond(Status::Ok(), std::to_string(method) + ":" + payload);
    };
  };
}

// A listening socket that never accepts: connecting succeeds, the handshake is never answered.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ =
        ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(fd_, 64) == 0;
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { ::close(fd_); }
  bool ok() const { return ok_; }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  bool ok_ = false;
};

// A loopback URL nobody listens on (a member's port, freed again).
std::string DeadUrl() {
  auto tmp = StartMember(Options(99));
  EXPECT_TRUE(tmp);
  return tmp ? tmp->Url() : "http://127.0.0.1:1";
}

std::vector<common::Url> ParseUrls(const std::vector<std::string>& urls) {
  std::vector<common::Url> out;
  for (const auto& u : urls) out.push_back(*common::ParseUrl(u));
  return out;
}

uint32_t Get32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(s[at + i]);
  return v;
}
uint64_t Get64(const std::string& s, size_t at) {
  return uint64_t{Get32(s, at)} << 32 | Get32(s, at + 4);
}

// Reads one frame from a raw connection: {type, payload}; type -1 on a short read or a bad
// checksum.
std::pair<int, std::string> ReadFrame(RawConn& c) {
  std::string h = c.Read(9);
  if (h.size() != 9) return {-1, ""};
  std::string payload = c.Read(Get32(h, 0));
  if (payload.size() != Get32(h, 0) || common::Crc32c(0, payload) != Get32(h, 4)) return {-1, ""};
  return {static_cast<uint8_t>(h[8]), payload};
}

TEST(PeerTransportCallTest, AnswerTravelsVerbatim) {
  struct Seen {
    std::mutex mu;
    std::vector<std::pair<uint32_t, std::string>> calls;
  };
  auto seen = std::make_shared<Seen>();
  const std::string binary("\0\x01\xff payload \0 end", 17);
  auto b = StartMember(Options(2), [&](PeerTransportHandler& h) {
    h.on_call = [seen, binary](uint32_t method, std::string payload, Respond respond) {
      {
        std::lock_guard<std::mutex> lock(seen->mu);
        seen->calls.emplace_back(method, payload);
      }
      switch (method) {
        case 1:  // an etcd error, as the lead would return it
          return respond(Status(Code::kFailedPrecondition, "etcdserver: requested lease not found"),
                         "partial\n");
        case 2:
          return respond(Status::Ok(), binary + payload);
        case 3:  // a code this build does not know
          return respond(Status(static_cast<Code>(77), "from the future"), "");
        default:
          return respond(Status::Ok(), "");
      }
    };
  });
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});

  auto r1 = CallAndWait(*a->transport, 2, 1, "lease 7");
  EXPECT_EQ(r1->status.code(), Code::kFailedPrecondition);
  EXPECT_EQ(r1->status.message(), "etcdserver: requested lease not found");
  EXPECT_EQ(r1->payload, "partial\n");
  EXPECT_NE(r1->thread, std::this_thread::get_id()) << "done must run on a transport thread";

  auto r2 = CallAndWait(*a->transport, 2, 2, binary);
  EXPECT_TRUE(r2->status.ok()) << r2->status.ToString();
  EXPECT_EQ(r2->payload, binary + binary);

  auto r3 = CallAndWait(*a->transport, 2, 3, "");
  EXPECT_EQ(r3->status.code(), Code::kUnknown);
  EXPECT_EQ(r3->status.message(), "from the future");

  auto r4 = CallAndWait(*a->transport, 2, 0xfffffffeu, "");
  EXPECT_TRUE(r4->status.ok()) << r4->status.ToString();
  EXPECT_EQ(r4->payload, "");

  {
    std::lock_guard<std::mutex> lock(seen->mu);
    ASSERT_EQ(seen->calls.size(), 4u);
    EXPECT_EQ(seen->calls[0], std::make_pair(uint32_t{1}, std::string("lease 7")));
    EXPECT_EQ(seen->calls[1], std::make_pair(uint32_t{2}, binary));
    EXPECT_EQ(seen->calls[2], std::make_pair(uint32_t{3}, std::string()));
    EXPECT_EQ(seen->calls[3], std::make_pair(uint32_t{0xfffffffeu}, std::string()));
  }
  // One connection served all four, one after another.
  EXPECT_EQ(a->transport->CallStats(2).established, 1u);
  EXPECT_EQ(a->transport->CallStats(2).open, 1u);
  for (const auto& r : {r1, r2, r3, r4}) EXPECT_EQ(r->Runs(), 1);
}

TEST(PeerTransportCallTest, ManyConcurrentCallsAnsweredOutOfOrder) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});

  constexpr int kThreads = 4, kPerThread = 50, kCalls = kThreads * kPerThread;
  std::vector<std::shared_ptr<CallOutcome>> outcomes(kCalls);
  for (auto& o : outcomes) o = std::make_shared<CallOutcome>();
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = t; i < kCalls; i += kThreads) {
        a->transport->Call(2, static_cast<uint32_t>(i % 5), "req-" + std::to_string(i), 20s,
                           Record(outcomes[i]));
      }
    });
  }
  for (auto& th : callers) th.join();
  ASSERT_TRUE(inbox.WaitFor(kCalls)) << inbox.Size();
  // 200 calls in flight: the pool grew to max_call_connections (4), no further.
  EXPECT_EQ(a->transport->CallStats(2).open, 4u);
  EXPECT_EQ(a->transport->CallStats(2).established, 4u);

  std::vector<Inbox::Request> reqs = inbox.Take();
  ASSERT_EQ(reqs.size(), size_t{kCalls});
  std::shuffle(reqs.begin(), reqs.end(), std::mt19937(12345));
  std::vector<std::thread> responders;
  for (int t = 0; t < 3; ++t) {
    responders.emplace_back([&, t] {
      for (size_t k = t; k < reqs.size(); k += 3) {
        auto& r = reqs[k];
        const int i = std::stoi(r.payload.substr(4));
        if (i % 3 == 0) {
          r.respond(Status(Code::kFailedPrecondition, "etcdserver: failed " + std::to_string(i)),
                    "");
        } else {
          r.respond(Status::Ok(), "ans-" + std::to_string(r.method) + "-" + r.payload);
        }
      }
    });
  }
  for (auto& th : responders) th.join();
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(outcomes[i]->Wait()) << "call " << i;
    const auto& o = *outcomes[i];
    if (i % 3 == 0) {
      EXPECT_EQ(o.status.code(), Code::kFailedPrecondition) << i;
      EXPECT_EQ(o.status.message(), "etcdserver: failed " + std::to_string(i));
      EXPECT_EQ(o.payload, "");
    } else {
      EXPECT_TRUE(o.status.ok()) << i << ": " << o.status.ToString();
      EXPECT_EQ(o.payload, "ans-" + std::to_string(i % 5) + "-req-" + std::to_string(i));
    }
  }
  a->Stop();  // nothing may run `done` a second time, not even Stop()
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(outcomes[i]->Runs(), 1) << "call " << i;
}

TEST(PeerTransportCallTest, RespondLaterFromAnotherThreadOnlyFirstCounts) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});

  auto first = StartCall(*a->transport, 2, 4, "slow");
  ASSERT_TRUE(inbox.WaitFor(1));
  Respond respond = inbox.Take().at(0).respond;
  Respond copy = respond;
  EXPECT_EQ(first->Runs(), 0);
  std::thread later([respond, copy] {
    std::this_thread::sleep_for(30ms);  // e.g. after a Raft round
    respond(Status::Ok(), "first answer");
    copy(Status(Code::kInternal, "second answer"), "ignored");
    respond(Status::Ok(), "third answer");
  });
  later.join();
  ASSERT_TRUE(first->Wait());
  EXPECT_TRUE(first->status.ok()) << first->status.ToString();
  EXPECT_EQ(first->payload, "first answer");

  // The extra answers left no trace: the next call on the connection gets its own answer.
  auto second = StartCall(*a->transport, 2, 5, "next");
  ASSERT_TRUE(inbox.WaitFor(1));
  auto req = inbox.Take().at(0);
  EXPECT_EQ(req.payload, "next");
  req.respond(Status(Code::kAborted, "second"), "2");
  ASSERT_TRUE(second->Wait());
  EXPECT_EQ(second->status.code(), Code::kAborted);
  EXPECT_EQ(second->payload, "2");
  EXPECT_EQ(a->transport->CallStats(2).established, 1u);
  a->Stop();
  EXPECT_EQ(first->Runs(), 1);
  EXPECT_EQ(second->Runs(), 1);
}

TEST(PeerTransportCallTest, DroppedRespondAnswersUnavailable) {
  Inbox inbox;
  auto b = StartMember(Options(2), [&](PeerTransportHandler& h) {
    inbox.Holder()(h);
    h.on_call = [held = h.on_call](uint32_t method, std::string payload, Respond respond) {
      if (method == 1) return;  // dropped at once
      held(method, std::move(payload), std::move(respond));
    };
  });
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});

  const auto t0 = Clock::now();
  auto r1 = CallAndWait(*a->transport, 2, 1, "x");
  EXPECT_EQ(r1->status.code(), Code::kUnavailable) << r1->status.ToString();
  EXPECT_NE(r1->status.message().find("dropped"), std::string::npos) << r1->status.ToString();
  EXPECT_LT(Clock::now() - t0, 10s) << "a dropped call must not wait for its deadline";

  // Kept for a while (copied), then every copy destroyed on another thread.
  auto r2 = StartCall(*a->transport, 2, 2, "y");
  ASSERT_TRUE(inbox.WaitFor(1));
  {
    std::vector<Inbox::Request> reqs = inbox.Take();
    Respond copy = reqs.at(0).respond;
    std::thread([reqs = std::move(reqs)]() mutable { reqs.clear(); }).join();
    std::this_thread::sleep_for(50ms);  // time for a wrong early answer to arrive
    EXPECT_EQ(r2->Runs(), 0) << "a copy of respond is still alive";
    std::thread([copy = std::move(copy)]() mutable { copy = nullptr; }).join();
  }
  ASSERT_TRUE(r2->Wait());
  EXPECT_EQ(r2->status.code(), Code::kUnavailable) << r2->status.ToString();
  // The connection is still good.
  auto r3 = StartCall(*a->transport, 2, 3, "z");
  ASSERT_TRUE(inbox.WaitFor(1));
  inbox.Take().at(0).respond(Status::Ok(), "fine");
  ASSERT_TRUE(r3->Wait());
  EXPECT_EQ(r3->payload, "fine");
  EXPECT_EQ(a->transport->CallStats(2).established, 1u);
}

TEST(PeerTransportCallTest, TimeoutAndLateAnswerIsDropped) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  // The connection first, so that the deadline covers the answer only.
  auto warm = StartCall(*a->transport, 2, 1, "warm");
  ASSERT_TRUE(inbox.WaitFor(1));
  inbox.Take().at(0).respond(Status::Ok(), "");
  ASSERT_TRUE(warm->Wait());

  const auto t0 = Clock::now();
  auto slow = StartCall(*a->transport, 2, 1, "slow", 150ms);
  ASSERT_TRUE(inbox.WaitFor(1));
  Respond late = inbox.Take().at(0).respond;
  ASSERT_TRUE(slow->Wait(10s));
  EXPECT_EQ(slow->status.code(), Code::kDeadlineExceeded) << slow->status.ToString();
  EXPECT_GE(slow->at - t0, 150ms);
  EXPECT_LT(slow->at - t0, 1500ms);

  // A call in flight when the late answer arrives gets its own answer, not the late one.
  auto next = StartCall(*a->transport, 2, 1, "next");
  ASSERT_TRUE(inbox.WaitFor(1));
  Respond next_respond = inbox.Take().at(0).respond;
  late(Status::Ok(), "too late");
  std::this_thread::sleep_for(50ms);  // time for the late answer to arrive and be dropped
  EXPECT_EQ(next->Runs(), 0);
  next_respond(Status::Ok(), "on time");
  ASSERT_TRUE(next->Wait());
  EXPECT_EQ(next->payload, "on time");
  EXPECT_EQ(slow->Runs(), 1);
  EXPECT_EQ(slow->payload, "");
  EXPECT_EQ(a->transport->CallStats(2).established, 1u) << "the late answer broke the connection";

  // A peer that never answers the handshake: the call's deadline comes before the dial's.
  SilentListener silent;
  ASSERT_TRUE(silent.ok());
  a->transport->AddPeer(3, {silent.Url()});
  auto t1 = Clock::now();
  auto hung = CallAndWait(*a->transport, 3, 1, "", 100ms);
  EXPECT_EQ(hung->status.code(), Code::kDeadlineExceeded) << hung->status.ToString();
  EXPECT_LT(hung->at - t1, 1500ms);
}

TEST(PeerTransportCallTest, HugeTimeoutMeansNoDeadlineAndZeroExpiresAtOnce) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  auto forever = StartCall(*a->transport, 2, 1, "", std::chrono::milliseconds::max());
  ASSERT_TRUE(inbox.WaitFor(1));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(forever->Runs(), 0) << forever->status.ToString();
  inbox.Take().at(0).respond(Status::Ok(), "eventually");
  ASSERT_TRUE(forever->Wait());
  EXPECT_TRUE(forever->status.ok()) << forever->status.ToString();
  EXPECT_EQ(forever->payload, "eventually");

  for (auto timeout : {0ms, -5ms}) {
    auto now = CallAndWait(*a->transport, 2, 1, "", timeout);
    EXPECT_EQ(now->status.code(), Code::kDeadlineExceeded) << now->status.ToString();
  }
  inbox.WaitFor(2, 1s);  // the requests may still have been sent; they are answered nowhere
  for (auto& r : inbox.Take()) r.respond(Status::Ok(), "late");

  auto info = StartMember(Options(3), [](PeerTransportHandler& h) {
    h.on_cluster_info = [] { return std::string("i"); };
  });
  ASSERT_TRUE(info);
  auto r = PeerTransport::FetchClusterInfo(ParseUrls({info->Url()}), {},
                                           std::chrono::milliseconds::max());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "i");
}

// b serves a's calls by calling c, as a follower forwards to the lead, and answers in `done`.
TEST(PeerTransportCallTest, ForwardedCallsAndStopOfTheForwarder) {
  Inbox at_c;
  auto c = StartMember(Options(3), at_c.Holder());
  std::atomic<PeerTransport*> b_transport{nullptr};
  auto b = StartMember(Options(2), [&](PeerTransportHandler& h) {
    h.on_call = [&b_transport](uint32_t method, std::string payload, Respond respond) {
      b_transport.load()->Call(
          3, method, std::move(payload), 20s,
          [respond](Status st, std::string answer) { respond(std::move(st), std::move(answer)); });
    };
  });
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b && c);
  b_transport = b->transport.get();
  a->transport->AddPeer(2, {b->Url()});
  b->transport->AddPeer(3, {c->Url()});

  auto forwarded = StartCall(*a->transport, 2, 6, "via b");
  ASSERT_TRUE(at_c.WaitFor(1));
  auto req = at_c.Take().at(0);
  EXPECT_EQ(req.method, 6u);
  EXPECT_EQ(req.payload, "via b");
  req.respond(Status(Code::kFailedPrecondition, "etcdserver: not leader"), "hint");
  ASSERT_TRUE(forwarded->Wait());
  EXPECT_EQ(forwarded->status, Status(Code::kFailedPrecondition, "etcdserver: not leader"));
  EXPECT_EQ(forwarded->payload, "hint");

  // b stops while its forwarded call waits for c: b's Stop() completes it (its `done` answers
  // a's call into a stopped transport), and a sees its connection to b go.
  std::vector<std::shared_ptr<CallOutcome>> pending;
  for (int i = 0; i < 5; ++i) pending.push_back(StartCall(*a->transport, 2, 7, ""));
  ASSERT_TRUE(at_c.WaitFor(5));
  const auto t0 = Clock::now();
  b->Stop();
  EXPECT_LT(Clock::now() - t0, 2s);
  for (auto& p : pending) {
    ASSERT_TRUE(p->Wait(10s));
    EXPECT_EQ(p->status.code(), Code::kUnavailable) << p->status.ToString();
  }
  for (auto& r : at_c.Take()) r.respond(Status::Ok(), "too late");
}

TEST(PeerTransportCallTest, UnknownOrRemovedPeerIsUnavailable) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  auto unknown = CallAndWait(*a->transport, 9, 1, "");
  EXPECT_EQ(unknown->status.code(), Code::kUnavailable);
  EXPECT_NE(unknown->status.message().find("unknown peer"), std::string::npos)
      << unknown->status.ToString();
  EXPECT_NE(unknown->thread, std::this_thread::get_id()) << "done must run on a transport thread";

  a->transport->AddPeer(2, {b->Url()});
  auto pending = StartCall(*a->transport, 2, 1, "");
  ASSERT_TRUE(inbox.WaitFor(1));
  a->transport->RemovePeer(2);
  ASSERT_TRUE(pending->Wait(10s));
  EXPECT_EQ(pending->status.code(), Code::kUnavailable) << pending->status.ToString();
  auto after = CallAndWait(*a->transport, 2, 1, "");
  EXPECT_EQ(after->status.code(), Code::kUnavailable);
  EXPECT_EQ(inbox.Size(), 1u);
}

TEST(PeerTransportCallTest, PeerDownIsUnavailableWithinTheDialTimeout) {
  auto o = Options(1);
  o.dial_timeout = 300ms;
  auto a = StartMember(o);
  ASSERT_TRUE(a);
  const std::string dead = DeadUrl();
  SilentListener silent;
  ASSERT_TRUE(silent.ok());
  a->transport->AddPeer(2, {dead});
  a->transport->AddPeer(3, {silent.Url()});
  a->transport->AddPeer(4, {dead, silent.Url()});

  auto t0 = Clock::now();
  auto refused = CallAndWait(*a->transport, 2, 1, "", 10s);
  EXPECT_EQ(refused->status.code(), Code::kUnavailable) << refused->status.ToString();
  EXPECT_NE(refused->status.message().find(dead), std::string::npos) << refused->status.ToString();
  EXPECT_LT(refused->at - t0, 1s);

  t0 = Clock::now();
  auto r3 = StartCall(*a->transport, 3, 1, "", 10s);
  auto r4 = StartCall(*a->transport, 4, 1, "", 10s);
  ASSERT_TRUE(r3->Wait(10s) && r4->Wait(10s));
  EXPECT_EQ(r3->status.code(), Code::kUnavailable) << r3->status.ToString();
  EXPECT_GE(r3->at - t0, 250ms);
  EXPECT_LT(r3->at - t0, 1500ms);
  // Both URLs tried, and named.
  EXPECT_EQ(r4->status.code(), Code::kUnavailable) << r4->status.ToString();
  EXPECT_NE(r4->status.message().find(dead), std::string::npos) << r4->status.ToString();
  EXPECT_NE(r4->status.message().find(silent.Url()), std::string::npos) << r4->status.ToString();
  EXPECT_LT(r4->at - t0, 1500ms);
  for (uint64_t p : {2, 3, 4}) EXPECT_EQ(a->transport->CallStats(p).open, 0u);
}

TEST(PeerTransportCallTest, PeerStoppedMidCallIsUnavailable) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  std::vector<std::shared_ptr<CallOutcome>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(StartCall(*a->transport, 2, 1, ""));
  ASSERT_TRUE(inbox.WaitFor(3));
  std::vector<Inbox::Request> held = inbox.Take();
  const auto t0 = Clock::now();
  b->Stop();  // the transport is destroyed too
  for (auto& c : calls) {
    ASSERT_TRUE(c->Wait(10s));
    EXPECT_EQ(c->status.code(), Code::kUnavailable) << c->status.ToString();
    EXPECT_LT(c->at - t0, 2s);
  }
  // Answering after the transport is gone is harmless and reaches nobody.
  held[0].respond(Status::Ok(), "too late");
  std::thread([r = held[1].respond] { r(Status::Ok(), "too late"); }).join();
  held.clear();  // the last one is dropped
  for (auto& c : calls) EXPECT_EQ(c->Runs(), 1);
  EXPECT_EQ(a->transport->CallStats(2).open, 0u);
}

TEST(PeerTransportCallTest, WithoutOnCallIsUnimplemented) {
  auto b = StartMember(Options(2));
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  auto r = CallAndWait(*a->transport, 2, 1, "anything");
  EXPECT_EQ(r->status.code(), Code::kUnimplemented) << r->status.ToString();
  EXPECT_EQ(r->payload, "");
}

TEST(PeerTransportCallTest, RequestLargerThanLimitIsResourceExhausted) {
  auto seen = std::make_shared<std::atomic<int>>(0);
  auto b = StartMember(Options(2), [seen](PeerTransportHandler& h) {
    h.on_call = [seen](uint32_t, std::string payload, Respond respond) {
      ++*seen;
      respond(Status::Ok(), std::to_string(payload.size()));
    };
  });
  auto o = Options(1);
  o.max_message_bytes = 64 << 10;
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  // The request frame is u64 call ID | u32 method | request bytes.
  auto over = CallAndWait(*a->transport, 2, 1, std::string((64 << 10) - 11, 'x'));
  EXPECT_EQ(over->status.code(), Code::kResourceExhausted) << over->status.ToString();
  EXPECT_NE(over->thread, std::this_thread::get_id());
  EXPECT_EQ(seen->load(), 0);
  EXPECT_EQ(a->transport->CallStats(2).established, 0u) << "nothing to dial for";
  auto fits = CallAndWait(*a->transport, 2, 1, std::string((64 << 10) - 12, 'x'));
  EXPECT_TRUE(fits->status.ok()) << fits->status.ToString();
  EXPECT_EQ(fits->payload, std::to_string((64 << 10) - 12));
  EXPECT_EQ(seen->load(), 1);
}

TEST(PeerTransportCallTest, AnswerLargerThanLimitIsResourceExhausted) {
  constexpr size_t kMax = 64 << 10;
  auto ob = Options(2);
  ob.max_message_bytes = kMax;
  // The response frame is u64 call ID | u32 code | u32 message length | message | answer.
  auto b = StartMember(ob, [](PeerTransportHandler& h) {
    h.on_call = [](uint32_t method, std::string, Respond respond) {
      switch (method) {
        case 1:
          return respond(Status::Ok(), std::string(kMax - 16, 'a'));
        case 2:
          return respond(Status::Ok(), std::string(kMax - 15, 'a'));
        case 3:  // the message counts too
          return respond(Status(Code::kInternal, std::string(kMax, 'm')), "");
        default:
          return respond(Status(Code::kInternal, "abc"), std::string(kMax - 19, 'a'));
      }
    };
  });
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  auto fits = CallAndWait(*a->transport, 2, 1, "");
  EXPECT_TRUE(fits->status.ok()) << fits->status.ToString();
  EXPECT_EQ(fits->payload, std::string(kMax - 16, 'a'));
  auto over = CallAndWait(*a->transport, 2, 2, "");
  EXPECT_EQ(over->status.code(), Code::kResourceExhausted) << over->status.ToString();
  EXPECT_EQ(over->payload, "");
  auto long_message = CallAndWait(*a->transport, 2, 3, "");
  EXPECT_EQ(long_message->status.code(), Code::kResourceExhausted);
  auto error_fits = CallAndWait(*a->transport, 2, 4, "");
  EXPECT_EQ(error_fits->status, Status(Code::kInternal, "abc"));
  EXPECT_EQ(error_fits->payload.size(), kMax - 19);
  EXPECT_EQ(a->transport->CallStats(2).established, 1u);
}

TEST(PeerTransportCallTest, PoolGrowsToTheCapAndClosesIdleConnections) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto o = Options(1);
  o.max_call_connections = 2;
  o.call_idle_timeout = 200ms;
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  EXPECT_EQ(a->transport->CallStats(2).established, 0u) << "connections are opened on demand";

  std::vector<std::shared_ptr<CallOutcome>> calls;
  for (int i = 0; i < 8; ++i) calls.push_back(StartCall(*a->transport, 2, 1, ""));
  ASSERT_TRUE(inbox.WaitFor(8));
  EXPECT_EQ(a->transport->CallStats(2).established, 1u) << "8 calls share one connection";
  calls.push_back(StartCall(*a->transport, 2, 1, ""));
  ASSERT_TRUE(inbox.WaitFor(9));
  EXPECT_EQ(a->transport->CallStats(2).established, 2u) << "the 9th call opens another";
  EXPECT_EQ(a->transport->CallStats(2).open, 2u);
  for (int i = 0; i < 21; ++i) calls.push_back(StartCall(*a->transport, 2, 1, ""));
  ASSERT_TRUE(inbox.WaitFor(30));
  EXPECT_EQ(a->transport->CallStats(2).established, 2u) << "max_call_connections";
  EXPECT_EQ(a->transport->CallStats(2).open, 2u);

  // Connections with calls in flight stay open past the idle timeout.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(a->transport->CallStats(2).open, 2u);
  for (auto& r : inbox.Take()) r.respond(Status::Ok(), "ok");
  Clock::time_point last;
  for (auto& c : calls) {
    ASSERT_TRUE(c->Wait());
    EXPECT_EQ(c->payload, "ok");
    last = std::max(last, c->at);
  }
  // Idle connections close after call_idle_timeout, not before.
  ASSERT_TRUE(WaitUntil([&] { return a->transport->CallStats(2).open == 0; }, 5s));
  EXPECT_GE(Clock::now() - last, 150ms);
  EXPECT_EQ(a->transport->CallStats(2).established, 2u);

  // The next call opens a fresh connection.
  auto again = StartCall(*a->transport, 2, 1, "");
  ASSERT_TRUE(inbox.WaitFor(1));
  inbox.Take().at(0).respond(Status::Ok(), "again");
  ASSERT_TRUE(again->Wait());
  EXPECT_EQ(again->payload, "again");
  EXPECT_EQ(a->transport->CallStats(2).established, 3u);
  EXPECT_EQ(a->transport->CallStats(2).open, 1u);
}

TEST(PeerTransportCallTest, StopCompletesOutstandingCallsThenCallsFailAtOnce) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto o = Options(1);
  o.dial_timeout = 10s;
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  SilentListener silent;
  ASSERT_TRUE(silent.ok());
  a->transport->AddPeer(2, {b->Url()});
  a->transport->AddPeer(3, {silent.Url()});

  std::vector<std::shared_ptr<CallOutcome>> calls;
  for (int i = 0; i < 10; ++i) calls.push_back(StartCall(*a->transport, 2, 1, ""));
  ASSERT_TRUE(inbox.WaitFor(10));  // in flight on established connections
  for (int i = 0; i < 3; ++i) calls.push_back(StartCall(*a->transport, 3, 1, ""));   // dialing
  for (int i = 0; i < 20; ++i) calls.push_back(StartCall(*a->transport, 2, 1, ""));  // just sent
  calls.push_back(StartCall(*a->transport, 9, 1, ""));                               // unknown
  const auto t0 = Clock::now();
  a->transport->Stop();
  EXPECT_LT(Clock::now() - t0, 2s);
  for (size_t i = 0; i < calls.size(); ++i) {
    auto& c = *calls[i];
    ASSERT_EQ(c.Runs(), 1) << "call " << i << " not completed when Stop() returned";
    EXPECT_EQ(c.status.code(), Code::kUnavailable) << i << ": " << c.status.ToString();
    if (i < 33) {  // not the call to an unknown peer, which may complete before Stop()
      EXPECT_EQ(c.thread, std::this_thread::get_id()) << "call " << i;
    }
  }
  // Answers after Stop() reach nobody.
  for (auto& r : inbox.Take()) r.respond(Status::Ok(), "late");

  // After Stop(): at once, on the calling thread.
  auto after = std::make_shared<CallOutcome>();
  a->transport->Call(2, 1, "", 10s, Record(after));
  EXPECT_EQ(after->Runs(), 1);
  EXPECT_EQ(after->status.code(), Code::kUnavailable);
  EXPECT_EQ(after->thread, std::this_thread::get_id());
  EXPECT_EQ(a->transport->CallStats(2).open, 0u);
  a->transport->Stop();  // idempotent
  std::this_thread::sleep_for(50ms);
  for (auto& c : calls) EXPECT_EQ(c->Runs(), 1);
}

TEST(PeerTransportCallTest, HandWrittenCallFramesFollowTheWireFormat) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  ASSERT_TRUE(b);
  RawConn c(b->transport->ports().at(0));
  ASSERT_TRUE(c.Write(HandshakeBytes(kClusterId, 1, 2, /*kind=*/3)));
  ASSERT_EQ(ReadAck(c), 0);
  // u64 call ID | u32 method | request bytes
  std::string req7, req9;
  Put64(req7, 7);
  Put32(req7, 70);
  req7 += "seven";
  Put64(req9, 9);
  Put32(req9, 90);
  ASSERT_TRUE(c.Write(FrameBytes(6, req7) + FrameBytes(6, req9)));
  ASSERT_TRUE(inbox.WaitFor(2));
  auto reqs = inbox.Take();
  EXPECT_EQ(reqs[0].method, 70u);
  EXPECT_EQ(reqs[0].payload, "seven");
  EXPECT_EQ(reqs[1].method, 90u);
  EXPECT_EQ(reqs[1].payload, "");
  reqs[1].respond(Status(Code::kPermissionDenied, "etcdserver: permission denied"), "nine");
  reqs[0].respond(Status::Ok(), "answer");
  // u64 call ID | u32 code | u32 message length | message | answer bytes, in answer order.
  auto [t1, p1] = ReadFrame(c);
  ASSERT_EQ(t1, 7);
  ASSERT_GE(p1.size(), 16u);
  EXPECT_EQ(Get64(p1, 0), 9u);
  EXPECT_EQ(Get32(p1, 8), 7u);
  ASSERT_EQ(Get32(p1, 12), 29u);
  EXPECT_EQ(p1.substr(16, 29), "etcdserver: permission denied");
  EXPECT_EQ(p1.substr(16 + 29), "nine");
  auto [t2, p2] = ReadFrame(c);
  ASSERT_EQ(t2, 7);
  EXPECT_EQ(p2.size(), 16u + 6);
  EXPECT_EQ(Get64(p2, 0), 7u);
  EXPECT_EQ(Get32(p2, 8), 0u);
  EXPECT_EQ(Get32(p2, 12), 0u);
  EXPECT_EQ(p2.substr(16), "answer");

  // A message frame on a call stream is corrupt: the connection closes.
  ASSERT_TRUE(c.Write(FrameBytes(1, Msg(1, 2, 1).SerializeAsString())));
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_EQ(b->rec->MessageCount(), 0u);

  // The cluster-information stream: cluster ID 0 and receiver ID 0 are accepted; one frame
  // (u32 code | u32 message length | message | information), then the receiver closes.
  auto info = StartMember(Options(3), [](PeerTransportHandler& h) {
    h.on_cluster_info = [] { return std::string("members\0!", 9); };
  });
  ASSERT_TRUE(info);
  RawConn q(info->transport->ports().at(0));
  ASSERT_TRUE(q.Write(HandshakeBytes(0, 0, 0, /*kind=*/4)));
  ASSERT_EQ(ReadAck(q), 0);
  auto [t3, p3] = ReadFrame(q);
  ASSERT_EQ(t3, 8);
  EXPECT_EQ(p3.size(), 8u + 9);
  EXPECT_EQ(Get32(p3, 0), 0u);
  EXPECT_EQ(Get32(p3, 4), 0u);
  EXPECT_EQ(p3.substr(8), std::string("members\0!", 9));
  EXPECT_TRUE(q.WaitClosed());
  // A wrong cluster ID is still refused.
  RawConn w(info->transport->ports().at(0));
  ASSERT_TRUE(w.Write(HandshakeBytes(kClusterId + 5, 0, 0, /*kind=*/4)));
  EXPECT_EQ(ReadAck(w), 2);
}

TEST(PeerTransportCallTest, RaftMessagesFlowWhileACallIsUnanswered) {
  Inbox inbox;
  auto b = StartMember(Options(2), inbox.Holder());
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url()});
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2); }));

  // An answer held back by the responder (as a leader's answer waits for a Raft round).
  auto held = StartCall(*a->transport, 2, 2, "");
  ASSERT_TRUE(inbox.WaitFor(1));
  std::vector<raftpb::Message> batch;
  for (uint64_t i = 1; i <= 100; ++i) batch.push_back(Msg(1, 2, i, 100));
  a->transport->Send(batch);
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 100; }, 10s));
  EXPECT_EQ(held->Runs(), 0);
  // Another call (on the same connection: it has room) is served meanwhile.
  auto second = StartCall(*a->transport, 2, 3, "");
  ASSERT_TRUE(inbox.WaitFor(2));
  auto requests = inbox.Take();
  requests.at(1).respond(Status::Ok(), "second");
  ASSERT_TRUE(second->Wait());
  EXPECT_EQ(second->payload, "second");
  EXPECT_EQ(held->Runs(), 0);

  requests.at(0).respond(Status::Ok(), "held");
  ASSERT_TRUE(held->Wait());
  EXPECT_EQ(held->payload, "held");
  std::vector<uint64_t> want;
  for (uint64_t i = 1; i <= 100; ++i) want.push_back(i);
  EXPECT_EQ(b->rec->Indexes(), want);
}

TEST(PeerTransportCallTest, FetchClusterInfo) {
  auto asked = std::make_shared<std::atomic<int>>(0);
  const std::string info("cluster\0info", 12);
  auto b = StartMember(Options(2), [asked, info](PeerTransportHandler& h) {
    h.on_cluster_info = [asked, info] {
      ++*asked;
      return info;
    };
  });
  auto mute = StartMember(Options(3));  // no on_cluster_info
  ASSERT_TRUE(b && mute);
  const std::string dead = DeadUrl();
  SilentListener silent;
  ASSERT_TRUE(silent.ok());

  auto r = PeerTransport::FetchClusterInfo(ParseUrls({b->Url()}), {}, 2s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, info);
  EXPECT_EQ(asked->load(), 1);

  // Tried in order: dead, silent (timing out) and unwilling members are skipped.
  auto t0 = Clock::now();
  r = PeerTransport::FetchClusterInfo(ParseUrls({dead, silent.Url(), mute->Url(), b->Url(), dead}),
                                      {}, 300ms);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, info);
  EXPECT_EQ(asked->load(), 2);
  EXPECT_GE(Clock::now() - t0, 250ms);
  EXPECT_LT(Clock::now() - t0, 1500ms);

  // Nobody answers: every URL is named with its reason.
  t0 = Clock::now();
  r = PeerTransport::FetchClusterInfo(ParseUrls({dead, silent.Url(), mute->Url()}), {}, 300ms);
  EXPECT_LT(Clock::now() - t0, 1500ms);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  for (const auto& u : {dead, silent.Url(), mute->Url()}) {
    EXPECT_NE(r.status().message().find(u), std::string::npos)
        << u << " in " << r.status().ToString();
  }
  EXPECT_NE(r.status().message().find("cluster information"), std::string::npos)
      << r.status().ToString();

  // Without on_cluster_info alone.
  r = PeerTransport::FetchClusterInfo(ParseUrls({mute->Url()}), {}, 2s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find(mute->Url()), std::string::npos) << r.status().ToString();

  // A stopped member (the transport need not run for the asker either).
  const std::string b_url = b->Url();
  b->Stop();
  r = PeerTransport::FetchClusterInfo(ParseUrls({b_url}), {}, 300ms);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(asked->load(), 2);

  EXPECT_FALSE(PeerTransport::FetchClusterInfo({}, {}, 1s).ok());
}

// ---------------------------------------------------------------------------------------------
// TLS

class PeerTransportTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/etcdw-peer-tls-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string script = "set -e; cd '" + dir_ +
                               "'\n"
                               "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
                               "openssl req -x509 $K -keyout ca.key -out ca.crt -subj /CN=test-ca "
                               "-days 2\n"
                               "openssl req -x509 $K -keyout other-ca.key -out other-ca.crt "
                               "-subj /CN=other-ca -days 2\n"
                               "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n"
                               "extendedKeyUsage=serverAuth,clientAuth\\n"
                               "keyUsage=critical,digitalSignature\\n' > ext.cnf\n"
                               "openssl req $K -keyout peer.key -out peer.csr -subj /CN=peer\n"
                               "openssl x509 -req -in peer.csr -CA ca.crt -CAkey ca.key "
                               "-CAcreateserial -days 2 -extfile ext.cnf -out peer.crt\n"
                               "openssl req $K -keyout other.key -out other.csr -subj /CN=other\n"
                               "openssl x509 -req -in other.csr -CA other-ca.crt -CAkey "
                               "other-ca.key -CAcreateserial -days 2 -extfile ext.cnf -out "
                               "other.crt\n";
    std::ofstream(dir_ + "/gen.sh") << script;
    ASSERT_EQ(std::system(("bash '" + dir_ + "/gen.sh' >'" + dir_ + "/gen.log' 2>&1").c_str()), 0)
        << "openssl failed; see " << dir_ << "/gen.log";
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  static common::TlsConfig Tls(const std::string& cert, bool client_cert_auth = true) {
    common::TlsConfig t;
    if (!cert.empty()) {
      t.cert_file = dir_ + "/" + cert + ".crt";
      t.key_file = dir_ + "/" + cert + ".key";
    }
    t.trusted_ca_file = dir_ + "/ca.crt";
    t.client_cert_auth = client_cert_auth;
    return t;
  }

  static PeerTransportOptions TlsOptions(uint64_t id, const std::string& cert = "peer") {
    auto o = Options(id, "https://127.0.0.1:0");
    o.tls = Tls(cert);
    return o;
  }

  // `a` (a client of `b`, listening on plain http) sends to `b` and must be turned away.
  static void ExpectRejected(Member& a, Member& b, const std::string& url) {
    a.transport->AddPeer(b.id, {url});
    a.transport->Send({Msg(a.id, b.id, 1)});
    ASSERT_TRUE(WaitUntil([&] { return a.rec->Unreachable(b.id) > 0; }));
    EXPECT_FALSE(a.transport->Connected(b.id));
    EXPECT_EQ(b.rec->MessageCount(), 0u);
  }

  static std::string dir_;
};

std::string PeerTransportTlsTest::dir_;

TEST_F(PeerTransportTlsTest, ClientCertAuthMessagesAndSnapshot) {
  auto a = StartMember(TlsOptions(1));
  auto b = StartMember(TlsOptions(2));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url("localhost")});  // DNS SAN
  b->transport->AddPeer(1, {a->Url()});             // IP SAN
  ASSERT_TRUE(WaitUntil([&] { return a->transport->Connected(2) && b->transport->Connected(1); }));
  std::vector<raftpb::Message> batch;
  for (uint64_t i = 1; i <= 200; ++i) batch.push_back(Msg(1, 2, i, i == 100 ? (2 << 20) : 64));
  a->transport->Send(batch);
  b->transport->Send({Msg(2, 1, 1)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 200; }));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->MessageCount() == 1; }));
  std::vector<uint64_t> want;
  for (uint64_t i = 1; i <= 200; ++i) want.push_back(i);
  EXPECT_EQ(b->rec->Indexes(), want);

  constexpr size_t kSize = (2 << 20) + 7;
  a->transport->SendSnapshot(SnapMsg(1, 2, 9), std::make_unique<PatternSource>(kSize, 9));
  ASSERT_TRUE(WaitUntil([&] { return a->rec->SnapshotsSent() == 1; }, 60s));
  std::lock_guard<std::mutex> lock(b->rec->mu);
  EXPECT_TRUE(a->rec->snapshots_sent[0].second);
  EXPECT_EQ(b->rec->sink_crc, SnapCrc(kSize, 9));
  EXPECT_EQ(b->rec->snapshots_received.size(), 1u);
}

TEST_F(PeerTransportTlsTest, MixedSchemesPerPeer) {
  // `b` listens on both; `a` (plain) reaches it over http, `c` over https.
  auto ob = Options(2, "https://127.0.0.1:0");
  ob.listen_urls.push_back(*common::ParseUrl("http://127.0.0.1:0"));
  ob.tls = Tls("peer", /*client_cert_auth=*/false);
  auto b = StartMember(ob);
  auto a = StartMember(Options(1));
  auto oc = Options(3);
  oc.tls = Tls("");  // verifies the server, presents no certificate
  auto c = StartMember(oc);
  ASSERT_TRUE(a && b && c);
  const auto ports = b->transport->ports();
  ASSERT_EQ(ports.size(), 2u);
  a->transport->AddPeer(2, {"http://127.0.0.1:" + std::to_string(ports[1])});
  c->transport->AddPeer(2, {"https://127.0.0.1:" + std::to_string(ports[0])});
  // Queued while the first dial is under way, delivered once it succeeds.
  a->transport->Send({Msg(1, 2, 1)});
  c->transport->Send({Msg(3, 2, 2)});
  ASSERT_TRUE(WaitUntil([&] { return b->rec->MessageCount() == 2; }));
  EXPECT_TRUE(a->transport->Connected(2));
  EXPECT_TRUE(c->transport->Connected(2));
}

TEST_F(PeerTransportTlsTest, ClientWithoutCertificateIsRejected) {
  auto b = StartMember(TlsOptions(2));
  auto o = Options(1);
  o.tls = Tls("");  // trusts the CA but has no certificate of its own
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  ExpectRejected(*a, *b, b->Url());
}

TEST_F(PeerTransportTlsTest, ClientCertificateFromAnotherCaIsRejected) {
  auto b = StartMember(TlsOptions(2));
  auto o = Options(1);
  o.tls = Tls("other");
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  ExpectRejected(*a, *b, b->Url());
}

TEST_F(PeerTransportTlsTest, ServerCertificateFromAnotherCaIsRejected) {
  auto ob = TlsOptions(2, "other");
  ob.tls.trusted_ca_file = dir_ + "/other-ca.crt";
  auto b = StartMember(ob);
  auto o = Options(1);
  o.tls = Tls("peer");
  auto a = StartMember(o);
  ASSERT_TRUE(a && b);
  ExpectRejected(*a, *b, b->Url());
}

TEST_F(PeerTransportTlsTest, PlaintextToTlsPortFailsCleanly) {
  auto b = StartMember(TlsOptions(2));
  auto a = StartMember(Options(1));
  ASSERT_TRUE(a && b);
  ExpectRejected(*a, *b, "http://127.0.0.1:" + std::to_string(b->transport->ports().at(0)));
  // And TLS to a plaintext port.
  auto o = Options(3);
  o.tls = Tls("peer");
  auto c = StartMember(o);
  ASSERT_TRUE(c);
  ExpectRejected(*c, *a, "https://127.0.0.1:" + std::to_string(a->transport->ports().at(0)));
}

TEST_F(PeerTransportTlsTest, BadTlsConfigurationFailsStart) {
  auto o = Options(1, "https://127.0.0.1:0");
  auto r = PeerTransport::Start(o, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("https://127.0.0.1:0"), std::string::npos);
  o.tls = Tls("peer");
  o.tls.cert_file = dir_ + "/missing.crt";
  r = PeerTransport::Start(o, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.crt"), std::string::npos) << r.status().ToString();
}

TEST_F(PeerTransportTlsTest, CallsAndClusterInfoOverTls) {
  auto b = StartMember(TlsOptions(2), [](PeerTransportHandler& h) {
    Echo()(h);
    h.on_cluster_info = [] { return std::string("tls cluster info"); };
  });
  auto a = StartMember(TlsOptions(1));
  ASSERT_TRUE(a && b);
  a->transport->AddPeer(2, {b->Url("localhost")});  // DNS SAN

  constexpr int kCalls = 40;
  std::vector<std::shared_ptr<CallOutcome>> calls(kCalls);
  for (auto& c : calls) c = std::make_shared<CallOutcome>();
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&, t] {
      for (int i = t; i < kCalls; i += 2) {
        a->transport->Call(2, static_cast<uint32_t>(i), "tls-" + std::to_string(i), 20s,
                           Record(calls[i]));
      }
    });
  }
  for (auto& th : callers) th.join();
  const std::string big = std::string(1 << 20, 'b') + "end";
  auto large = CallAndWait(*a->transport, 2, 7, big);
  EXPECT_TRUE(large->status.ok()) << large->status.ToString();
  EXPECT_TRUE(large->payload == "7:" + big);
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(calls[i]->Wait());
    if (i == 13) {
      EXPECT_EQ(calls[i]->status, Status(Code::kNotFound, "no such thing: tls-13"));
    } else {
      EXPECT_TRUE(calls[i]->status.ok()) << i << ": " << calls[i]->status.ToString();
      EXPECT_EQ(calls[i]->payload, std::to_string(i) + ":tls-" + std::to_string(i));
    }
  }
  const auto stats = a->transport->CallStats(2);
  EXPECT_GE(stats.open, 1u);
  EXPECT_LE(stats.established, 4u);

  // The cluster information over https, with the member's own TLS configuration.
  auto r = PeerTransport::FetchClusterInfo(ParseUrls({b->Url()}), Tls("peer"), 2s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "tls cluster info");
  r = PeerTransport::FetchClusterInfo(ParseUrls({DeadUrl(), b->Url("localhost")}), Tls("peer"), 2s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "tls cluster info");
  // No client certificate (client-cert-auth), or a server from another CA: refused.
  r = PeerTransport::FetchClusterInfo(ParseUrls({b->Url()}), Tls(""), 2s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find(b->Url()), std::string::npos) << r.status().ToString();
  auto other = Tls("other");
  other.trusted_ca_file = dir_ + "/other-ca.crt";
  r = PeerTransport::FetchClusterInfo(ParseUrls({b->Url()}), other, 2s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace etcdw::peer_transport
