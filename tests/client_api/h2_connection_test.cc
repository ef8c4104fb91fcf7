// H2Connection driven in memory by an nghttp2 client session: a unary call's request reaches
// the handler whole, its answer reaches the client with grpc-status 0, and a finished call
// leaves nothing behind in the session (closed streams are not retained).
#include "client_api/h2_connection.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace etcdw::client_api {
namespace {

// The client's view of the answers, by stream.
struct ClientSide {
  std::map<int32_t, std::string> data;
  std::map<int32_t, std::string> grpc_status;
  std::map<int32_t, bool> closed;
  uint32_t goaway_code = 0;
  std::string goaway_data;
  bool goaway = false;
};

int OnClientFrame(nghttp2_session*, const nghttp2_frame* f, void* user) {
  if (f->hd.type == NGHTTP2_GOAWAY) {
    auto* side = static_cast<ClientSide*>(user);
    side->goaway = true;
    side->goaway_code = f->goaway.error_code;
    side->goaway_data.assign(reinterpret_cast<const char*>(f->goaway.opaque_data),
                             f->goaway.opaque_data_len);
  }
  return 0;
}

int OnClientData(nghttp2_session*, uint8_t, int32_t stream, const uint8_t* d, size_t n,
                 void* user) {
  static_cast<ClientSide*>(user)->data[stream].append(reinterpret_cast<const char*>(d), n);
  return 0;
}

int OnClientHeader(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                   const uint8_t* value, size_t valuelen, uint8_t, void* user) {
  if (std::string(reinterpret_cast<const char*>(name), namelen) == "grpc-status") {
    static_cast<ClientSide*>(user)->grpc_status[f->hd.stream_id] =
        std::string(reinterpret_cast<const char*>(value), valuelen);
  }
  return 0;
}

int OnClientClose(nghttp2_session*, int32_t stream, uint32_t, void* user) {
  static_cast<ClientSide*>(user)->closed[stream] = true;
  return 0;
}

class H2ConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, OnClientData);
    nghttp2_session_callbacks_set_on_header_callback(cbs, OnClientHeader);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, OnClientClose);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, OnClientFrame);
    nghttp2_session_client_new(&client_, cbs, &side_);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_submit_settings(client_, NGHTTP2_FLAG_NONE, nullptr, 0);
    H2Connection::Handler h;
    h.is_stream = [](const std::string& path) { return path == kStreamPath; };
    h.on_request = [this](H2Connection::Request& r) { requests_.push_back(r); };
    h.on_stream_open = [this](H2Connection::Request& r) { requests_.push_back(r); };
    h.on_message = [](int32_t, std::string_view) {};
    h.on_half_close = [](int32_t) {};
    h.on_stream_gone = [](int32_t) {};
    server_ = std::make_unique<H2Connection>(1 << 20, std::move(h));
  }
  void TearDown() override { nghttp2_session_del(client_); }

  // Moves bytes both ways until neither side has any to send.
  void Pump() {
    for (int round = 0; round < 100; ++round) {
      bool moved = false;
      const uint8_t* data = nullptr;
      ssize_t n;
      while ((n = nghttp2_session_mem_send(client_, &data)) > 0) {
        ASSERT_TRUE(
            server_->Feed(reinterpret_cast<const char*>(data), static_cast<size_t>(n)).ok());
        moved = true;
      }
      std::string out;
      ASSERT_TRUE(server_->Drain(out, 1 << 20).ok());
      if (!out.empty()) {
        ASSERT_EQ(nghttp2_session_mem_recv(client_, reinterpret_cast<const uint8_t*>(out.data()),
                                           out.size()),
                  static_cast<ssize_t>(out.size()));
        moved = true;
      }
      if (!moved) return;
    }
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t, uint8_t* buf, size_t len, uint32_t* flags,
                          nghttp2_data_source* src, void*) {
    auto* body = static_cast<std::string*>(src->ptr);
    size_t n = std::min(len, body->size());
    std::memcpy(buf, body->data(), n);
    body->erase(0, n);
    if (body->empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static constexpr const char* kStreamPath = "/etcdserverpb.Watch/Watch";

  // Submits a POST of `body` to `path`; the stream id.
  int32_t Call(const std::string& path, std::string* body,
               const std::string& authority = "localhost") {
    auto nv = [](const char* k, const std::string& v) {
      return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(k)),
                        reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), std::strlen(k),
                        v.size(), NGHTTP2_NV_FLAG_NONE};
    };
    static const std::string kPost = "POST", kHttp = "http", kGrpc = "application/grpc";
    nghttp2_nv headers[] = {nv(":method", kPost), nv(":scheme", kHttp), nv(":authority", authority),
                            nv(":path", path), nv("content-type", kGrpc)};
    nghttp2_data_provider prd;
    prd.source.ptr = body;
    prd.read_callback = ReadBody;
    return nghttp2_submit_request(client_, nullptr, headers, 5, &prd, nullptr);
  }

  ClientSide side_;
  nghttp2_session* client_ = nullptr;
  std::unique_ptr<H2Connection> server_;
  std::vector<H2Connection::Request> requests_;
};

TEST_F(H2ConnectionTest, AUnaryCallIsAnsweredAndLeavesNoStreamBehind) {
  std::string body("\0\0\0\0\3abc", 8);
  int32_t id = Call("/etcdserverpb.KV/Range", &body);
  ASSERT_GT(id, 0);
  Pump();
  ASSERT_EQ(requests_.size(), 1u);
  EXPECT_EQ(requests_[0].path, "/etcdserverpb.KV/Range");
  EXPECT_EQ(requests_[0].content_type, "application/grpc");
  EXPECT_EQ(requests_[0].body, std::string("\0\0\0\0\3abc", 8));

  server_->Respond(id, Status::Ok(), std::string("\0\0\0\0\2ok", 7));
  Pump();
  EXPECT_EQ(side_.data[id], std::string("\0\0\0\0\2ok", 7));
  EXPECT_EQ(side_.grpc_status[id], "0");
  EXPECT_TRUE(side_.closed[id]);
  EXPECT_EQ(server_->open_streams(), 0u);
  EXPECT_FALSE(server_->KnowsStream(id)) << "a closed stream is not retained by the session";
}

