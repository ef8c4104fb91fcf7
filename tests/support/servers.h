// Test support: starting etcd-wrapper and the reference etcd 3.4 (Debian's etcd-server) on
// loopback with the same settings, and talking to them over gRPC.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "process.h"

namespace etcdw::testing {

// Settings in etcd's key names (the same for etcd's flags and its YAML config file).
using Settings = std::map<std::string, std::string>;

// A deadline-bound client context.
std::unique_ptr<grpc::ClientContext> Ctx(
    std::chrono::milliseconds timeout = std::chrono::seconds(10));

class Client {
 public:
  explicit Client(std::shared_ptr<grpc::Channel> channel);
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  std::unique_ptr<etcdserverpb::Cluster::Stub> cluster;
  std::unique_ptr<etcdserverpb::Auth::Stub> auth;

  // Convenience wrappers that fail the test-visible status instead of crashing.
  grpc::Status Put(const std::string& key, const std::string& value, int64_t lease = 0,
                   etcdserverpb::PutResponse* out = nullptr);
  grpc::Status Get(const std::string& key, etcdserverpb::RangeResponse* out,
                   const std::string& range_end = "", int64_t rev = 0);
};

// One member under test: either etcd-wrapper or etcd.
class Member {
 public:
  enum class Kind { kEtcdWrapper, kEtcd };
  Member(Kind kind, std::string name = "default");
  ~Member();

  Kind kind() const { return kind_; }
  const char* label() const { return kind_ == Kind::kEtcd ? "etcd" : "etcd-wrapper"; }

  // Starts the process without waiting (a member of a cluster cannot be ready alone).
  bool Launch(const Settings& extra = {});
  // Waits until Maintenance.Status answers with a known leader.
  bool WaitReady(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  const std::string& name() const { return name_; }
  // Starts and waits until Maintenance.Status answers. The data directory persists across
  // Start/Stop/Kill until the Member is destroyed.
  bool Start(const Settings& extra = {},
             std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // SIGTERM and wait; returns the exit status.
  std::optional<int> Stop(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  void Kill();  // SIGKILL
  bool Running() { return proc_.Running(); }
  Process& process() { return proc_; }
  // Extra etcd-wrapper arguments appended after "--config FILE" by later Starts (ignored for
  // etcd), e.g. {"--exit-code-file", path}.
  void set_extra_args(std::vector<std::string> args) { extra_args_ = std::move(args); }
  // Environment entries ("NAME=value") for later Launches, on top of the inherited ones.
  void set_extra_env(std::vector<std::string> env) { extra_env_ = std::move(env); }
  int client_port() const { return client_port_; }

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  std::string url() const { return "http://" + endpoint(); }
  std::string peer_url() const {
    return peer_scheme_ + "://127.0.0.1:" + std::to_string(peer_port_);
  }
  // The peer URL the member advertises (initial-advertise-peer-urls and its initial-cluster
  // entry): peer_url() unless set_advertised_peer_port chose another port, e.g. a proxy's.
  std::string advertised_peer_url() const {
    return advertised_peer_port_ == 0
               ? peer_url()
               : peer_scheme_ + "://127.0.0.1:" + std::to_string(advertised_peer_port_);
  }
  void set_advertised_peer_port(int port) { advertised_peer_port_ = port; }
  int peer_port() const { return peer_port_; }
  // "http" (default) or "https": the scheme of peer_url() in later Launches.
  void set_peer_scheme(std::string scheme) { peer_scheme_ = std::move(scheme); }
  const std::string& data_dir() const { return data_dir_; }
  const std::string& dir() const { return dir_.path(); }
  std::string log() const;
  Client& client();
  // A fresh channel (for tests that need independent connections).
  std::shared_ptr<grpc::Channel> NewChannel() const;

 private:
  Kind kind_;
  std::string name_;
  TempDir dir_;
  std::string data_dir_;
  int client_port_;
  int peer_port_;
  int advertised_peer_port_ = 0;
  std::string peer_scheme_ = "http";
  Process proc_;
  std::unique_ptr<Client> client_;
  int starts_ = 0;
  std::vector<std::string> extra_args_;
  std::vector<std::string> extra_env_;
};

// N members on loopback forming one cluster (names m0, m1, ...).
class TestCluster {
 public:
  explicit TestCluster(int n, Member::Kind kind = Member::Kind::kEtcdWrapper);
  // initial-cluster naming every member, and the settings every member starts with.
  std::string InitialCluster() const;
  Settings SettingsFor(const Settings& extra) const;
  // A new member (named m<size()>), not started, included in InitialCluster() from now on (to
  // join with initial-cluster-state existing after MemberAdd).
  Member& Add();
  bool StartAll(const Settings& extra = {},
                std::chrono::milliseconds timeout = std::chrono::seconds(30));
  Member& member(int i) { return *members_[static_cast<size_t>(i)]; }
  int size() const { return static_cast<int>(members_.size()); }
  // Index of the member that reports itself leader, or -1.
  int Leader();
  int WaitForLeader(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  std::string Endpoints() const;
  // The last `max_bytes` of every member's log, each under a header line; for failure messages.
  std::string LogTails(size_t max_bytes = 3000) const;

 private:
  std::vector<std::unique_ptr<Member>> members_;
};

// True once something accepts TCP connections on 127.0.0.1:port. Polling the port first keeps
// gRPC channels out of their reconnect backoff while a server is still starting.
bool PortOpen(int port);

// Path of the etcd-wrapper binary under test.
std::string EtcdWrapperBinary();
// Path of the etcdbrctl binary under test.
std::string EtcdbrctlBinary();

}  // namespace etcdw::testing
