#include "h2_connection.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>

#include "grpc_wire.h"

namespace etcdw::server::rpc {

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
    if (Is(name, namelen, ":path")) {
      r.path.assign(v, valuelen);
    } else if (Is(name, namelen, "content-type")) {
      r.content_type.assign(v, valuelen);
    } else if (Is(name, namelen, "grpc-encoding")) {
      r.encoding.assign(v, valuelen);
    }
    return 0;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t stream, const uint8_t* data, size_t len,
                    void* user) {
    H2Connection& c = Conn(user);
    auto it = c.streams_.find(stream);
    if (it == c.streams_.end()) return 0;
    H2Connection::Request& r = it->second.req;
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

  static int OnFrame(nghttp2_session*, const nghttp2_frame* f, void* user) {
    if (f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS) return 0;
    if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
    H2Connection& c = Conn(user);
    auto it = c.streams_.find(f->hd.stream_id);
    if (it != c.streams_.end()) c.on_request_(it->second.req);
    return 0;
  }

  static int OnClose(nghttp2_session*, int32_t stream, uint32_t, void* user) {
    Conn(user).streams_.erase(stream);
    return 0;
  }

  static ssize_t ReadResponse(nghttp2_session* s, int32_t stream, uint8_t* buf, size_t len,
                              uint32_t* flags, nghttp2_data_source*, void* user) {
    H2Connection& c = Conn(user);
    auto it = c.streams_.find(stream);
    if (it == c.streams_.end()) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    H2Connection::Stream& st = it->second;
    const size_t n = std::min(len, st.response.size() - st.sent);
    std::memcpy(buf, st.response.data() + st.sent, n);
    st.sent += n;
    if (st.sent == st.response.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      static const std::string kOk = "0";
      nghttp2_nv trailer = Header("grpc-status", kOk);
      if (nghttp2_submit_trailer(s, stream, &trailer, 1) != 0) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
    }
    return static_cast<ssize_t>(n);
  }
};

H2Connection::H2Connection(size_t body_limit, OnRequest on_request)
    : body_limit_(body_limit), on_request_(std::move(on_request)) {
  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, H2Callbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cbs, H2Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, H2Callbacks::OnData);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, H2Callbacks::OnFrame);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, H2Callbacks::OnClose);
  nghttp2_session_server_new(&session_, cbs, this);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindow}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 1);
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
}

H2Connection::~H2Connection() { nghttp2_session_del(session_); }

Status H2Connection::Feed(const char* data, size_t n) {
  ssize_t r = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(data), n);
  if (r < 0)
    return Status(Code::kInvalidArgument,
                  std::string("http2: ") + nghttp2_strerror(static_cast<int>(r)));
  return Status::Ok();
}

void H2Connection::Respond(int32_t stream, const Status& st, std::string framed) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  static const std::string k200 = "200", kGrpc = "application/grpc";
  if (st.ok()) {
    it->second.response = std::move(framed);
    nghttp2_nv headers[] = {Header(":status", k200), Header("content-type", kGrpc)};
    nghttp2_data_provider body;
    body.source.ptr = nullptr;
    body.read_callback = H2Callbacks::ReadResponse;
    nghttp2_submit_response(session_, stream, headers, 2, &body);
  } else {
    const std::string code = std::to_string(static_cast<int>(st.code()));
    const std::string message = PercentEncode(st.message());
    nghttp2_nv headers[] = {Header(":status", k200), Header("content-type", kGrpc),
                            Header("grpc-status", code), Header("grpc-message", message)};
    nghttp2_submit_response(session_, stream, headers, st.message().empty() ? 3 : 4, nullptr);
  }
}

Status H2Connection::Drain(std::string& out, size_t limit) {
  while (out.size() < limit) {
    const uint8_t* data = nullptr;
    ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0)
      return Status(Code::kInternal,
                    std::string("http2: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n == 0) return Status::Ok();
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  return Status::Ok();
}

void H2Connection::GoAway() {
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

bool H2Connection::Finished() const {
  return !nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_);
}

}  // namespace etcdw::server::rpc
