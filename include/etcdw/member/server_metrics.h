// The member's Prometheus metrics, under etcd's names (docs/operations.md, "Metrics"): the
// counters the server keeps itself (requests seen, leader changes, health checks, the client
// API's calls), and MetricsText, which writes them beside the figures other components already
// keep (Raft indexes, the store's size and revisions, the log's syncs, watchers, the process).
#pragma once

#include <absl/base/thread_annotations.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "etcdw/common/metrics.h"

namespace etcdserverpb {
class DeleteRangeRequest;
class PutRequest;
class TxnRequest;
class TxnResponse;
}  // namespace etcdserverpb

namespace etcdw::member {

class EtcdServer;

// One gRPC method's calls, as go-grpc-prometheus counts them (etcd's grpc_server_* metrics).
struct GrpcMethodStats {
  std::string service;  // "etcdserverpb.KV"
  std::string method;   // "Put"
  std::string type;     // "unary", "server_stream" or "bidi_stream"
  common::Counter started;
  common::Counter msg_received;
  common::Counter msg_sent;
  std::array<common::Counter, 17> handled;  // by gRPC status code
};

class ServerMetrics {
 public:
  // The stats of the method at `path` ("/etcdserverpb.KV/Put"), created at the first call
  // (when the client API server registers its methods); the address stays valid.
  GrpcMethodStats& Method(std::string_view path, std::string_view type);

  // etcd's etcd_mvcc_*_total, counted as etcd counts them (its mvcc/metrics_txn.go): every
  // store transaction a request runs counts its ranges, puts and deletions, and counts as a
  // "txn" itself when it did more than one of them. So a put with prev_kv is a range, a put and
  // a txn; a Txn request's compares are ranges of a transaction of their own when it writes.
  // Reads are counted by the member serving them, writes by every member applying them.
  struct StoreTxn {
    uint64_t ranges = 0, puts = 0, deletes = 0;
  };
  void CountStoreTxn(const StoreTxn& t);
  void CountRange() { CountStoreTxn({1, 0, 0}); }
  // `put`: whether the put was made (ignore_value or ignore_lease on a missing key is not).
  void CountPut(const etcdserverpb::PutRequest& r, bool put);
  void CountDelete(const etcdserverpb::DeleteRangeRequest& r);
  // A Txn request that ran: its compares and the operations of the branches it took.
  void CountTxn(const etcdserverpb::TxnRequest& r, const etcdserverpb::TxnResponse& resp,
                bool read_only);
  common::Counter ranges, puts, deletes, txns;
  // Proposals that failed (timed out, or refused by Raft), and applies of a Ready that took
  // longer than 100 ms (etcd's warning threshold for an apply).
  common::Counter proposals_failed, slow_applies;
  common::Counter health_ok, health_failed;  // /health answers
  // Bytes of gRPC messages received and sent on the client API.
  common::Counter grpc_received_bytes, grpc_sent_bytes;

  // Takes the leader Raft reports (0: none) and counts a change as etcd does: a leader that
  // differs from the one seen last, not a loss of leader.
  void SawLeader(uint64_t leader);
  uint64_t leader_changes() const { return leader_changes_.Value(); }

  // Writes every method's families (pre-filled with zeros for every method and code, as
  // go-grpc-prometheus's initialization does).
  void WriteGrpc(common::MetricsPage& page) const;

 private:
  common::Counter leader_changes_;
  std::atomic<uint64_t> last_leader_{0};
  mutable std::mutex mu_;
  // The map only: the counters of a method, once registered, are atomics used without mu_.
  std::map<std::string, std::unique_ptr<GrpcMethodStats>, std::less<>> methods_
      ABSL_GUARDED_BY(mu_);
};

// The whole /metrics page of `server`, text format 0.0.4.
std::string MetricsText(EtcdServer& server);

}  // namespace etcdw::member
