#include "h2_connection.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "grpc_wire.h"

namespace etcdw::client_api {

namespace {

// Flow-control windows we grant the client: a whole request of etcd's largest size fits in a
// stream's window, and many in the connection's, without waiting for WINDOW_UPDATEs.
constexpr int32_t kStreamWindow = 4 << 20;
constexpr int32_t kConnectionWindow = 32 << 20;

nghttp2_nv Header(const char* name, const std::string& value) {
  nghttp2_nv nv;
  nv.name = reinterpret_cast<uint8_t*>(const_cast<char*>(name));
  nv.namelen = std::strlen(name);
  nv.value = reinterpret_cast<uint8_t*>(const_cast<char*>(value.data()));
  nv.valuelen = value.size();
  nv.flags = NGHTTP2_NV_FLAG_NO_COPY_NAME;  // names are literals; values are copied
  return nv;
}

bool Is(const uint8_t* p, size_t n, std::string_view s) {
  return n == s.size() && std::memcmp(p, s.data(), n) == 0;
}

const std::string k200 = "200";
const std::string kGrpc = "application/grpc";

// Submits grpc-status (and grpc-message) as trailers, or as the whole answer when `headers`.
int SubmitStatus(nghttp2_session* s, int32_t stream, const Status& st, bool headers) {
  const std::string code = std::to_string(static_cast<int>(st.code()));
  const std::string message = PercentEncode(st.message());
  nghttp2_nv nv[4];
  size_t n = 0;
  if (headers) {
    nv[n++] = Header(":status", k200);
    nv[n++] = Header("content-type", kGrpc);
  }
  nv[n++] = Header("grpc-status", code);
  if (!message.empty()) nv[n++] = Header("grpc-message", message);
  return headers ? nghttp2_submit_response(s, stream, nv, n, nullptr)
                 : nghttp2_submit_trailer(s, stream, nv, n);
}

}  // namespace

// nghttp2's callbacks, with the connection as user data.
struct H2Callbacks {
  static H2Connection& Conn(void* user) { return *static_cast<H2Connection*>(user); }

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* f, void* user) {
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
      Conn(user).streams_[f->hd.stream_id].req.stream = f->hd.stream_id;
    }
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    auto it = Conn(user).streams_.find(f->hd.stream_id);
    if (it == Conn(user).streams_.end()) return 0;
    H2Connection::Request& r = it->second.req;
    const char* v = reinterpret_cast<const char*>(value);
    // Every header, for requests that are not gRPC (HTTP/2 clients of the gateway).
    if (namelen > 0 && name[0] != ':' && r.headers.size() < 64) {
      r.headers.emplace_back(std::string(reinterpret_cast<const char*>(name), namelen),
                             std::string(v, valuelen));
    }
    if (Is(name, namelen, ":method")) {
      r.method.assign(v, valuelen);
    } else if (Is(name, namelen, ":path")) {
      r.path.assign(v, valuelen);
    } else if (Is(name, namelen, "content-type")) {
      r.content_type.assign(v, valuelen);
    } else if (Is(name, namelen, "grpc-encoding")) {
      r.encoding.assign(v, valuelen);
    } else if (Is(name, namelen, "hasleader")) {
      r.ctx.require_leader = Is(value, valuelen, "true");
    } else if (Is(name, namelen, "grpc-timeout")) {
      // A malformed value is ignored (the call has no deadline).
      r.ctx.timeout = ParseGrpcTimeout(std::string_view(v, valuelen));
    } else if (Is(name, namelen, "token") || (Is(name, namelen, "authorization") && !r.ctx.token)) {
      // "token" (etcd's clients) wins over "authorization" (the gateway's header).
      r.ctx.token.emplace(v, valuelen);
    }
    return 0;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t stream, const uint8_t* data, size_t len,
                    void* user) {
    H2Connection& c = Conn(user);
    auto it = c.streams_.find(stream);
    if (it == c.streams_.end() || it->second.finish) return 0;
    H2Connection::Stream& st = it->second;
    if (st.streaming) return StreamData(c, stream, st, data, len);
    H2Connection::Request& r = st.req;
    if (r.body_over_limit || r.body.size() + len > c.body_limit_) {
      // Not kept beyond the message prefix, whose length the RESOURCE_EXHAUSTED answer names.
      if (!r.body_over_limit) {
        r.body_over_limit = true;
        r.body.append(reinterpret_cast<const char*>(data), len);
        r.body.resize(std::min(r.body.size(), kMessagePrefixBytes));
        r.body.shrink_to_fit();
      }
      return 0;
    }
    r.body.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  // A stream's bytes: each whole message goes to the handler; a message over the limit or
  // flagged compressed ends the stream with grpc-go's error.
  static int StreamData(H2Connection& c, int32_t stream, H2Connection::Stream& st,
                        const uint8_t* data, size_t len) {
    st.inbound.append(reinterpret_cast<const char*>(data), len);
    size_t at = 0;
    while (!st.finish && st.inbound.size() - at >= kMessagePrefixBytes) {
      size_t n = 0;
      Status prefix = CheckPrefix(std::string_view(st.inbound.data() + at, kMessagePrefixBytes),
                                  c.body_limit_ - kMessagePrefixBytes, &n);
      if (!prefix.ok()) {  // the same error a unary request gets
        c.Finish(stream, prefix);
        st.inbound.clear();
        return 0;
      }
      if (st.inbound.size() - at - kMessagePrefixBytes < n) break;
      c.handler_.on_message(stream,
                            std::string_view(st.inbound.data() + at + kMessagePrefixBytes, n));
      at += kMessagePrefixBytes + n;
    }
    st.inbound.erase(0, std::min(at, st.inbound.size()));
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* f, void* user) {
    H2Connection& c = Conn(user);
    if (f->hd.type == NGHTTP2_PING && !(f->hd.flags & NGHTTP2_FLAG_ACK)) c.OnClientPing();
    if (f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS) return 0;
    auto it = c.streams_.find(f->hd.stream_id);
    if (it == c.streams_.end()) return 0;
    H2Connection::Stream& st = it->second;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST &&
        c.handler_.is_stream(st.req.path)) {
      st.streaming = true;
      c.handler_.on_stream_open(st.req);
    }
    if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
    if (st.streaming) {
      if (!st.finish) c.handler_.on_half_close(f->hd.stream_id);
    } else {
      c.handler_.on_request(st.req);
    }
    return 0;
  }

  // A stream we ended while the client still sends on it is reset once our end is out, as
  // gRPC servers do, so the client stops sending.
  static int OnFrameSent(nghttp2_session* s, const nghttp2_frame* f, void* user) {
    if (f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) {
      Conn(user).sent_since_ping_ = true;
    }
    if (f->hd.type == NGHTTP2_HEADERS && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      const int state = nghttp2_session_get_stream_remote_close(s, f->hd.stream_id);
      if (state == 0)
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
    }
    return 0;
  }

  static int OnClose(nghttp2_session*, int32_t stream, uint32_t, void* user) {
    H2Connection& c = Conn(user);
    auto it = c.streams_.find(stream);
    if (it == c.streams_.end()) return 0;
    const bool streaming = it->second.streaming || it->second.track_gone;
    for (auto& o : it->second.outbound) {
      if (o.written) c.written_.emplace_back(std::move(o.written), false);
    }
    c.streams_.erase(it);
    if (streaming) c.handler_.on_stream_gone(stream);
    return 0;
  }

  // The answer's DATA: the queued messages, then the trailers once the end is known; deferred
  // while the queue is empty.
  static ssize_t ReadAnswer(nghttp2_session* s, int32_t stream, uint8_t* buf, size_t len,
                            uint32_t* flags, nghttp2_data_source*, void* user) {
    H2Connection& c = Conn(user);
    auto it = c.streams_.find(stream);
    if (it == c.streams_.end()) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    H2Connection::Stream& st = it->second;
    size_t n = 0;
    while (n < len && !st.outbound.empty()) {
      H2Connection::Outbound& front = st.outbound.front();
      const size_t take = std::min(len - n, front.framed.size() - st.sent);
      // DATA frame bytes, not a C string. NOLINTNEXTLINE(bugprone-not-null-terminated-result)
      std::memcpy(buf + n, front.framed.data() + st.sent, take);
      n += take;
      st.sent += take;
      if (st.sent == front.framed.size()) {
        if (front.written) c.written_.emplace_back(std::move(front.written), true);
        st.outbound.pop_front();
        st.sent = 0;
      }
    }
    if (st.outbound.empty()) {
      if (st.finish && st.plain) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;  // a plain HTTP answer: no gRPC trailers
      } else if (st.finish) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        if (SubmitStatus(s, stream, *st.finish, false) != 0) {
          return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
      } else if (n == 0) {
        st.deferred = true;
        return NGHTTP2_ERR_DEFERRED;
      }
    }
    return static_cast<ssize_t>(n);
  }
};