TEST_F(H2ConnectionTest, AnErrorIsATrailersOnlyAnswerWithTheEncodedMessage) {
  std::string body("\0\0\0\0\0", 5);
  int32_t id = Call("/etcdserverpb.KV/Put", &body);
  Pump();
  ASSERT_EQ(requests_.size(), 1u);
  server_->Respond(id, Status(Code::kInvalidArgument, "etcdserver: key is not provided"), {});
  Pump();
  EXPECT_EQ(side_.grpc_status[id], "3");
  EXPECT_TRUE(side_.data[id].empty());
  EXPECT_TRUE(side_.closed[id]);
  EXPECT_FALSE(server_->KnowsStream(id));
}

TEST_F(H2ConnectionTest, AnAnswerForAStreamTheClientResetIsDropped) {
  std::string body("\0\0\0\0\0", 5);
  int32_t id = Call("/etcdserverpb.KV/Put", &body);
  Pump();
  ASSERT_EQ(requests_.size(), 1u);
  nghttp2_submit_rst_stream(client_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  Pump();
  server_->Respond(id, Status::Ok(), std::string("\0\0\0\0\0", 5));
  Pump();
  EXPECT_TRUE(side_.data[id].empty());
  EXPECT_EQ(server_->open_streams(), 0u);
}

// etcd's Go client dialing an endpoint written as a URL sends the whole URL as :authority,
// which strict HTTP checking refuses (RST_STREAM PROTOCOL_ERROR); gRPC servers accept it.
TEST_F(H2ConnectionTest, AnAuthorityWrittenAsAUrlIsServed) {
  std::string body("\0\0\0\0\0", 5);
  int32_t id = Call("/etcdserverpb.Maintenance/Status", &body, "http://127.0.0.1:2379");
  Pump();
  ASSERT_EQ(requests_.size(), 1u);
  server_->Respond(id, Status::Ok(), std::string("\0\0\0\0\0", 5));
  Pump();
  EXPECT_EQ(side_.grpc_status[id], "0");
}

// A stream's messages report when the transport took them, or that they were dropped.
TEST_F(H2ConnectionTest, AStreamMessageIsReportedWrittenOrDropped) {
  std::string body;
  int32_t id = Call(kStreamPath, &body);
  Pump();
  ASSERT_EQ(requests_.size(), 1u);
  std::vector<bool> told;
  server_->Send(id, std::string("\0\0\0\0\1a", 6), [&](bool ok) { told.push_back(ok); });
  EXPECT_TRUE(told.empty()) << "not before the transport took it";
  Pump();
  EXPECT_EQ(told, std::vector<bool>{true});
  EXPECT_EQ(side_.data[id], std::string("\0\0\0\0\1a", 6));

  // Queued but not taken when the client resets the stream: dropped.
  server_->Send(id, std::string("\0\0\0\0\1b", 6), [&](bool ok) { told.push_back(ok); });
  nghttp2_submit_rst_stream(client_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  const uint8_t* data = nullptr;
  ssize_t n = nghttp2_session_mem_send(client_, &data);
  ASSERT_GT(n, 0);
  ASSERT_TRUE(server_->Feed(reinterpret_cast<const char*>(data), static_cast<size_t>(n)).ok());
  EXPECT_EQ(told, (std::vector<bool>{true, false}));
  // After the stream is gone, at once.
  server_->Send(id, std::string("\0\0\0\0\1c", 6), [&](bool ok) { told.push_back(ok); });
  EXPECT_EQ(told, (std::vector<bool>{true, false, false}));
}

// etcd's keepalive enforcement: without calls open a client may ping every 2 h; the third ping
// too soon in a row is the last, answered with GOAWAY ENHANCE_YOUR_CALM "too_many_pings".
TEST_F(H2ConnectionTest, TooManyPingsWithoutCallsEndTheConnection) {
  for (int i = 0; i < 3; ++i) {
    nghttp2_submit_ping(client_, NGHTTP2_FLAG_NONE, nullptr);
    Pump();
    EXPECT_FALSE(side_.goaway) << "ping " << i + 1 << " is tolerated";
  }
  nghttp2_submit_ping(client_, NGHTTP2_FLAG_NONE, nullptr);
  Pump();
  EXPECT_TRUE(side_.goaway);
  EXPECT_EQ(side_.goaway_code, static_cast<uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  EXPECT_EQ(side_.goaway_data, "too_many_pings");
  EXPECT_TRUE(server_->Finished()) << "the connection closes once the GOAWAY is out";
}

// Pings between answers are not keepalive abuse: the server has been sending.
TEST_F(H2ConnectionTest, PingsWhileAnswersFlowAreTolerated) {
  std::string body;
  int32_t id = Call(kStreamPath, &body);
  Pump();
  for (int i = 0; i < 10; ++i) {
    server_->Send(id, std::string("\0\0\0\0\1a", 6));
    Pump();
    nghttp2_submit_ping(client_, NGHTTP2_FLAG_NONE, nullptr);
    Pump();
  }
  EXPECT_FALSE(side_.goaway);
  EXPECT_FALSE(server_->Finished());
}

}  // namespace
}  // namespace etcdw::client_api
