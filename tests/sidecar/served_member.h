// A member of its own cluster with its gRPC client API on a loopback port the kernel picks:
// what the sidecar's etcd client reaches in the sidecar's unit tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "etcdw/client_api/native_rpc_server.h"
#include "etcdw/member/etcd_server.h"
#include "etcdw/sidecar/etcd_client.h"
#include "support/local_member.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {

class ServedMember {
 public:
  // Starts the member in a scratch directory; check ok() (or use ASSERT_TRUE(Start())).
  bool Start() {
    auto s = testsupport::StartLocalMember(scratch_.path() + "/data");
    if (!s.ok()) {
      ADD_FAILURE() << s.status().ToString();
      return false;
    }
    server_ = std::move(s).value();
    client_api::NativeRpcOptions o;
    o.urls = server_->config().listen_client_urls;
    auto n = client_api::NativeRpcServer::Start(*server_, o);
    if (!n.ok()) {
      ADD_FAILURE() << n.status().ToString();
      return false;
    }
    native_ = std::move(n).value();
    return true;
  }
  ~ServedMember() { Stop(); }

  // Stops serving and the member: calls fail as with a crashed etcd.
  void Stop() {
    if (native_) native_->Shutdown(std::chrono::seconds(1));
    if (server_) server_->Stop();
    native_.reset();
    server_.reset();
  }

  std::string Endpoint() const {
    return "http://127.0.0.1:" + std::to_string(native_->ports().at(0));
  }
  // Connection options whose --endpoints (and --service-endpoints) is this member.
  EtcdConnectionOptions Options() const {
    EtcdConnectionOptions o;
    o.endpoints = {Endpoint()};
    o.connection_timeout = std::chrono::seconds(5);
    return o;
  }
  member::EtcdServer& server() { return *server_; }

 private:
  testsupport::ScratchDir scratch_{"member"};
  std::unique_ptr<member::EtcdServer> server_;
  std::unique_ptr<client_api::NativeRpcServer> native_;
};

}  // namespace etcdw::sidecar