H2Connection::H2Connection(size_t body_limit, Handler handler, PingPolicy pings)
    : body_limit_(body_limit), handler_(std::move(handler)), pings_(pings) {
  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, H2Callbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cbs, H2Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, H2Callbacks::OnData);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, H2Callbacks::OnFrame);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, H2Callbacks::OnFrameSent);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, H2Callbacks::OnClose);
  // Closed streams are not kept for the priority tree: nghttp2 keeps up to
  // MAX_CONCURRENT_STREAMS of them, unlimited here, so every finished call grew the session.
  nghttp2_option* option = nullptr;
  nghttp2_option_new(&option);
  nghttp2_option_set_no_closed_streams(option, 1);
  // No HTTP semantics checks: they refuse what gRPC servers accept, such as the whole URL as
  // :authority ("http://host:2379", what etcd's Go client sends for an endpoint written as a
  // URL). The headers a call needs are checked by the server (content-type, path).
  nghttp2_option_set_no_http_messaging(option, 1);
  nghttp2_session_server_new2(&session_, cbs, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindow}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 1);
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
}

H2Connection::~H2Connection() {
  nghttp2_session_del(session_);
  for (auto& [id, st] : streams_) {
    for (auto& o : st.outbound) {
      if (o.written) written_.emplace_back(std::move(o.written), false);
    }
  }
  RunWritten();
}

