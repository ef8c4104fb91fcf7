// The sidecar's only way to a running etcd: the etcd v3 client API over gRPC (as gardener's
// sidecar uses clientv3), so that it serves our store and a plain etcd 3.4 member alike.
//
// Every call is synchronous and bounded by a deadline. Errors carry the gRPC code and etcd's
// message (e.g. "etcdserver: too many learner members in cluster").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcdw/common/status.h"

namespace etcdw::sidecar {

// gardener's etcd-connection flags.
struct EtcdConnectionOptions {
  std::vector<std::string> endpoints{"http://127.0.0.1:2379"};  // --endpoints
  std::vector<std::string> service_endpoints;                   // --service-endpoints
  std::string username, password;                               // --etcd-username/-password
  std::chrono::milliseconds connection_timeout{30000};          // --etcd-connection-timeout
  std::chrono::milliseconds snapshot_timeout{15 * 60000};       // --etcd-snapshot-timeout
  std::chrono::milliseconds defrag_timeout{8 * 60000};          // --etcd-defrag-timeout
  bool insecure_transport = true;                               // --insecure-transport
  // --insecure-skip-tls-verify: with TLS, accept any server certificate (no chain, no host
  // name check). gardener's default is true, the default of --insecure-transport.
  bool insecure_skip_verify = true;
  std::string cert_file, key_file, ca_file;  // --cert --key --cacert
  // TLS as gardener decides it: any of cert/key/CA set, or insecure_transport off.
  bool UseTls() const;
};

class EtcdClient {
 public:
  // A client of one endpoint ("http://host:port", "https://host:port" or "host:port"). TLS
  // material is read now; errors name the file.
  static Result<std::unique_ptr<EtcdClient>> Connect(const EtcdConnectionOptions& options,
                                                     const std::string& endpoint);
  // A client for cluster-wide calls (member list, add, remove, promote): the first of
  // --service-endpoints (else --endpoints) whose member answers MemberList. This member's own
  // endpoint may be down, or a learner, which etcd refuses such calls on.
  struct Cluster;
  static Result<Cluster> ConnectToCluster(const EtcdConnectionOptions& options);
  ~EtcdClient();

  const std::string& endpoint() const { return endpoint_; }

  Result<etcdserverpb::StatusResponse> EndpointStatus(std::chrono::milliseconds timeout);
  // A linearizable Range of one key (header revision = the store's current revision).
  Result<etcdserverpb::RangeResponse> Get(const std::string& key,
                                          std::chrono::milliseconds timeout);
  Result<etcdserverpb::MemberListResponse> MemberList(std::chrono::milliseconds timeout);
  Result<etcdserverpb::MemberAddResponse> MemberAdd(const std::vector<std::string>& peer_urls,
                                                    bool learner,
                                                    std::chrono::milliseconds timeout);
  Status MemberRemove(uint64_t id, std::chrono::milliseconds timeout);
  Status MemberPromote(uint64_t id, std::chrono::milliseconds timeout);
  Status MemberUpdate(uint64_t id, const std::vector<std::string>& peer_urls,
                      std::chrono::milliseconds timeout);
  Status Defragment(std::chrono::milliseconds timeout);

  // Streams Maintenance.Snapshot into `path` (created or truncated, fsync'ed); returns its size.
  Result<uint64_t> SnapshotToFile(const std::string& path, std::chrono::milliseconds timeout);

  // A watch of every key from a revision, with prev_kv.
  class Watch {
   public:
    ~Watch();
    // The next response; kCanceled after Cancel(), kDeadlineExceeded when nothing arrived
    // within `timeout` (the watch stays open), another error when the stream ended (for example
    // the revision was compacted: the response's compact_revision is reported in the message).
    // One caller at a time; responses are read ahead by the watch's own thread meanwhile.
    Result<etcdserverpb::WatchResponse> Next(std::chrono::milliseconds timeout);
    // Ends the watch from any thread; a blocked Next returns kCanceled.
    void Cancel();

    class Impl;

   private:
    friend class EtcdClient;
    explicit Watch(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
  };
  Result<std::unique_ptr<Watch>> WatchAll(int64_t start_revision);

 private:
  EtcdClient() = default;
  std::string endpoint_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Cluster::Stub> cluster_;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance_;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch_;
};

// What EtcdClient::ConnectToCluster found: a client of an answering member and the member list
// it answered with.
struct EtcdClient::Cluster {
  std::unique_ptr<EtcdClient> client;
  etcdserverpb::MemberListResponse members;
};

}  // namespace etcdw::sidecar
