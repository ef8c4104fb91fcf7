#include "event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "etcdw/common/logging.h"
#include "etcdw/member/call_deadline.h"
#include "grpc_wire.h"
#include "http1_endpoints.h"
#include "http1_request.h"

namespace etcdw::client_api {

namespace {

// Moves bytes between a connection's socket and `buf`, through TLS when it has it: > 0 bytes
// moved, kWouldBlock, or kClosed (the peer left, or the connection failed).
constexpr ssize_t kWouldBlock = TlsSession::kWouldBlock;
constexpr ssize_t kClosed = TlsSession::kClosed;

ssize_t ReadSome(Conn& c, char* buf, size_t n) {
  if (c.tls) return c.tls->Read(buf, n);
  ssize_t r = recv(c.fd, buf, n, 0);
  if (r > 0) return r;
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return kWouldBlock;
  return kClosed;
}

ssize_t WriteSome(Conn& c, const char* buf, size_t n) {
  if (c.tls) return c.tls->Write(buf, n);
  ssize_t r = send(c.fd, buf, n, MSG_NOSIGNAL);
  if (r > 0) return r;
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return kWouldBlock;
  return kClosed;
}

Status Errno(const std::string& what) {
  return Status(Code::kUnavailable, what + ": " + std::strerror(errno));
}

}  // namespace

// grpc-go's answer for a path ("/etcdserverpb.KV/Put") no method has.
Status UnknownMethod(const MethodTable& methods, const std::string& path) {
  // As grpc-go splits it: the service is what comes before the last '/' ("/v3/kv/range" names
  // method "range" of service "v3/kv").
  const std::string_view name = std::string_view(path).substr(path.rfind('/', 0) == 0 ? 1 : 0);
  const size_t slash = name.rfind('/');
  if (slash == std::string_view::npos) {
    return Status(Code::kUnimplemented, "malformed method name: \"" + path + "\"");
  }
  const std::string service(name.substr(0, slash));
  if (!methods.HasService(service)) {
    return Status(Code::kUnimplemented, "unknown service " + service);
  }
  return Status(Code::kUnimplemented, "unknown method " + std::string(name.substr(slash + 1)) +
                                          " for service " + service);
}

Status EventLoop::Init() {
  epfd = epoll_create1(EPOLL_CLOEXEC);
  mail->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epfd < 0 || mail->efd < 0) return Errno("native rpc: epoll/eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kMailboxTag;
  epoll_ctl(epfd, EPOLL_CTL_ADD, mail->efd, &ev);
  return Status::Ok();
}

void EventLoop::Adopt(Mailbox::Accepted a) {
  if (draining) {
    close(a.fd);
    host.ConnectionClosed();
    return;
  }
  auto c = std::make_unique<Conn>();
  c->id = next_id++;
  c->fd = a.fd;
  c->metrics_only = a.metrics_only;
  if (a.tls) c->tls = std::make_unique<TlsSession>(a.tls, a.fd);
  Conn* raw = c.get();
  H2Connection::Handler h;
  h.is_stream = [this](const std::string& path) {
    return host.methods.FindStream(path) != nullptr;
  };
  h.on_request = [this, raw](H2Connection::Request& req) { OnRequest(*raw, req); };
  h.on_stream_open = [this, raw](H2Connection::Request& req) { OnStreamOpen(*raw, req); };
  h.on_message = [raw](int32_t stream, std::string_view payload) {
    if (auto it = raw->calls.find(stream); it != raw->calls.end()) it->second->OnMessage(payload);
  };
  h.on_half_close = [raw](int32_t stream) {
    if (auto it = raw->calls.find(stream); it != raw->calls.end()) it->second->OnHalfClose();
  };
  h.on_stream_gone = [raw](int32_t stream) {
    if (auto g = raw->h2_gateways.find(stream); g != raw->h2_gateways.end()) {
      std::unique_ptr<GatewayStream> gone = std::move(g->second.stream);
      raw->h2_gateways.erase(g);
      gone->Gone();
      return;
    }
    auto it = raw->calls.find(stream);
    if (it == raw->calls.end()) return;
    std::unique_ptr<StreamCall> call = std::move(it->second);
    raw->calls.erase(it);
    call->OnGone();
  };
  PingPolicy pings;
  pings.min_interval = host.opts.keepalive_min_time;
  c->h2 = std::make_unique<H2Connection>(kMessagePrefixBytes + host.opts.max_request_message_bytes,
                                         std::move(h), pings);
  c->last_read = std::chrono::steady_clock::now();
  c->read_deadline = c->last_read + host.opts.request_read_timeout;  // until it shows its protocol
  c->events = EPOLLIN;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = c->id;
  epoll_ctl(epfd, EPOLL_CTL_ADD, a.fd, &ev);
  conns.emplace(c->id, std::move(c));
}

void EventLoop::OnRequest(Conn& c, H2Connection::Request& req) {
  auto answer_now = [&](const Status& st) {
    c.h2->Respond(req.stream, st, {});
    MarkDirty(c);
  };
  // Over TLS, as etcd's grpcHandlerFunc: an HTTP/2 request that is not gRPC goes to the HTTP
  // handlers (the gateway, /health ...), answered as over HTTP/1.1 and re-framed. (etcd hands
  // plain-text HTTP/2 to its gRPC server alone, which refuses such a request.)
  if (c.tls && req.content_type.find("application/grpc") == std::string::npos) {
    return OnHttp2Plain(c, req);
  }
  if (!IsGrpcContentType(req.content_type)) {
    c.h2->Refuse(req.stream);
    return MarkDirty(c);
  }
  if (Status st = CheckHeaders(req); !st.ok()) return answer_now(st);
  const MethodTable::UnaryMethod* method = host.methods.Find(req.path);
  if (!method) return answer_now(UnknownMethod(host.methods, req.path));
  const CallStats stats = method->stats;
  stats.method->started.Add();
  auto payload = SingleMessage(req.body, host.opts.max_request_message_bytes);
  Status refused = payload.ok() ? Status::Ok() : payload.status();
  if (refused.ok() && req.body_over_limit) {  // a small first message, and more after it
    refused = Status(Code::kInternal, "grpc: a unary request carried more than one message");
  }
  if (!refused.ok()) {
    stats.Handled(refused);
    return answer_now(refused);
  }
  stats.Received(payload->size());
  std::shared_ptr<std::atomic<bool>> taken;
  if (req.ctx.timeout) {
    // grpc-timeout: the client gives up then. Work it would no longer wait for is not started.
    const auto now = std::chrono::steady_clock::now();
    req.ctx.deadline =
        now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(*req.ctx.timeout);
    if (*req.ctx.deadline <= now) {
      stats.Handled(DeadlineExceeded());
      return answer_now(DeadlineExceeded());
    }
    taken = std::make_shared<std::atomic<bool>>(false);
    deadlines.emplace(*req.ctx.deadline, DeadlineCall{c.id, req.stream, taken, stats});
  }
  ++in_flight;
  if (c.tls) req.ctx.cert_common_name = c.tls->VerifiedCommonName();
  // What the member does for the call on this thread knows its deadline (a write waiting for a
  // leader is dropped after it).
  member::CallDeadline deadline_scope(req.ctx.deadline);
  method->call(req.ctx, *payload,
               [mail = mail, conn = c.id, stream = req.stream, stats, taken](const Status& st,
                                                                             std::string framed) {
                 // Answered DEADLINE_EXCEEDED already: this answer comes too late.
                 if (taken && taken->exchange(true)) return;
                 if (st.ok()) stats.Sent(framed);
                 stats.Handled(st);
                 mail->Post({Answered::kUnary, conn, stream, st, std::move(framed)});
               });
}

void EventLoop::CheckDeadlines() {
  const auto now = std::chrono::steady_clock::now();
  while (!deadlines.empty() && deadlines.begin()->first <= now) {
    DeadlineCall d = std::move(deadlines.begin()->second);
    deadlines.erase(deadlines.begin());
    if (d.taken->exchange(true)) continue;  // answered in time
    // The call's own answer will not be posted: it counts as answered here.
    --in_flight;
    d.stats.Handled(DeadlineExceeded());
    auto it = conns.find(d.conn);
    if (it == conns.end()) continue;
    it->second->h2->Respond(d.stream, DeadlineExceeded(), {});
    MarkDirty(*it->second);
  }
  // Calls answered in time leave their entries until their deadline; drop them early when many
  // pile up, so that a long grpc-timeout on every call costs no memory.
  if (deadlines.size() > deadlines_sweep_at) {
    for (auto it = deadlines.begin(); it != deadlines.end();) {
      it = it->second.taken->load() ? deadlines.erase(it) : std::next(it);
    }
    deadlines_sweep_at = std::max<size_t>(4096, 2 * deadlines.size());
  }
}

int EventLoop::MsUntilNextDeadline(int cap) const {
  if (deadlines.empty()) return cap;
  const auto left = deadlines.begin()->first - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  // Rounded up: waking before the deadline would only loop once more.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, cap));
}

void EventLoop::OnHttp2Plain(Conn& c, H2Connection::Request& req) {
  ++in_flight;
  auto answer = [mail = mail, conn = c.id, stream = req.stream](std::string response) {
    mail->Post({Answered::kHttp2Plain, conn, stream, Status::Ok(), std::move(response)});
  };
  const Http1Context ctx{host.etcd, host.methods, host.opts.max_request_message_bytes,
                         host.opts.enable_grpc_gateway};
  if (req.body_over_limit) return answer(Http1ParseError(Http1Parse::kBodyTooLarge));
  Http1Request r;
  r.method = req.method;
  const size_t q = req.path.find('?');
  r.path = req.path.substr(0, q);
  r.query = q == std::string::npos ? "" : req.path.substr(q + 1);
  r.headers = std::move(req.headers);
  r.body = std::move(req.body);
  if (ctx.gateway && GatewayStream::IsStreamPath(r.path)) {
    --in_flight;  // a stream, answered by its messages
    return OnH2GatewayStream(c, req.stream, r);
  }
  AnswerHttp1(ctx, HttpPort::kClient, r, std::move(answer));
}

void EventLoop::OnH2GatewayStream(Conn& c, int32_t stream, const Http1Request& req) {
  MarkDirty(c);
  auto sink = std::make_shared<MailboxSink>(mail, c.id, stream);
  GatewayAnswer refused;
  std::unique_ptr<GatewayStream> gs = GatewayStream::Open(host.methods, req, sink, &refused);
  if (!gs) {
    SplitResponse r = SplitHttp1Response(GatewayHttpResponse(refused));
    return c.h2->RespondHttp(stream, r.status, r.headers, std::move(r.body));
  }
  // The client may reset the stream: on_stream_gone then ends the call.
  c.h2->TrackGone(stream);
  c.h2_gateways[stream].stream = std::move(gs);
}

bool EventLoop::OnH2GatewayAnswer(Conn& c, Answered& a) {
  auto it = c.h2_gateways.find(a.stream);
  if (it == c.h2_gateways.end()) return false;
  Conn::H2Gateway& g = it->second;
  auto head = [&](int code, bool answered) {
    SplitResponse h = SplitHttp1Response(GatewayStreamHead(code, answered));
    c.h2->StartHttp(a.stream, h.status, h.headers);
    g.head_sent = true;
  };
  if (a.kind == Answered::kStreamMessage) {
    if (!g.head_sent) head(200, /*answered=*/true);
    // Written once the client's flow-control window took it: a slow reader holds the watch
    // back, as over gRPC.
    c.h2->Send(a.stream, g.stream->ResultLine(a.framed), std::move(a.written));
    return true;
  }
  // An error before any message sets the status, as grpc-gateway's stream error handler does.
  if (!g.head_sent) head(a.st.ok() ? 200 : HttpStatusFromCode(a.st.code()), /*answered=*/false);
  if (std::string end = GatewayStream::EndLine(a.st); !end.empty()) {
    c.h2->Send(a.stream, std::move(end));
  }
  c.h2->FinishHttp(a.stream);
  std::unique_ptr<GatewayStream> ended = std::move(g.stream);
  c.h2_gateways.erase(it);
  ended->Gone();
  return true;
}

bool EventLoop::IsGrpcContentType(const std::string& content_type) {
  constexpr std::string_view kGrpc = "application/grpc";
  if (content_type.rfind(kGrpc, 0) != 0) return false;
  return content_type.size() == kGrpc.size() || content_type[kGrpc.size()] == '+' ||
         content_type[kGrpc.size()] == ';';
}

Status EventLoop::CheckHeaders(const H2Connection::Request& req) {
  if (!req.encoding.empty() && req.encoding != "identity") {
    return UnsupportedEncoding(req.encoding);
  }
  return Status::Ok();
}

void EventLoop::OnStreamOpen(Conn& c, H2Connection::Request& req) {
  MarkDirty(c);
  if (!IsGrpcContentType(req.content_type)) return c.h2->Refuse(req.stream);
  if (Status st = CheckHeaders(req); !st.ok()) return c.h2->Finish(req.stream, st);
  const MethodTable::OpenStream* open = host.methods.FindStream(req.path);
  auto sink = std::make_shared<MailboxSink>(mail, c.id, req.stream);
  if (c.tls) req.ctx.cert_common_name = c.tls->VerifiedCommonName();
  if (auto call = (*open)(req.ctx, sink)) c.calls[req.stream] = std::move(call);
}

void EventLoop::DeliverMail() {
  Mailbox::Contents got = mail->Take();
  for (Mailbox::Accepted& a : got.connections) Adopt(std::move(a));
  for (Answered& a : got.answers) {
    if (a.kind == Answered::kUnary || a.kind == Answered::kHttp1 ||
        a.kind == Answered::kHttp2Plain) {
      --in_flight;
    }
    auto it = conns.find(a.conn);
    if (it == conns.end()) {  // the client went away
      if (a.written) a.written(false);
      continue;
    }
    if (it->second->mode == Conn::Mode::kHttp1 && a.kind != Answered::kHttp1) {
      OnGatewayStreamAnswer(*it->second, a);
      MarkDirty(*it->second);
      continue;
    }
    if (a.kind == Answered::kHttp1) {
      Conn& c = *it->second;
      bool stays_open = false;
      if (c.http1_adapt) stays_open = c.http1_framing.Adapt(&a.framed);
      c.out.append(a.framed);
      Http1Answered(c, stays_open);
      MarkDirty(c);
      continue;
    }
    if ((a.kind == Answered::kStreamMessage || a.kind == Answered::kStreamEnd) &&
        OnH2GatewayAnswer(*it->second, a)) {
      MarkDirty(*it->second);
      continue;
    }
    H2Connection& h2 = *it->second->h2;
    switch (a.kind) {
      case Answered::kUnary:
        h2.Respond(a.stream, a.st, std::move(a.framed));
        break;
      case Answered::kStreamMessage:
        h2.Send(a.stream, std::move(a.framed), std::move(a.written));
        break;
      case Answered::kStreamEnd:
        h2.Finish(a.stream, a.st);
        break;
      case Answered::kHttp2Plain: {
        SplitResponse r = SplitHttp1Response(a.framed);
        h2.RespondHttp(a.stream, r.status, r.headers, std::move(r.body));
        break;
      }
      case Answered::kHttp1:
        break;  // above
    }
    MarkDirty(*it->second);
  }
}

void EventLoop::OnReadable(Conn& c) {
  char buf[64 * 1024];
  const uint64_t id = c.id;
  while (true) {
    ssize_t n = ReadSome(c, buf, sizeof buf);
    if (n == kWouldBlock) break;
    c.last_read = std::chrono::steady_clock::now();
    c.probe_sent = {};
    if (n == kClosed) {
      if (c.tls && !c.tls->error().empty()) {
        log::Debug("native rpc: TLS connection failed", {log::F("reason", c.tls->error())});
      }
      return Close(id);
    }
    if (!Take(c, buf, static_cast<size_t>(n))) return;
    // A short read emptied the socket; TLS hands over one record at a time, so it reads on
    // until it would block.
    if (!c.tls && static_cast<size_t>(n) < sizeof buf) break;
    if (ReadPaused(c)) break;
  }
  MarkDirty(c);
}

bool EventLoop::Take(Conn& c, const char* data, size_t n) {
  if (c.mode == Conn::Mode::kSniffing) {
    c.first.append(data, n);
    // A metrics URL serves HTTP/1.1 alone (as etcd's plain HTTP server there): an HTTP/2
    // preface is answered as a malformed HTTP/1 request.
    auto protocol = c.metrics_only ? Protocol::kHttp1 : SniffProtocol(c.first);
    if (!protocol) return true;
    if (*protocol == Protocol::kHttp1) {
      c.mode = Conn::Mode::kHttp1;
      OnHttp1(c);
      return true;
    }
    c.mode = Conn::Mode::kHttp2;
    std::string first = std::move(c.first);
    c.first.clear();
    return Take(c, first.data(), first.size());
  }
  if (c.mode == Conn::Mode::kHttp1) {
    // After the answer that closes, what the client sends is not read.
    if (!c.close_after_out) c.first.append(data, n);
    OnHttp1(c);
    return true;
  }
  if (c.h2_opening_left > 0) {
    c.h2_opening_left -= std::min(c.h2_opening_left, n);
    if (c.h2_opening_left == 0) c.read_deadline = {};  // the keepalive's from now on
  }
  if (Status st = c.h2->Feed(data, n); !st.ok()) {
    log::Debug("native rpc: closing a connection", {log::F("reason", st.message())});
    Flush(c);  // nghttp2's GOAWAY, best effort
    Close(c.id);
    return false;
  }
  return true;
}

// Unsent answers beyond which an HTTP/1.x connection takes no further request until the client
// reads, and requests read ahead beyond which it is not read: a client that pipelines without
// reading holds at most about this much of each.
constexpr size_t kHttp1Backlog = 1 << 20;
constexpr size_t kHttp1ReadAhead = 64 << 10;
// Unsent bytes up to which a gateway stream's message counts as written at once (beyond, it is
// parked: Conn::http1_parked).
constexpr size_t kHttp1StreamBacklog = 256 << 10;

bool EventLoop::ReadPaused(const Conn& c) {
  if (c.mode != Conn::Mode::kHttp1) return false;
  if (c.close_after_out) return true;
  const bool waiting = c.http1_asked || c.out.size() - c.out_sent > kHttp1Backlog;
  return waiting && c.first.size() >= kHttp1ReadAhead;
}

void EventLoop::OnHttp1(Conn& c) {
  if (c.http1_asked || c.close_after_out || c.out.size() - c.out_sent > kHttp1Backlog) return;
  Http1Request req;
  const Http1Context ctx{host.etcd, host.methods, host.opts.max_request_message_bytes,
                         host.opts.enable_grpc_gateway};
  const Http1Parse p = ParseHttp1Request(c.first, kMaxHttp1HeadBytes, ctx.MaxBody(), &req);
  if (p.result == Http1Parse::kIncomplete) {
    // The head must come whole within the read timeout of its first byte (or, the connection's
    // first request, of the connection); the body may pause that long. Idle between requests,
    // the connection is the keepalive's.
    const auto now = std::chrono::steady_clock::now();
    if (c.first.empty()) {
      c.read_deadline = {};
    } else if (p.head_complete) {
      c.read_deadline = c.last_read + host.opts.request_read_timeout;
    } else if (c.read_deadline == std::chrono::steady_clock::time_point{}) {
      c.read_deadline = now + host.opts.request_read_timeout;
    }
    // A client that sent "Expect: 100-continue" waits for it before sending its body.
    if (p.head_complete && !c.http1_continued && req.ExpectsContinue()) {
      c.http1_continued = true;
      c.out.append(kHttp1Continue);
      MarkDirty(c);
    }
    return;
  }
  c.http1_asked = true;
  c.http1_continued = false;
  c.read_deadline = {};
  ++c.http1_seq;
  ++in_flight;
  auto answer = [mail = mail, conn = c.id](std::string response) {
    mail->Post({Answered::kHttp1, conn, 0, Status::Ok(), std::move(response)});
  };
  if (p.result != Http1Parse::kComplete) {
    // Go's server writes these itself, as they are, and closes.
    c.http1_adapt = false;
    return answer(Http1ParseError(p.result));
  }
  c.first.erase(0, p.consumed);
  c.http1_framing = {req.minor_version == 0, req.KeepAlive()};
  c.http1_adapt = true;
  if (req.minor_version >= 1) {
    size_t hosts = 0;
    for (const auto& [name, value] : req.headers) hosts += name == "host" ? 1 : 0;
    if (hosts != 1) {
      c.http1_adapt = false;
      return answer(Http1HostError(hosts > 1));
    }
  }
  if (!c.metrics_only && ctx.gateway && GatewayStream::IsStreamPath(req.path)) {
    --in_flight;  // a stream, answered by its messages
    return OnGatewayStream(c, req);
  }
  AnswerHttp1(ctx, c.metrics_only ? HttpPort::kMetrics : HttpPort::kClient, req, std::move(answer));
}

void EventLoop::Http1Answered(Conn& c, bool stays_open, bool take_next) {
  if (c.http1_parked) {  // in `out`, to be sent before the connection closes or goes on
    Written parked = std::move(c.http1_parked);
    c.http1_parked = nullptr;
    parked(true);
  }
  c.http1_asked = false;
  c.gateway.reset();
  c.gateway_head_sent = false;
  if (!stays_open) {
    c.close_after_out = true;
    c.first.clear();
    return;
  }
  if (take_next) OnHttp1(c);  // the next request, if the client sent it already
}

void EventLoop::OnGatewayStream(Conn& c, const Http1Request& req) {
  // Its answers come through the mailbox like an HTTP/2 stream's, numbered by the request.
  auto sink = std::make_shared<MailboxSink>(mail, c.id, c.http1_seq);
  GatewayAnswer refused;
  c.gateway = GatewayStream::Open(host.methods, req, std::move(sink), &refused);
  MarkDirty(c);
  if (!c.gateway) {
    std::string response = GatewayHttpResponse(refused);
    const bool stays_open = c.http1_framing.Adapt(&response);
    c.out.append(response);
    // Answered inside OnHttp1: Flush takes the next request (a loop, not a recursion).
    Http1Answered(c, stays_open, /*take_next=*/false);
  }
}

void EventLoop::OnGatewayStreamAnswer(Conn& c, Answered& a) {
  // Ended already, or an answer of an earlier request's stream.
  if (!c.gateway || c.close_after_out || a.stream != c.http1_seq) {
    if (a.written) a.written(false);
    return;
  }
  const Http1Framing& framing = c.http1_framing;
  // HTTP/1.0 has no chunks: the data goes bare, and the connection's end ends it.
  auto data = [&](const std::string& line) {
    c.out.append(framing.raw_body() ? line : Http1Chunk(line));
  };
  auto head = [&](int code, bool answered) {
    std::string h = GatewayStreamHead(code, answered);
    framing.Adapt(&h, /*head_only=*/true);
    c.out.append(h);
    c.gateway_head_sent = true;
  };
  if (a.kind == Answered::kStreamMessage) {
    if (!c.gateway_head_sent) head(200, /*answered=*/true);
    data(c.gateway->ResultLine(a.framed));
    // Written once the client has read all but kHttp1StreamBacklog of what waits for it.
    if (a.written) {
      if (c.out.size() - c.out_sent <= kHttp1StreamBacklog) {
        a.written(true);
      } else {
        c.http1_parked = std::move(a.written);
      }
    }
    return;
  }
  // An error before any message sets the status, as grpc-gateway's stream error handler does.
  if (!c.gateway_head_sent) {
    head(a.st.ok() ? 200 : HttpStatusFromCode(a.st.code()), /*answered=*/false);
  }
  data(GatewayStream::EndLine(a.st));
  if (!framing.raw_body()) c.out.append("0\r\n\r\n");
  c.gateway->Gone();
  Http1Answered(c, !framing.raw_body() && framing.keep_alive);
}

// Bytes taken from a session per send: everything a round of answers produces fits, and a
// connection whose client reads slowly holds at most this much beyond its flow-control windows.
constexpr size_t kSendChunk = 256 << 10;

void EventLoop::Flush(Conn& c) {
  while (true) {
    if (c.out_sent == c.out.size()) {
      c.out.clear();
      c.out_sent = 0;
      // HTTP/2 only: nothing is sent before the client's protocol is known, and an HTTP/1.1
      // connection sends only its answer.
      if (c.mode == Conn::Mode::kHttp2) {
        if (Status st = c.h2->Drain(c.out, kSendChunk); !st.ok()) return Close(c.id);
      }
      if (c.out.empty()) break;
    }
    ssize_t n = WriteSome(c, c.out.data() + c.out_sent, c.out.size() - c.out_sent);
    if (n == kWouldBlock) break;
    if (n == kClosed) return Close(c.id);
    c.out_sent += static_cast<size_t>(n);
  }
  // The client read enough of a gateway stream: its producer may send the next message.
  if (c.http1_parked && c.out.size() - c.out_sent <= kHttp1StreamBacklog) {
    Written parked = std::move(c.http1_parked);
    c.http1_parked = nullptr;
    parked(true);
  }
  // Waiting for the socket to take bytes; a TLS handshake may instead wait for the client's
  // (the connection is watched for reading, which flushes again, unless it is paused).
  const bool want_out = c.out_sent < c.out.size() && (!c.tls || c.tls->wants_write());
  const bool finished =
      c.mode == Conn::Mode::kHttp2 ? c.h2->Finished() : c.close_after_out && c.out.empty();
  if (!want_out && finished) return Close(c.id);
  // An HTTP/1.x client that read its backlog of answers: its next requests, if it sent them
  // (those answered at once, one after the other), then what they added is sent.
  if (c.mode == Conn::Mode::kHttp1) {
    bool took = false;
    while (!c.http1_asked && !c.close_after_out && !c.first.empty()) {
      const int32_t seq = c.http1_seq;
      OnHttp1(c);
      if (c.http1_seq == seq) break;  // not complete yet, or held back
      took = true;
    }
    if (took && c.out_sent < c.out.size()) return Flush(c);
  }
  // TLS may need the client's bytes to send ours: read while it has some to send.
  const bool read = !ReadPaused(c) || (c.tls && c.out_sent < c.out.size());
  const uint32_t events = (read ? uint32_t{EPOLLIN} : 0u) | (want_out ? uint32_t{EPOLLOUT} : 0u);
  if (events != c.events) {
    c.events = events;
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = c.id;
    epoll_ctl(epfd, EPOLL_CTL_MOD, c.fd, &ev);
  }
}

void EventLoop::Close(uint64_t id) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  for (auto& [stream, call] : it->second->calls) call->OnGone();
  epoll_ctl(epfd, EPOLL_CTL_DEL, it->second->fd, nullptr);
  close(it->second->fd);
  host.ConnectionClosed();
  dirty.erase(std::remove(dirty.begin(), dirty.end(), it->second.get()), dirty.end());
  Written parked = std::move(it->second->http1_parked);
  conns.erase(it);
  if (parked) parked(false);  // never sent
}