void H2Connection::RunWritten() {
  // A callback may queue more answers (on this connection too): take the list first.
  std::vector<std::pair<Written, bool>> now;
  now.swap(written_);
  for (auto& [fn, ok] : now) fn(ok);
}

Status H2Connection::Feed(const char* data, size_t n) {
  if (calm_down_) return Status::Ok();  // closing: what the client still sends is ignored
  ssize_t r = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(data), n);
  RunWritten();
  if (r < 0) {
    return Status(Code::kInvalidArgument,
                  std::string("http2: ") + nghttp2_strerror(static_cast<int>(r)));
  }
  return Status::Ok();
}

void H2Connection::SubmitHeaders(int32_t stream, Stream& st) {
  nghttp2_nv headers[] = {Header(":status", k200), Header("content-type", kGrpc)};
  nghttp2_data_provider body;
  body.source.ptr = nullptr;
  body.read_callback = H2Callbacks::ReadAnswer;
  nghttp2_submit_response(session_, stream, headers, 2, &body);
  st.headers_submitted = true;
}

void H2Connection::ResumeIfDeferred(int32_t stream, Stream& st) {
  if (!st.deferred) return;
  st.deferred = false;
  nghttp2_session_resume_data(session_, stream);
}

void H2Connection::Send(int32_t stream, std::string framed, Written written) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.finish) {
    if (written) written(false);
    return;
  }
  Stream& st = it->second;
  st.outbound.push_back({std::move(framed), std::move(written)});
  if (!st.headers_submitted) {
    SubmitHeaders(stream, st);
  } else {
    ResumeIfDeferred(stream, st);
  }
}

void H2Connection::Finish(int32_t stream, const Status& st_) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.finish) return;
  Stream& st = it->second;
  st.finish = st_;
  if (!st.headers_submitted) {
    // Nothing was sent: the status is the whole answer ("Trailers-Only").
    SubmitStatus(session_, stream, st_, true);
    st.headers_submitted = true;
  } else {
    ResumeIfDeferred(stream, st);
  }
}

