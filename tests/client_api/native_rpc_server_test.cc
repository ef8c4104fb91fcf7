// The native RPC server (our HTTP/2 server on nghttp2) against the gRPC library's own client:
// the KV and Cluster calls answer as etcd's (tests/diff compares with etcd itself), errors carry
// etcd's and grpc-go's codes and texts, and bad input, big answers, many calls and departing
// clients leave it serving.
#include "etcdw/client_api/native_rpc_server.h"

#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>

#include "client_api/grpc_wire.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "native_rpc_fixture.h"
#include "support/await.h"

namespace etcdw::client_api {
namespace {

using etcdserverpb::CompactionRequest;
using etcdserverpb::CompactionResponse;
using etcdserverpb::Compare;
using etcdserverpb::DeleteRangeRequest;
using etcdserverpb::DeleteRangeResponse;
using etcdserverpb::KV;
using etcdserverpb::Lease;
using etcdserverpb::LeaseGrantRequest;
using etcdserverpb::LeaseGrantResponse;
using etcdserverpb::PutRequest;
using etcdserverpb::PutResponse;
using etcdserverpb::RangeRequest;
using etcdserverpb::RangeResponse;
using etcdserverpb::TxnRequest;
using etcdserverpb::TxnResponse;

TEST_F(NativeRpcServerTest, AnswersKvCalls) {
  StartNative();
  PutResponse put;
  ASSERT_TRUE(Put(*kv_, "a", "1", &put).ok());
  EXPECT_EQ(put.header().revision(), 2);
  EXPECT_EQ(put.header().member_id(), server_->member_id());
  EXPECT_EQ(put.header().cluster_id(), server_->cluster_id());
  EXPECT_EQ(put.header().raft_term(), server_->node().Term());
  ASSERT_TRUE(Put(*kv_, "b", "2").ok());

  RangeRequest range;
  range.set_key("a");
  range.set_range_end("c");
  RangeResponse got;
  ASSERT_TRUE(kv_->Range(Ctx().get(), range, &got).ok());
  ASSERT_EQ(got.kvs_size(), 2);
  EXPECT_EQ(got.count(), 2);
  EXPECT_EQ(got.header().revision(), 3);
  EXPECT_EQ(got.kvs(0).key(), "a");
  EXPECT_EQ(got.kvs(0).create_revision(), 2);
  EXPECT_EQ(got.kvs(0).version(), 1);
  EXPECT_EQ(got.kvs(1).value(), "2");
  EXPECT_EQ(got.kvs(1).mod_revision(), 3);

  TxnRequest txn;
  auto* cmp = txn.add_compare();
  cmp->set_key("a");
  cmp->set_target(Compare::VALUE);
  cmp->set_result(Compare::EQUAL);
  cmp->set_value("1");
  txn.add_success()->mutable_request_put()->set_key("c");
  txn.add_failure()->mutable_request_range()->set_key("a");
  TxnResponse txn_resp;
  ASSERT_TRUE(kv_->Txn(Ctx().get(), txn, &txn_resp).ok());
  EXPECT_TRUE(txn_resp.succeeded());
  EXPECT_EQ(txn_resp.header().revision(), 4);
  ASSERT_EQ(txn_resp.responses_size(), 1);
  EXPECT_TRUE(txn_resp.responses(0).has_response_put());

  DeleteRangeRequest del;
  del.set_key("b");
  DeleteRangeResponse del_resp;
  ASSERT_TRUE(kv_->DeleteRange(Ctx().get(), del, &del_resp).ok());
  EXPECT_EQ(del_resp.deleted(), 1);

  CompactionRequest compact;
  compact.set_revision(3);
  compact.set_physical(true);
  CompactionResponse compact_resp;
  ASSERT_TRUE(kv_->Compact(Ctx().get(), compact, &compact_resp).ok());
  EXPECT_EQ(compact_resp.header().revision(), 5);
  range.set_revision(2);
  grpc::Status st = kv_->Range(Ctx().get(), range, &got);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(st.error_message(), "etcdserver: mvcc: required revision has been compacted");
}

TEST_F(NativeRpcServerTest, ClusterCallsAnswerAsEtcd) {
  StartNative();
  auto native = etcdserverpb::Cluster::NewStub(channel_);
  etcdserverpb::MemberListRequest list;
  etcdserverpb::MemberListResponse a;
  ASSERT_TRUE(native->MemberList(Ctx().get(), list, &a).ok());
  ASSERT_EQ(a.members_size(), 1);
  EXPECT_EQ(a.members(0).id(), server_->member_id());
  EXPECT_EQ(a.members(0).name(), "t");
  EXPECT_EQ(a.header().revision(), 0) << "Cluster headers carry no revision, as etcd's";
  EXPECT_EQ(a.header().cluster_id(), server_->cluster_id());

  etcdserverpb::MemberRemoveRequest remove;
  remove.set_id(12345);
  etcdserverpb::MemberRemoveResponse removed;
  grpc::Status st = native->MemberRemove(Ctx().get(), remove, &removed);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "etcdserver: member not found");
}

TEST_F(NativeRpcServerTest, ErrorsCarryEtcdsCodesAndTexts) {
  StartNative();
  ASSERT_TRUE(Put(*kv_, "a", "1").ok());
  RangeRequest future;
  future.set_key("a");
  future.set_revision(100);
  RangeResponse resp;
  grpc::Status st = kv_->Range(Ctx().get(), future, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(st.error_message(), "etcdserver: mvcc: required revision is a future revision");

  st = Put(*kv_, "", "v");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "etcdserver: key is not provided");
}

TEST_F(NativeRpcServerTest, UnknownMethodsAndServicesAreUnimplemented) {
  StartNative();
  grpc::Status st = RawCall("/etcdserverpb.Nope/Status", "");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(st.error_message(), "unknown service etcdserverpb.Nope");

  st = RawCall("/etcdserverpb.KV/Nope", "");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(st.error_message(), "unknown method Nope for service etcdserverpb.KV");
  EXPECT_TRUE(Put(*kv_, "still", "serving").ok());
}

TEST_F(NativeRpcServerTest, MalformedAndOversizedRequestsAreRefusedAndTheConnectionServesOn) {
  NativeRpcOptions o;
  o.max_request_message_bytes = 1024;
  StartNative(o);
  grpc::Status st = RawCall("/etcdserverpb.KV/Put", std::string("\xff\xff\xff", 3));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(st.error_message(),
            "grpc: error unmarshalling request: proto: cannot parse invalid wire-format data");

  PutRequest big;
  big.set_key("k");
  big.set_value(std::string(4000, 'x'));
  st = Put(*kv_, "k", std::string(4000, 'x'));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(st.error_message(), "grpc: received message larger than max (" +
                                    std::to_string(big.ByteSizeLong()) + " vs. 1024)");
  EXPECT_TRUE(Put(*kv_, "k", std::string(900, 'x')).ok()) << "same connection, still serving";
}

TEST_F(NativeRpcServerTest, ManyConcurrentCallsOnOneConnectionAllComplete) {
  StartNative();
  constexpr int kCalls = 400;
  struct Call {
    grpc::ClientContext ctx;
    PutRequest req;
    PutResponse resp;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, failed = 0;
  for (int i = 0; i < kCalls; ++i) {
    auto c = std::make_unique<Call>();
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    c->req.set_key("k" + std::to_string(i));
    c->req.set_value(std::string(100, 'v'));
    kv_->async()->Put(&c->ctx, &c->req, &c->resp, [&](grpc::Status st) {
      std::lock_guard lock(mu);
      if (!st.ok()) ++failed;
      ++done;
      cv.notify_all();
    });
    calls.push_back(std::move(c));
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return done == kCalls; }));
  }
  EXPECT_EQ(failed, 0);
  std::set<int64_t> revisions;
  for (auto& c : calls) revisions.insert(c->resp.header().revision());
  EXPECT_EQ(revisions.size(), static_cast<size_t>(kCalls)) << "each put its own revision";
}

