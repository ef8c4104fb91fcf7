#include "etcdw/member/server_metrics.h"

#include <cstdio>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/version.h"
#include "etcdw/member/etcd_server.h"

namespace etcdw::member {

using common::MetricsPage;
using Type = MetricsPage::Type;

GrpcMethodStats& ServerMetrics::Method(std::string_view path, std::string_view type) {
  std::lock_guard lock(mu_);
  auto it = methods_.find(path);
  if (it != methods_.end()) return *it->second;
  auto m = std::make_unique<GrpcMethodStats>();
  // "/etcdserverpb.KV/Put": service, then method.
  const size_t slash = path.find('/', 1);
  m->service = std::string(path.substr(1, slash - 1));
  m->method = std::string(path.substr(slash + 1));
  m->type = std::string(type);
  return *methods_.emplace(std::string(path), std::move(m)).first->second;
}

void ServerMetrics::CountStoreTxn(const StoreTxn& t) {
  if (t.ranges + t.puts + t.deletes > 1) txns.Add();
  if (t.ranges) ranges.Add(t.ranges);
  if (t.puts) puts.Add(t.puts);
  if (t.deletes) deletes.Add(t.deletes);
}

namespace {

bool PutReads(const etcdserverpb::PutRequest& p) {
  return p.prev_kv() || p.ignore_value() || p.ignore_lease();
}

// The compares a Txn evaluates: its own, then those of the nested Txns on the path it takes.
uint64_t ComparesOnPath(const etcdserverpb::TxnRequest& r, const etcdserverpb::TxnResponse& resp) {
  uint64_t n = static_cast<uint64_t>(r.compare_size());
  const auto& ops = resp.succeeded() ? r.success() : r.failure();
  for (int i = 0; i < ops.size() && i < resp.responses_size(); ++i) {
    if (ops[i].has_request_txn()) {
      n += ComparesOnPath(ops[i].request_txn(), resp.responses(i).response_txn());
    }
  }
  return n;
}

// The operations of the branches a Txn took, nested ones included.
void CountOps(const etcdserverpb::TxnRequest& r, const etcdserverpb::TxnResponse& resp,
              ServerMetrics::StoreTxn& t) {
  const auto& ops = resp.succeeded() ? r.success() : r.failure();
  for (int i = 0; i < ops.size() && i < resp.responses_size(); ++i) {
    const etcdserverpb::RequestOp& op = ops[i];
    if (op.has_request_range()) {
      ++t.ranges;
    } else if (op.has_request_put()) {
      t.ranges += PutReads(op.request_put());
      ++t.puts;
    } else if (op.has_request_delete_range()) {
      t.ranges += op.request_delete_range().prev_kv();
      ++t.deletes;
    } else if (op.has_request_txn()) {
      CountOps(op.request_txn(), resp.responses(i).response_txn(), t);
    }
  }
}

}  // namespace

void ServerMetrics::CountPut(const etcdserverpb::PutRequest& r, bool put) {
  CountStoreTxn({PutReads(r) ? 1u : 0u, put ? 1u : 0u, 0});
}

void ServerMetrics::CountDelete(const etcdserverpb::DeleteRangeRequest& r) {
  CountStoreTxn({r.prev_kv() ? 1u : 0u, 0, 1});
}

void ServerMetrics::CountTxn(const etcdserverpb::TxnRequest& r,
                             const etcdserverpb::TxnResponse& resp, bool read_only) {
  StoreTxn ops;
  CountOps(r, resp, ops);
  const uint64_t compares = ComparesOnPath(r, resp);
  if (read_only) {
    ops.ranges += compares;  // one store transaction for everything
  } else {
    CountStoreTxn({compares, 0, 0});  // the compares' read, then the write
  }
  CountStoreTxn(ops);
}

void ServerMetrics::SawLeader(uint64_t leader) {
  // Compared with the leader seen last, none included: a leader lost and found again counts.
  const uint64_t before = last_leader_.exchange(leader);
  if (leader != 0 && leader != before) leader_changes_.Add();
}

void ServerMetrics::WriteGrpc(MetricsPage& page) const {
  std::lock_guard lock(mu_);
  auto labels = [](const GrpcMethodStats& m) -> MetricsPage::Labels {
    return {{"grpc_method", m.method}, {"grpc_service", m.service}, {"grpc_type", m.type}};
  };
  page.Family("grpc_server_started_total", "Total number of RPCs started on the server.",
              Type::kCounter);
  for (const auto& [path, m] : methods_) page.Sample(labels(*m), m->started.Value());
  page.Family("grpc_server_handled_total",
              "Total number of RPCs completed on the server, regardless of success or failure.",
              Type::kCounter);
  for (const auto& [path, m] : methods_) {
    for (size_t code = 0; code < m->handled.size(); ++code) {
      MetricsPage::Labels l = labels(*m);
      l.insert(l.begin(), {"grpc_code", CodeName(static_cast<Code>(code))});
      page.Sample(l, m->handled[code].Value());
    }
  }
  page.Family("grpc_server_msg_received_total",
              "Total number of RPC stream messages received on the server.", Type::kCounter);
  for (const auto& [path, m] : methods_) page.Sample(labels(*m), m->msg_received.Value());
  page.Family("grpc_server_msg_sent_total",
              "Total number of gRPC stream messages sent by the server.", Type::kCounter);
  for (const auto& [path, m] : methods_) page.Sample(labels(*m), m->msg_sent.Value());
}

namespace {

// etcd_server_*: the member, its leader, its proposals.
void WriteServer(EtcdServer& s, const etcdserverpb::StatusResponse& st, MetricsPage& page) {
  const ServerMetrics& m = s.metrics();
  page.Gauge("etcd_server_has_leader", "Whether or not a leader exists. 1 is existence, 0 is not.",
             st.leader() != 0);
  page.Gauge("etcd_server_is_leader",
             "Whether or not this member is a leader. 1 if is, 0 otherwise.",
             st.leader() != 0 && st.leader() == s.member_id());
  page.Gauge("etcd_server_is_learner",
             "Whether or not this member is a learner. 1 if is, 0 otherwise.", st.islearner());
  page.Counter("etcd_server_leader_changes_seen_total", "The number of leader changes seen.",
               static_cast<double>(m.leader_changes()));
  page.Gauge("etcd_server_proposals_committed_total",
             "The total number of consensus proposals committed.",
             static_cast<double>(st.raftindex()));
  page.Gauge("etcd_server_proposals_applied_total",
             "The total number of consensus proposals applied.",
             static_cast<double>(st.raftappliedindex()));
  page.Gauge("etcd_server_proposals_pending", "The current number of pending proposals to commit.",
             static_cast<double>(s.PendingProposals()));
  page.Counter("etcd_server_proposals_failed_total", "The total number of failed proposals seen.",
               static_cast<double>(m.proposals_failed.Value()));
  page.Counter("etcd_server_slow_apply_total",
               "The total number of slow apply requests (likely overloaded from slow disk).",
               static_cast<double>(m.slow_applies.Value()));
  page.Gauge("etcd_server_quota_backend_bytes", "Current backend storage quota size in bytes.",
             static_cast<double>(std::max<int64_t>(s.QuotaBytes(), 0)));
  page.Counter("etcd_server_health_success", "The total number of successful health checks",
               static_cast<double>(m.health_ok.Value()));
  page.Counter("etcd_server_health_failures", "The total number of failed health checks",
               static_cast<double>(m.health_failed.Value()));
  char id[17];
  std::snprintf(id, sizeof id, "%llx", static_cast<unsigned long long>(s.member_id()));
  page.Family("etcd_server_id",
              "Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.",
              Type::kGauge);
  page.Sample({{"server_id", id}}, 1);
  page.Family("etcd_server_version",
              "Which version is running. 1 for 'server_version' label with current version.",
              Type::kGauge);
  page.Sample({{"server_version", kEtcdVersion}}, 1);
  page.Family("etcd_cluster_version",
              "Which version is running. 1 for 'cluster_version' label with current cluster "
              "version",
              Type::kGauge);
  page.Sample({{"cluster_version", kEtcdApiVersion}}, 1);
}

// etcd_mvcc_* and etcd_debugging_mvcc_*: the store, its requests, its watchers.
void WriteStore(EtcdServer& s, const etcdserverpb::StatusResponse& st, MetricsPage& page) {
  const ServerMetrics& m = s.metrics();
  constexpr const char* kPhysical =
      "Total size of the underlying database physically allocated in bytes.";
  page.Gauge("etcd_mvcc_db_total_size_in_bytes", kPhysical, static_cast<double>(st.dbsize()));
  page.Gauge("etcd_debugging_mvcc_db_total_size_in_bytes", kPhysical,
             static_cast<double>(st.dbsize()));
  page.Gauge("etcd_mvcc_db_total_size_in_use_in_bytes",
             "Total size of the underlying database logically in use in bytes.",
             static_cast<double>(st.dbsizeinuse()));
  page.Gauge("etcd_debugging_mvcc_keys_total", "Total number of keys.",
             static_cast<double>(s.kv().key_index().size()));
  page.Gauge("etcd_debugging_mvcc_current_revision", "The current revision of store.",
             static_cast<double>(s.kv().Rev()));
  page.Gauge("etcd_debugging_mvcc_compact_revision",
             "The revision of the last compaction in store.",
             static_cast<double>(s.kv().CompactRev()));
  struct Op {
    const char* name;
    const char* help;
    const common::Counter& count;
  };
  for (const Op& op : {Op{"put", "Total number of puts seen by this member.", m.puts},
                       Op{"delete", "Total number of deletes seen by this member.", m.deletes},
                       Op{"range", "Total number of ranges seen by this member.", m.ranges},
                       Op{"txn", "Total number of txns seen by this member.", m.txns}}) {
    const auto value = static_cast<double>(op.count.Value());
    page.Counter(std::string("etcd_mvcc_") + op.name + "_total", op.help, value);
    page.Counter(std::string("etcd_debugging_mvcc_") + op.name + "_total", op.help, value);
  }
  page.Gauge("etcd_debugging_mvcc_watcher_total", "Total number of watchers.",
             static_cast<double>(s.watch_hub().WatcherCount()));
  page.Gauge("etcd_debugging_mvcc_watch_stream_total", "Total number of watch streams.",
             static_cast<double>(s.watch_hub().StreamCount()));
  page.Gauge("etcd_debugging_mvcc_slow_watcher_total", "Total number of unsynced slow watchers.",
             static_cast<double>(s.watch_hub().UnsyncedCount()));
}

// etcd_disk_* and etcd_network_client_*.
void WriteDiskAndNetwork(EtcdServer& s, MetricsPage& page) {
  const storage::RaftLogStats& log = s.node().log_stats();
  page.Histogram("etcd_disk_wal_fsync_duration_seconds",
                 "The latency distributions of fsync called by WAL.", log.sync_seconds);
  page.Gauge("etcd_disk_wal_write_bytes_total", "Total number of bytes written in WAL.",
             static_cast<double>(log.bytes_written.Value()));
  page.Histogram("etcd_disk_backend_commit_duration_seconds",
                 "The latency distributions of commit called by backend.",
                 s.kv().stats().commit_seconds);
  const ServerMetrics& m = s.metrics();
  page.Counter("etcd_network_client_grpc_received_bytes_total",
               "The total number of bytes received from grpc clients.",
               static_cast<double>(m.grpc_received_bytes.Value()));
  page.Counter("etcd_network_client_grpc_sent_bytes_total",
               "The total number of bytes sent to grpc clients.",
               static_cast<double>(m.grpc_sent_bytes.Value()));
}

}  // namespace

std::string MetricsText(EtcdServer& s) {
  const etcdserverpb::StatusResponse st = s.StatusInfo();
  MetricsPage page;
  WriteServer(s, st, page);
  WriteStore(s, st, page);
  WriteDiskAndNetwork(s, page);
  s.metrics().WriteGrpc(page);
  common::WriteProcessMetrics(page);
  return page.Text();
}

}  // namespace etcdw::member
