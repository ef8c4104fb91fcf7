#include "etcdw/member/server_metrics.h"

#include <gtest/gtest.h>

#include "etcd/etcdserverpb/rpc.pb.h"

namespace etcdw::member {
namespace {

TEST(ServerMetricsTest, LeaderChangesCountNewLeadersNotLosses) {
  ServerMetrics m;
  m.SawLeader(0);  // no leader yet
  EXPECT_EQ(m.leader_changes(), 0u);
  m.SawLeader(7);  // elected
  m.SawLeader(7);  // the same leader again (e.g. this member's own role changed)
  EXPECT_EQ(m.leader_changes(), 1u);
  m.SawLeader(0);  // lost
  EXPECT_EQ(m.leader_changes(), 1u);
  m.SawLeader(7);  // found again: a change, as etcd counts it
  m.SawLeader(9);
  EXPECT_EQ(m.leader_changes(), 3u);
}

TEST(ServerMetricsTest, RequestsCountAsEtcdsStoreCountsThem) {
  ServerMetrics m;
  etcdserverpb::PutRequest put;
  m.CountPut(put, true);  // a put alone: no txn
  put.set_prev_kv(true);
  m.CountPut(put, true);   // a range and a put: a txn
  m.CountPut(put, false);  // read, then refused (ignore_value on a missing key): a range only
  EXPECT_EQ(m.puts.Value(), 2u);
  EXPECT_EQ(m.ranges.Value(), 2u);
  EXPECT_EQ(m.txns.Value(), 1u);

  // A write Txn: its two compares are a read txn of their own; the branch taken (the failure
  // one here) holds a range and a nested Txn whose taken branch deletes.
  etcdserverpb::TxnRequest txn;
  txn.add_compare();
  txn.add_compare();
  txn.add_success()->mutable_request_put();
  txn.add_failure()->mutable_request_range();
  auto* nested = txn.add_failure()->mutable_request_txn();
  nested->add_compare();
  nested->add_success()->mutable_request_delete_range();
  etcdserverpb::TxnResponse resp;
  resp.set_succeeded(false);
  resp.add_responses()->mutable_response_range();
  auto* nested_resp = resp.add_responses()->mutable_response_txn();
  nested_resp->set_succeeded(true);
  nested_resp->add_responses()->mutable_response_delete_range();
  ServerMetrics t;
  t.CountTxn(txn, resp, /*read_only=*/false);
  EXPECT_EQ(t.ranges.Value(), 4u);  // 3 compares on the path taken + the range
  EXPECT_EQ(t.deletes.Value(), 1u);
  EXPECT_EQ(t.puts.Value(), 0u);  // the branch not taken
  EXPECT_EQ(t.txns.Value(), 2u);  // the compares' read and the write
  ServerMetrics r;
  r.CountTxn(txn, resp, /*read_only=*/true);
  EXPECT_EQ(r.txns.Value(), 1u);  // one store transaction for everything
  EXPECT_EQ(r.ranges.Value(), 4u);
}

TEST(ServerMetricsTest, MethodsAreRegisteredOnceAndWrittenWithEveryCode) {
  ServerMetrics m;
  GrpcMethodStats& put = m.Method("/etcdserverpb.KV/Put", "unary");
  EXPECT_EQ(&put, &m.Method("/etcdserverpb.KV/Put", "unary"));
  EXPECT_EQ(put.service, "etcdserverpb.KV");
  EXPECT_EQ(put.method, "Put");
  put.started.Add();
  put.handled[5].Add();  // NotFound
  common::MetricsPage page;
  m.WriteGrpc(page);
  const std::string text = page.Text();
  const std::string labels =
      "grpc_method=\"Put\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"";
  EXPECT_NE(text.find("grpc_server_started_total{" + labels + "} 1\n"), std::string::npos);
  EXPECT_NE(text.find("grpc_server_handled_total{grpc_code=\"NotFound\"," + labels + "} 1\n"),
            std::string::npos);
  EXPECT_NE(
      text.find("grpc_server_handled_total{grpc_code=\"Unauthenticated\"," + labels + "} 0\n"),
      std::string::npos);
}

}  // namespace
}  // namespace etcdw::member