TEST_F(NativeRpcServerTest, AnswersLargerThanTheFlowControlWindowsArriveWhole) {
  StartNative();
  // 48 values of 128 KiB: a 6 MiB answer, beyond the client's stream and connection windows.
  for (int i = 0; i < 48; ++i) {
    char key[8];
    std::snprintf(key, sizeof key, "v%02d", i);
    ASSERT_TRUE(Put(*kv_, key, std::string(128 << 10, static_cast<char>('a' + i % 26))).ok());
  }
  RangeRequest all;
  all.set_key("v");
  all.set_range_end("w");
  RangeResponse resp;
  ASSERT_TRUE(kv_->Range(Ctx().get(), all, &resp).ok());
  ASSERT_EQ(resp.kvs_size(), 48);
  for (int i = 0; i < 48; ++i) {
    EXPECT_EQ(resp.kvs(i).value(), std::string(128 << 10, static_cast<char>('a' + i % 26)));
  }
}

// Bytes that are not HTTP/2 close that connection only.
// etcd serves HTTP/1.1 on the client port beside gRPC: /health and /version answer, other
// paths 404, and each connection closes after its answer; gRPC clients are served meanwhile.
TEST_F(NativeRpcServerTest, Http1ClientsGetEtcdsHealthAndVersionEndpoints) {
  StartNative();
  auto ask = [&](const std::string& request) {
    int fd = ConnectRaw();
    EXPECT_GE(fd, 0);
    EXPECT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    std::string got;
    EXPECT_TRUE(ReadUntilClosed(fd, &got)) << "the server closes the connection after its answer";
    close(fd);
    return got;
  };
  auto body = [](const std::string& response) {
    return response.substr(response.find("\r\n\r\n") + 4);
  };
  std::string r = ask("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_EQ(body(r), R"({"health":"true"})");
  r = ask("GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: application/json\r\n"), std::string::npos) << r;
  EXPECT_EQ(body(r), R"({"etcdserver":"3.5.27","etcdcluster":"3.5.0"})");
  r = ask("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << r;
  EXPECT_EQ(body(r), "404 page not found\n");
  r = ask("POST /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u) << r;
  r = ask("GARBAGE\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << r;
  r = ask("GET /health HTTP/1.1\r\nX: " + std::string(10000, 'x'));
  EXPECT_EQ(r.rfind("HTTP/1.1 431 ", 0), 0u) << "a head that does not end is refused";

  // An alarm makes the member unhealthy, as in etcd.
  auto maintenance = etcdserverpb::Maintenance::NewStub(channel_);
  etcdserverpb::AlarmRequest alarm;
  alarm.set_action(etcdserverpb::AlarmRequest::ACTIVATE);
  alarm.set_alarm(etcdserverpb::NOSPACE);
  etcdserverpb::AlarmResponse raised;
  ASSERT_TRUE(maintenance->Alarm(Ctx().get(), alarm, &raised).ok());
  r = ask("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("X-Content-Type-Options: nosniff\r\n"), std::string::npos) << r;
  EXPECT_EQ(body(r), "{\"health\":\"false\"}\n") << "etcd answers with http.Error";
  r = ask("GET /health?exclude=NOSPACE HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  // etcd 3.5's /livez and /readyz: NOSPACE is no corruption, the member is ready.
  r = ask("GET /readyz?verbose HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Access-Control-Allow-Origin: *\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; charset=utf-8\r\n"), std::string::npos) << r;
  EXPECT_EQ(body(r),
            "[+]data_corruption ok\n[+]serializable_read ok\n[+]linearizable_read ok\n"
            "[+]non_learner ok\nok\n");
  r = ask("GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(body(r), "ok\n");
  r = ask("POST /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u) << r;
  r = ask("GET /livez/nonexistent HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << r;
  etcdserverpb::RangeRequest get;
  get.set_key("k");
  etcdserverpb::RangeResponse got;
  EXPECT_TRUE(kv_->Range(Ctx().get(), get, &got).ok()) << "gRPC served beside HTTP/1.1";
}

// listen-metrics-urls serve etcd 3.5's /livez and /readyz too, without the CORS headers.
TEST_F(NativeRpcServerTest, MetricsUrlServesLivezAndReadyz) {
  NativeRpcOptions o;
  o.metrics_urls = {common::Url{"http", "127.0.0.1", 0}};
  StartNative(o);
  auto ask = [&](const std::string& path) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(native_->ports().at(1)));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    EXPECT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    std::string got;
    EXPECT_TRUE(ReadUntilClosed(fd, &got));
    close(fd);
    return got;
  };
  std::string r = ask("/readyz?verbose&exclude=non_learner");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_EQ(r.find("Access-Control"), std::string::npos) << r;
  EXPECT_NE(r.find("X-Content-Type-Options: nosniff\r\n"), std::string::npos) << r;
  EXPECT_EQ(r.substr(r.find("\r\n\r\n") + 4),
            "[+]data_corruption ok\n[+]serializable_read ok\n[+]linearizable_read ok\nok\n");
  r = ask("/livez/serializable_read");
  EXPECT_EQ(r.substr(r.find("\r\n\r\n") + 4), "ok\n");
  r = ask("/version");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << r;
}

// The grpc-keepalive-* settings reach the server as etcd hands them to gRPC: only values > 0,
// the interval and the timeout together; gRPC's defaults stand for the rest.
TEST(NativeRpcOptionsTest, KeepaliveSettingsFromTheConfigAsEtcdAppliesThem) {
  common::EtcdConfig cfg;
  NativeRpcOptions o = NativeRpcOptions::FromConfig(cfg);
  EXPECT_EQ(o.keepalive_min_time, std::chrono::seconds(5));
  EXPECT_EQ(o.keepalive_time, std::chrono::hours(2));
  EXPECT_EQ(o.keepalive_timeout, std::chrono::seconds(20));
  EXPECT_TRUE(o.enable_grpc_gateway);
  cfg.enable_grpc_gateway = false;
  EXPECT_FALSE(NativeRpcOptions::FromConfig(cfg).enable_grpc_gateway);
  cfg.grpc_keepalive_min_time = std::chrono::seconds(1);
  cfg.grpc_keepalive_interval = std::chrono::seconds(30);
  cfg.grpc_keepalive_timeout = std::chrono::seconds(3);
  o = NativeRpcOptions::FromConfig(cfg);
  EXPECT_EQ(o.keepalive_min_time, std::chrono::seconds(1));
  EXPECT_EQ(o.keepalive_time, std::chrono::seconds(30));
  EXPECT_EQ(o.keepalive_timeout, std::chrono::seconds(3));
  cfg.grpc_keepalive_min_time = std::chrono::seconds(0);  // gRPC's enforcement default
  cfg.grpc_keepalive_timeout = std::chrono::seconds(0);   // so the interval is not applied
  o = NativeRpcOptions::FromConfig(cfg);
  EXPECT_EQ(o.keepalive_min_time, std::chrono::minutes(5));
  EXPECT_EQ(o.keepalive_time, std::chrono::hours(2));
  EXPECT_EQ(o.keepalive_timeout, std::chrono::seconds(20));
}

// etcd's server keepalive: a connection that goes silent is pinged, and closed when the ping
// is not answered in time; a gRPC client answers the pings and keeps being served.
TEST_F(NativeRpcServerTest, ASilentConnectionIsPingedAndClosedWhenItDoesNotAnswer) {
  NativeRpcOptions o;
  o.keepalive_time = std::chrono::milliseconds(300);
  o.keepalive_timeout = std::chrono::milliseconds(300);
  StartNative(o);
  int fd = ConnectRaw();
  ASSERT_GE(fd, 0);
  // A valid client preface and an empty SETTINGS frame; then nothing, not even a PING ACK.
  const std::string preface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0", 33);
  ASSERT_EQ(send(fd, preface.data(), preface.size(), 0), static_cast<ssize_t>(preface.size()));
  std::string got;
  const auto start = std::chrono::steady_clock::now();
  const bool closed = ReadUntilClosed(fd, &got);
  const auto took = std::chrono::steady_clock::now() - start;
  close(fd);
  EXPECT_TRUE(closed) << "the server closes the connection (not a timeout)";
  EXPECT_GE(took, std::chrono::milliseconds(500)) << "silence, then an unanswered ping";
  // The frames received: SETTINGS (and its ACK), then a PING (type 6).
  bool pinged = false;
  for (size_t at = 0; at + 9 <= got.size();) {
    const size_t len = (size_t{static_cast<uint8_t>(got[at])} << 16) |
                       (size_t{static_cast<uint8_t>(got[at + 1])} << 8) |
                       static_cast<uint8_t>(got[at + 2]);
    pinged = pinged || got[at + 3] == 6;
    at += 9 + len;
  }
  EXPECT_TRUE(pinged);

  // A gRPC client answers pings: calls spread over several keepalive periods all succeed.
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(Put(*kv_, "k", "v").ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

TEST_F(NativeRpcServerTest, AClientLeavingWithCallsInFlightLeavesTheServerServing) {
  StartNative();
  {
    auto ch = NewChannel(native_->ports().at(0));
    auto kv = KV::NewStub(ch);
    std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
    std::vector<PutRequest> reqs(50);
    std::vector<PutResponse> resps(50);
    std::atomic<int> done{0};
    for (int i = 0; i < 50; ++i) {
      ctxs.push_back(Ctx());
      reqs[i].set_key("gone" + std::to_string(i));
      kv->async()->Put(ctxs.back().get(), &reqs[i], &resps[i], [&](grpc::Status) { ++done; });
    }
    for (auto& c : ctxs) c->TryCancel();
    ASSERT_TRUE(testsupport::WaitUntil([&] { return done == 50; })) << done.load();
  }
  EXPECT_TRUE(Put(*kv_, "k", "v").ok());
}

TEST_F(NativeRpcServerTest, ShutdownStopsAcceptingCalls) {
  StartNative();
  ASSERT_TRUE(Put(*kv_, "k", "v").ok());
  native_->Shutdown(std::chrono::seconds(1));
  auto ctx = Ctx();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  PutRequest req;
  req.set_key("k");
  PutResponse resp;
  grpc::Status st = kv_->Put(ctx.get(), req, &resp);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.error_code() == grpc::StatusCode::UNAVAILABLE ||
              st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      << st.error_code() << " " << st.error_message();
}

TEST_F(NativeRpcServerTest, LeasesAreGrantedKeptAliveAndRevoked) {
  StartNative();
  auto lease = Lease::NewStub(channel_);
  LeaseGrantRequest grant;
  grant.set_ttl(60);
  LeaseGrantResponse granted;
  ASSERT_TRUE(lease->LeaseGrant(Ctx().get(), grant, &granted).ok());
  EXPECT_EQ(granted.ttl(), 60);
  EXPECT_NE(granted.id(), 0);

  // Two keepalives on one stream, the second for an unknown lease (TTL 0, as etcd), then the
  // client's half-close ends the stream with OK.
  auto ctx = Ctx();
  auto stream = lease->LeaseKeepAlive(ctx.get());
  etcdserverpb::LeaseKeepAliveRequest ka;
  etcdserverpb::LeaseKeepAliveResponse kept;
  ka.set_id(granted.id());
  ASSERT_TRUE(stream->Write(ka));
  ASSERT_TRUE(stream->Read(&kept));
  EXPECT_EQ(kept.id(), granted.id());
  EXPECT_GT(kept.ttl(), 0);
  EXPECT_NE(kept.header().revision(), 0);
  ka.set_id(granted.id() + 1000);
  ASSERT_TRUE(stream->Write(ka));
  ASSERT_TRUE(stream->Read(&kept));
  EXPECT_EQ(kept.ttl(), 0);
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&kept));
  grpc::Status st = stream->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();

  etcdserverpb::LeaseTimeToLiveRequest ttl_req;
  ttl_req.set_id(granted.id());
  etcdserverpb::LeaseTimeToLiveResponse ttl;
  ASSERT_TRUE(lease->LeaseTimeToLive(Ctx().get(), ttl_req, &ttl).ok());
  EXPECT_EQ(ttl.grantedttl(), 60);
  etcdserverpb::LeaseLeasesResponse leases;
  ASSERT_TRUE(lease->LeaseLeases(Ctx().get(), etcdserverpb::LeaseLeasesRequest(), &leases).ok());
  ASSERT_EQ(leases.leases_size(), 1);

  etcdserverpb::LeaseRevokeRequest revoke;
  revoke.set_id(granted.id());
  etcdserverpb::LeaseRevokeResponse revoked;
  ASSERT_TRUE(lease->LeaseRevoke(Ctx().get(), revoke, &revoked).ok());
  st = lease->LeaseRevoke(Ctx().get(), revoke, &revoked);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "etcdserver: requested lease not found");
}

TEST_F(NativeRpcServerTest, AKeepAliveStreamCancelledByItsClientLeavesTheServerServing) {
  StartNative();
  auto lease = Lease::NewStub(channel_);
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext ctx;
    auto stream = lease->LeaseKeepAlive(&ctx);
    etcdserverpb::LeaseKeepAliveRequest ka;
    ka.set_id(12345);
    ASSERT_TRUE(stream->Write(ka));
    ctx.TryCancel();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(Put(*kv_, "k", "v").ok());
}

TEST(GrpcWireTest, FramesAndUnframesOneMessage) {
  PutRequest req;
  req.set_key("key");
  req.set_value("value");
  std::string framed = FrameMessage(req);
  ASSERT_EQ(framed.size(), kMessagePrefixBytes + req.ByteSizeLong());
  EXPECT_EQ(framed[0], 0) << "not compressed";
  EXPECT_EQ(static_cast<uint8_t>(framed[4]), req.ByteSizeLong());
  auto payload = SingleMessage(framed, 1024);
  ASSERT_TRUE(payload.ok());
  PutRequest back;
  ASSERT_TRUE(ParseRequest(*payload, &back).ok());
  EXPECT_EQ(back.value(), "value");

  EXPECT_EQ(SingleMessage(framed.substr(0, 3), 1024).status().code(), Code::kInternal);
  EXPECT_EQ(SingleMessage(framed.substr(0, framed.size() - 1), 1024).status().message(),
            "grpc: the request ended inside a message");
  EXPECT_EQ(SingleMessage(framed + framed, 1024).status().message(),
            "grpc: a unary request carried more than one message");
  std::string compressed = framed;
  compressed[0] = 1;
  EXPECT_EQ(SingleMessage(compressed, 1024).status().message(),
            "grpc: compressed flag set with identity or empty encoding");
  EXPECT_EQ(SingleMessage(framed, 4).status().code(), Code::kResourceExhausted);
}

TEST(GrpcWireTest, PercentEncodesWhatHeadersCannotCarry) {
  EXPECT_EQ(PercentEncode("etcdserver: ok"), "etcdserver: ok");
  EXPECT_EQ(PercentEncode("50%\n\xc3\xa9"), "50%25%0A%C3%A9");
}

}  // namespace
}  // namespace etcdw::client_api

namespace etcdw::client_api {
namespace {

TEST(GrpcTimeoutTest, ParsesEveryUnitAndRefusesMalformedValues) {
  using std::chrono::nanoseconds;
  EXPECT_EQ(ParseGrpcTimeout("1H"), std::chrono::hours(1));
  EXPECT_EQ(ParseGrpcTimeout("2M"), std::chrono::minutes(2));
  EXPECT_EQ(ParseGrpcTimeout("3S"), std::chrono::seconds(3));
  EXPECT_EQ(ParseGrpcTimeout("4999m"), std::chrono::milliseconds(4999));
  EXPECT_EQ(ParseGrpcTimeout("99999999u"), std::chrono::microseconds(99999999));
  EXPECT_EQ(ParseGrpcTimeout("0n"), nanoseconds(0));
  EXPECT_FALSE(ParseGrpcTimeout("100000000n"));  // 9 digits
  EXPECT_FALSE(ParseGrpcTimeout("5"));
  EXPECT_FALSE(ParseGrpcTimeout("m"));
  EXPECT_FALSE(ParseGrpcTimeout("5s"));
  EXPECT_FALSE(ParseGrpcTimeout("-5S"));
  EXPECT_FALSE(ParseGrpcTimeout(""));
}

// A member of a two-member cluster whose other member never starts: it has no quorum, and a
// write proposed there cannot complete.
class NoQuorumRpcTest : public NativeRpcServerTest {
 protected:
  void SetUp() override {
    NativeRpcServerTest::SetUp();
    server_->Stop();
    server_.reset();
    auto cfg = common::ParseConfig(
        "name: t\ninitial-cluster: t=http://127.0.0.1:1,u=http://127.0.0.1:2\n"
        "initial-advertise-peer-urls: http://127.0.0.1:1\ndata-dir: " +
            dir_ +
            "/alone\nlisten-peer-urls: http://127.0.0.1:0\n"
            "listen-client-urls: http://127.0.0.1:0\n",
        "test");
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    ASSERT_TRUE(common::PrepareDataDir(*cfg).ok());
    auto s = member::EtcdServer::Open(*cfg);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    ASSERT_TRUE(server_->Start().ok());
  }
};

TEST_F(NoQuorumRpcTest, AWriteNotAnsweredBeforeItsGrpcTimeoutEndsWithDeadlineExceeded) {
  StartNative();
  const auto& put = server_->metrics().Method("/etcdserverpb.KV/Put", "unary");
  const auto& deadline_exceeded = put.handled[static_cast<size_t>(Code::kDeadlineExceeded)];
  PutRequest req;
  req.set_key("k");
  req.set_value("v");
  PutResponse resp;
  grpc::ClientContext ctx;
  const auto start = std::chrono::steady_clock::now();
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  grpc::Status st = kv_->Put(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  // The client gives up by itself; the server too, at the deadline it was sent (grpc-timeout),
  // not after its own request timeout (7 s here).
  ASSERT_TRUE(testsupport::WaitUntil([&] { return deadline_exceeded.Value() == 1; },
                                     std::chrono::seconds(3)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  uint64_t handled = 0;
  for (const auto& c : put.handled) handled += c.Value();
  EXPECT_EQ(handled, 1u);

  // A call answered before its deadline is answered as usual: a serializable read.
  RangeRequest range;
  range.set_key("k");
  range.set_serializable(true);
  RangeResponse got;
  grpc::ClientContext read_ctx;
  read_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(kv_->Range(&read_ctx, range, &got).ok());
}

}  // namespace
}  // namespace etcdw::client_api