std::chrono::milliseconds EventLoop::ConnectionCheckPeriod() const {
  const auto shortest = std::min(
      {host.opts.keepalive_time, host.opts.keepalive_timeout, host.opts.request_read_timeout});
  return std::clamp<std::chrono::milliseconds>(shortest / 4, std::chrono::milliseconds(1),
                                               std::chrono::seconds(1));
}

void EventLoop::CheckConnections() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_connection_check) return;
  next_connection_check = now + ConnectionCheckPeriod();
  std::vector<uint64_t> dead;
  std::vector<uint64_t> late;
  for (auto& [id, c] : conns) {
    if (c->read_deadline != std::chrono::steady_clock::time_point{} && now >= c->read_deadline) {
      late.push_back(id);
      continue;
    }
    // A gateway stream over HTTP/1.1 (a watch) has no ping to answer: its client, silent
    // after its request, stays as long as it keeps its connection (as with etcd's Go server).
    if (c->gateway) continue;
    if (c->probe_sent != std::chrono::steady_clock::time_point{}) {
      if (now - c->probe_sent >= host.opts.keepalive_timeout) dead.push_back(id);
    } else if (now - c->last_read >= host.opts.keepalive_time) {
      c->h2->Ping();
      c->probe_sent = now;
      MarkDirty(*c);
    }
  }
  for (uint64_t id : dead) {
    log::Debug("native rpc: closing a connection that did not answer a keepalive ping");
    Close(id);
  }
  for (uint64_t id : late) ReadTimedOut(*conns.at(id));
}

