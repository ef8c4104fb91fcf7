#include "peer_transport/peer_transport_fixture.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "etcdw/common/hash.h"

namespace etcdw::peer_transport {

// ---------------------------------------------------------------------------------------------
// Messages and snapshots

raftpb::Message Msg(uint64_t from, uint64_t to, uint64_t index, size_t data_bytes) {
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

Result<bool> PatternSource::Next(std::string& out, size_t max_bytes) {
  if (produced_ >= fail_at_) return Internal("disk read failed");
  size_t n = std::min(max_bytes, total_ - produced_);
  for (size_t i = 0; i < n; ++i) out.push_back(SnapByte(produced_ + i, seed_));
  produced_ += n;
  return produced_ < total_;
}

// ---------------------------------------------------------------------------------------------
// Members

size_t Recorder::MessageCount() {
  std::lock_guard<std::mutex> lock(mu);
  return messages.size();
}

int Recorder::Unreachable(uint64_t peer) {
  std::lock_guard<std::mutex> lock(mu);
  return unreachable[peer];
}

std::vector<uint64_t> Recorder::Indexes() {
  std::lock_guard<std::mutex> lock(mu);
  std::vector<uint64_t> out;
  for (const auto& m : messages) out.push_back(m.index());
  return out;
}

size_t Recorder::SnapshotsSent() {
  std::lock_guard<std::mutex> lock(mu);
  return snapshots_sent.size();
}

size_t Recorder::SnapshotsReceived() {
  std::lock_guard<std::mutex> lock(mu);
  return snapshots_received.size();
}

int Recorder::Abandoned() {
  std::lock_guard<std::mutex> lock(mu);
  return sinks_abandoned;
}

RecordingSink::RecordingSink(std::shared_ptr<Recorder> rec) : rec_(std::move(rec)) {
  std::lock_guard<std::mutex> lock(rec_->mu);
  rec_->sink_bytes = 0;
  rec_->sink_crc = 0;
  rec_->sink_max_chunk = 0;
  rec_->sink_finished = false;
}

RecordingSink::~RecordingSink() {
  std::lock_guard<std::mutex> lock(rec_->mu);
  if (!finished_) ++rec_->sinks_abandoned;
}

Status RecordingSink::Write(std::string_view chunk) {
  std::lock_guard<std::mutex> lock(rec_->mu);
  rec_->sink_bytes += chunk.size();
  rec_->sink_crc = common::Crc32c(rec_->sink_crc, chunk);
  rec_->sink_max_chunk = std::max(rec_->sink_max_chunk, chunk.size());
  return Status::Ok();
}

Status RecordingSink::Finish() {
  std::lock_guard<std::mutex> lock(rec_->mu);
  rec_->sink_finished = finished_ = true;
  return Status::Ok();
}

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

std::string Member::Url(const std::string& host) const {
  return scheme + "://" + host + ":" + std::to_string(transport->ports().at(0));
}

void Member::Stop() {
  if (!transport) return;
  transport->Stop();
  rec->stopped = true;
  transport.reset();
}

Member::~Member() {
  Stop();
  EXPECT_EQ(rec->late_callbacks.load(), 0) << "callback after Stop() returned";
}

PeerTransportOptions Options(uint64_t id, const std::string& listen) {
  using std::chrono::milliseconds;
  PeerTransportOptions o;
  o.local_id = id;
  o.cluster_id = kClusterId;
  o.listen_urls = {*common::ParseUrl(listen)};
  o.dial_timeout = milliseconds(2000);
  o.max_backoff = milliseconds(200);
  return o;
}

std::unique_ptr<Member> TryStartMember(PeerTransportOptions o, Status* error,
                                       const HandlerExtra& extra) {
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

std::unique_ptr<Member> StartMember(PeerTransportOptions o, const HandlerExtra& extra) {
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

uint32_t Get32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(s[at + i]);
  return v;
}

uint64_t Get64(const std::string& s, size_t at) {
  return uint64_t{Get32(s, at)} << 32 | Get32(s, at + 4);
}

std::string HandshakeBytes(uint64_t cluster, uint64_t sender, uint64_t receiver, uint8_t kind) {
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

std::string FrameBytes(uint8_t type, const std::string& payload) {
  std::string b;
  Put32(b, static_cast<uint32_t>(payload.size()));
  Put32(b, common::Crc32c(0, payload));
  b.push_back(static_cast<char>(type));
  return b + payload;
}

RawConn::RawConn(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

RawConn::~RawConn() { ::close(fd_); }

bool RawConn::Write(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string RawConn::Read(size_t n, std::chrono::milliseconds timeout) {
  std::string out;
  const auto deadline = SteadyClock::now() + timeout;
  while (out.size() < n) {
    if (!WaitReadable(deadline)) return "";
    char buf[256];
    ssize_t r = ::recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
    if (r <= 0) return "";
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

bool RawConn::WaitClosed(std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (!WaitReadable(deadline)) return false;
    char buf[256];
    ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
    if (r <= 0) return true;
  }
}

bool RawConn::Closed() {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char byte;
  return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

bool RawConn::WaitReadable(SteadyClock::time_point deadline) {
  while (true) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

int ReadAck(RawConn& c) {
  std::string ack = c.Read(8);
  if (ack.size() != 8 || ack.substr(0, 4) != "EWPA") return -1;
  return static_cast<int>(static_cast<uint8_t>(ack[7]));
}

std::pair<int, std::string> ReadFrame(RawConn& c) {
  std::string h = c.Read(9);
  if (h.size() != 9) return {-1, ""};
  std::string payload = c.Read(Get32(h, 0));
  if (payload.size() != Get32(h, 0) || common::Crc32c(0, payload) != Get32(h, 4)) return {-1, ""};
  return {static_cast<uint8_t>(h[8]), payload};
}

RawListener::RawListener(Mode mode) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(fd_, 64) == 0;
  socklen_t len = sizeof addr;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (!ok_) return;
  acceptor_ = std::thread([this, mode] {
    for (;;) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // shut down by the destructor
      }
      if (mode == Mode::kClosing) {
        ::close(c);
      } else {
        held_.push_back(c);
      }
      ++accepted_;
    }
  });
}

RawListener::~RawListener() {
  ::shutdown(fd_, SHUT_RDWR);  // wakes the blocked accept()
  if (acceptor_.joinable()) acceptor_.join();
  ::close(fd_);
  for (int c : held_) ::close(c);
}

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

// ---------------------------------------------------------------------------------------------
// Calls

Respond Record(const std::shared_ptr<CallOutcome>& o) {
  return [o](Status st, std::string payload) {
    std::lock_guard<std::mutex> lock(o->mu);
    if (++o->runs == 1) {
      o->status = std::move(st);
      o->payload = std::move(payload);
      o->thread = std::this_thread::get_id();
      o->at = SteadyClock::now();
    }
    o->cv.notify_all();
  };
}

std::shared_ptr<CallOutcome> StartCall(PeerTransport& t, uint64_t peer, uint32_t method,
                                       std::string payload, std::chrono::milliseconds timeout) {
  auto o = std::make_shared<CallOutcome>();
  t.Call(peer, method, std::move(payload), timeout, Record(o));
  return o;
}

std::shared_ptr<CallOutcome> CallAndWait(PeerTransport& t, uint64_t peer, uint32_t method,
                                         std::string payload, std::chrono::milliseconds timeout) {
  auto o = StartCall(t, peer, method, std::move(payload), timeout);
  EXPECT_TRUE(o->Wait(timeout + std::chrono::seconds(10))) << "done never ran";
  return o;
}

HandlerExtra Inbox::Holder() {
  return [this](PeerTransportHandler& h) {
    h.on_call = [this](uint32_t method, std::string payload, Respond respond) {
      std::lock_guard<std::mutex> lock(mu);
      requests.push_back({method, std::move(payload), std::move(respond)});
      cv.notify_all();
    };
  };
}

bool Inbox::WaitFor(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu);
  return cv.wait_for(lock, timeout, [&] { return requests.size() >= n; });
}

size_t Inbox::Size() {
  std::lock_guard<std::mutex> lock(mu);
  return requests.size();
}

std::vector<Inbox::Request> Inbox::Take() {
  std::lock_guard<std::mutex> lock(mu);
  return std::exchange(requests, {});
}

HandlerExtra Echo() {
  return [](PeerTransportHandler& h) {
    h.on_call = [](uint32_t method, std::string payload, Respond respond) {
      if (method == 13) return respond(Status(Code::kNotFound, "no such thing: " + payload), "");
      respond(Status::Ok(), std::to_string(method) + ":" + payload);
    };
  };
}

}  // namespace etcdw::peer_transport