void H2Connection::Respond(int32_t stream, const Status& st, std::string framed) {
  if (!st.ok()) return Finish(stream, st);
  Send(stream, std::move(framed));
  Finish(stream, st);
}

void H2Connection::RespondHttp(int32_t stream, const std::string& status,
                               const std::vector<std::pair<std::string, std::string>>& headers,
                               std::string body) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.finish || it->second.headers_submitted) return;
  Stream& st = it->second;
  st.finish = Status::Ok();
  if (!body.empty()) st.outbound.push_back({std::move(body), nullptr});
  SubmitHttpHeaders(stream, st, status, headers);
}

void H2Connection::StartHttp(int32_t stream, const std::string& status,
                             const std::vector<std::pair<std::string, std::string>>& headers) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.finish || it->second.headers_submitted) return;
  SubmitHttpHeaders(stream, it->second, status, headers);
}

void H2Connection::FinishHttp(int32_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.finish || !it->second.plain) return;
  it->second.finish = Status::Ok();
  ResumeIfDeferred(stream, it->second);
}

void H2Connection::Refuse(int32_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.finish) return;
  it->second.finish = Status::Ok();  // nothing more is answered on it
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream, NGHTTP2_PROTOCOL_ERROR);
}

void H2Connection::TrackGone(int32_t stream) {
  if (auto it = streams_.find(stream); it != streams_.end()) it->second.track_gone = true;
}

void H2Connection::SubmitHttpHeaders(
    int32_t stream, Stream& st, const std::string& status,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  st.plain = true;
  // nghttp2 copies the names and values when the response is submitted.
  std::vector<nghttp2_nv> nv;
  nv.push_back(Header(":status", status));
  for (const auto& [name, value] : headers) {
    nghttp2_nv h;
    h.name = reinterpret_cast<uint8_t*>(const_cast<char*>(name.data()));
    h.namelen = name.size();
    h.value = reinterpret_cast<uint8_t*>(const_cast<char*>(value.data()));
    h.valuelen = value.size();
    h.flags = NGHTTP2_NV_FLAG_NONE;  // both copied
    nv.push_back(h);
  }
  nghttp2_data_provider data;
  data.source.ptr = nullptr;
  data.read_callback = H2Callbacks::ReadAnswer;
  nghttp2_submit_response(session_, stream, nv.data(), nv.size(), &data);
  st.headers_submitted = true;
}

Status H2Connection::Drain(std::string& out, size_t limit) {
  while (out.size() < limit) {
    const uint8_t* data = nullptr;
    ssize_t n = nghttp2_session_mem_send(session_, &data);
    // `data` is valid until nghttp2 is called again, which a callback may do.
    if (n > 0) out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    RunWritten();
    if (n < 0) {
      return Status(Code::kInternal,
                    std::string("http2: ") + nghttp2_strerror(static_cast<int>(n)));
    }
    if (n == 0) break;
  }
  return Status::Ok();
}

void H2Connection::GoAway() {
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

void H2Connection::Ping() { nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr); }

void H2Connection::OnClientPing() {
  const auto now = std::chrono::steady_clock::now();
  const auto last = last_ping_;
  last_ping_ = now;
  if (sent_since_ping_) {  // we have been answering: not a keepalive abuse
    sent_since_ping_ = false;
    ping_strikes_ = 0;
    return;
  }
  const auto allowed = streams_.empty() ? pings_.idle_interval : pings_.min_interval;
  if (last != std::chrono::steady_clock::time_point{} && now - last < allowed) ++ping_strikes_;
  if (ping_strikes_ > pings_.max_strikes && !calm_down_) {
    calm_down_ = true;
    static const char kWhy[] = "too_many_pings";
    nghttp2_submit_goaway(
        session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
        NGHTTP2_ENHANCE_YOUR_CALM, reinterpret_cast<const uint8_t*>(kWhy), sizeof kWhy - 1);
  }
}

bool H2Connection::KnowsStream(int32_t stream) const {
  return nghttp2_session_find_stream(session_, stream) != nullptr;
}

bool H2Connection::Finished() const {
  if (calm_down_) return !nghttp2_session_want_write(session_);
  return !nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_);
}

}  // namespace etcdw::client_api