void EventLoop::ReadTimedOut(Conn& c) {
  c.read_deadline = {};
  if (c.mode != Conn::Mode::kHttp1) {
    log::Debug("native rpc: closing a connection that did not show its protocol in time");
    return Close(c.id);
  }
  log::Debug("native rpc: answering 408 to an HTTP/1 request not received in time");
  c.first.clear();
  c.out.append(Http1TimeoutError(host.opts.request_read_timeout));
  c.close_after_out = true;
  MarkDirty(c);
}

void EventLoop::StartDrain() {
  draining = true;
  host.StopAccepting(*this);
  for (auto& [id, c] : conns) {
    c->h2->GoAway();
    MarkDirty(*c);
  }
  FlushDirty();
}

void EventLoop::Run() {
  mail->loop_thread = std::this_thread::get_id();
  epoll_event events[128];
  while (true) {
    std::chrono::steady_clock::time_point deadline;
    if (host.StopRequested(&deadline)) {
      if (!draining) StartDrain();
      if (in_flight == 0 || std::chrono::steady_clock::now() >= deadline) break;
    }
    const int wait_ms =
        draining          ? MsUntilNextDeadline(10)
        : mail->Pending() ? 0
                          : MsUntilNextDeadline(static_cast<int>(ConnectionCheckPeriod().count()));
    int n = epoll_wait(epfd, events, 128, wait_ms);
    // A request of this batch that needs the Raft step (a write on a single member) gets it on
    // this thread once the answers ready now are sent, if it is the loop's only call in flight
    // and the Raft thread is not stepping. With more calls in flight the Raft thread batches.
    member::RaftNode::CallerStep raft_step(host.etcd.node());
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kMailboxTag) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = read(mail->efd, &count, sizeof count);
      } else if (tag >= kListenerTag) {
        host.Accept(tag - kListenerTag);
      } else if (auto it = conns.find(tag); it != conns.end()) {
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          OnReadable(*it->second);
        } else if (events[i].events & EPOLLOUT) {
          MarkDirty(*it->second);
        }
      }
    }
    DeliverMail();
    host.Tick(*this);
    CheckDeadlines();
    CheckConnections();
    FlushDirty();
    if (raft_step.Finish(/*may_step=*/in_flight <= 1)) {
      DeliverMail();  // the step's answers
      FlushDirty();
    }
  }
  std::vector<uint64_t> ids;
  for (auto& [id, c] : conns) ids.push_back(id);
  for (uint64_t id : ids) Close(id);
  // Messages still on their way are dropped; their producers are told so (and may post their
  // streams' ends, dropped in turn).
  while (mail->Pending()) {
    Mailbox::Contents left = mail->Take();
    for (Mailbox::Accepted& a : left.connections) {
      close(a.fd);
      host.ConnectionClosed();
    }
    for (Answered& a : left.answers) {
      if (a.written) a.written(false);
    }
  }
}

}  // namespace etcdw::client_api
