// A server under test: etcd 3.4.23 (Debian's etcd-server) or etcd-wrapper, one member or a
// cluster, started on loopback with the same settings and data directories under $TMPDIR.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "grpc_unary_client.h"
#include "servers.h"

namespace etcdw::bench {

using testing::Member;

// The settings both servers get (etcd's names; the rest are each server's defaults, which
// etcd-wrapper keeps equal to etcd 3.4's): a backend quota large enough for the data workloads.
testing::Settings BenchSettings();

class Target {
 public:
  Target(Member::Kind kind, int members);
  // Starts every member and waits for a leader; false with the members' log tails in *error.
  bool Start(std::string* error);
  const char* label() const;
  int size() const { return cluster_.size(); }
  Member& member(int i) { return cluster_.member(i); }
  // The server processes (for CPU time and RSS).
  std::vector<pid_t> pids();
  // A new TCP connection to member i % size().
  std::shared_ptr<grpc::Channel> NewChannel(int i);
  // `count` connections, spread over the members round-robin.
  std::vector<std::shared_ptr<grpc::Channel>> Channels(int count);
  // The load generator's unary client with `count` connections, spread over the members
  // round-robin; nullptr with *error when a connection fails.
  std::shared_ptr<GrpcUnaryClient> UnaryClient(int count, std::string* error);

 private:
  Member::Kind kind_;
  testing::TestCluster cluster_;
};

// Stubs of one service over each of the channels.
template <typename Service>
std::vector<std::unique_ptr<typename Service::Stub>> Stubs(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels) {
  std::vector<std::unique_ptr<typename Service::Stub>> stubs;
  for (const auto& ch : channels) stubs.push_back(Service::NewStub(ch));
  return stubs;
}

}  // namespace etcdw::bench
