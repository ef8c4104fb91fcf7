// The native RPC server's test fixture: a one-member EtcdServer in a temporary data directory,
// the native server on a loopback port, and clients of the gRPC library talking to it.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcdw/client_api/native_rpc_server.h"
#include "etcdw/common/config.h"
#include "support/local_member.h"
#include "support/scratch_dir.h"

namespace etcdw::client_api {

class NativeRpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<testsupport::ScratchDir>("native");
    dir_ = scratch_->path();
    ASSERT_FALSE(dir_.empty());
    auto s = testsupport::StartLocalMember(dir_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  void TearDown() override {
    native_.reset();
    if (server_) server_->Stop();
    server_.reset();
    scratch_.reset();
  }

  void StartNative(NativeRpcOptions o = {}) {
    o.threads = o.threads > 0 ? o.threads : 2;
    if (o.urls.empty()) o.urls = {common::Url{"http", "127.0.0.1", 0}};
    auto n = NativeRpcServer::Start(*server_, o);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    native_ = std::move(n).value();
    channel_ = NewChannel(native_->ports().at(0));
    kv_ = etcdserverpb::KV::NewStub(channel_);
  }

  static std::shared_ptr<grpc::Channel> NewChannel(int port) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials(), args);
  }

  // A plain TCP connection to the native server's listener `listener` (-1 on failure), for
  // clients that are not gRPC.
  int ConnectRaw(size_t listener = 0) const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(native_->ports().at(listener)));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }

  // Sends all of `bytes` on `fd` (false if the connection took fewer).
  static bool SendAll(int fd, const std::string& bytes) {
    return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }

  // Reads from `fd` into *got until the server closes the connection (true) or 5 s pass
  // without a byte, or the read fails (false).
  static bool ReadUntilClosed(int fd, std::string* got) {
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) got->append(buf, static_cast<size_t>(n));
    return n == 0;
  }

  static std::unique_ptr<grpc::ClientContext> Ctx() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ctx;
  }

  grpc::Status Put(etcdserverpb::KV::Stub& kv, const std::string& k, const std::string& v,
                   etcdserverpb::PutResponse* out = nullptr) {
    etcdserverpb::PutRequest req;
    req.set_key(k);
    req.set_value(v);
    etcdserverpb::PutResponse resp;
    grpc::Status st = kv.Put(Ctx().get(), req, &resp);
    if (out) *out = resp;
    return st;
  }

  // A call by path with raw request bytes (GenericStub): the status it ends with.
  grpc::Status RawCall(const std::string& path, const std::string& payload) {
    grpc::GenericStub stub(channel_);
    auto ctx = Ctx();
    grpc::Slice slice(payload);
    grpc::ByteBuffer req(&slice, 1), resp;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status result;
    stub.UnaryCall(ctx.get(), path, grpc::StubOptions(), &req, &resp, [&](grpc::Status st) {
      std::lock_guard lock(mu);
      result = st;
      done = true;
      cv.notify_all();
    });
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
    return result;
  }

  std::unique_ptr<testsupport::ScratchDir> scratch_;  // removed by TearDown
  std::string dir_;
  std::unique_ptr<member::EtcdServer> server_;
  std::unique_ptr<NativeRpcServer> native_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
};

}  // namespace etcdw::client_api
