// Differential testing: the same client calls go to etcd 3.4.23 (Debian's etcd-server) and to
// etcd-wrapper, both started fresh on loopback with the same settings; their answers must be
// the same: gRPC code, error message, and response message. Headers are compared on revision
// only (cluster_id, member_id and raft_term legitimately differ).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "servers.h"

namespace etcdw::testing {

// What one call produced, in comparable form.
struct Outcome {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;   // gRPC status message (etcd's error string)
  std::string response;  // normalized text form of the response (empty on error)
  std::string ToString() const;
};

// Clears the identity fields of every ResponseHeader inside `m` (recursively), keeping revision.
void NormalizeHeaders(google::protobuf::Message* m);
// Text form after NormalizeHeaders.
std::string Normalized(const google::protobuf::Message& m);

class DiffTest : public ::testing::Test {
 protected:
  // Starts etcd and etcd-wrapper with the same extra settings (etcd key names).
  void StartBoth(const Settings& extra = {});
  void TearDown() override;

  Member& etcd() { return *etcd_; }
  Member& ours() { return *ours_; }
  std::vector<Member*> both() { return {etcd_.get(), ours_.get()}; }

  // Runs `call` against one member and captures its outcome.
  template <typename Resp>
  Outcome Call(Member& m, const std::function<grpc::Status(Client&, grpc::ClientContext*, Resp*)>& call) {
    Resp resp;
    auto ctx = Ctx();
    grpc::Status st = call(m.client(), ctx.get(), &resp);
    Outcome o;
    o.code = st.error_code();
    o.message = st.error_message();
    if (st.ok()) o.response = Normalized(resp);
    return o;
  }

  // Runs `call` against both and expects identical outcomes; returns etcd's.
  template <typename Resp>
  Outcome Same(const std::function<grpc::Status(Client&, grpc::ClientContext*, Resp*)>& call,
               const std::string& what = "") {
    Outcome a = Call<Resp>(etcd(), call);
    Outcome b = Call<Resp>(ours(), call);
    EXPECT_EQ(a.ToString(), b.ToString()) << "differs from etcd: " << what;
    return a;
  }

  // Shorthands for the most common calls (each compared with Same()).
  Outcome Put(const std::string& k, const std::string& v, int64_t lease = 0, bool prev_kv = false);
  Outcome Range(const etcdserverpb::RangeRequest& r);
  Outcome Get(const std::string& k, const std::string& end = "", int64_t rev = 0);
  Outcome Delete(const std::string& k, const std::string& end = "", bool prev_kv = false);
  Outcome Txn(const etcdserverpb::TxnRequest& r);
  Outcome Compact(int64_t rev, bool physical = false);

 private:
  std::unique_ptr<Member> etcd_;
  std::unique_ptr<Member> ours_;
};

// A watch stream on one member, read in the background.
class WatchSession {
 public:
  explicit WatchSession(Member& m);
  ~WatchSession();
  bool Send(const etcdserverpb::WatchRequest& req);
  // Next response within `timeout`, or nullopt.
  std::optional<etcdserverpb::WatchResponse> Next(
      std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Collects responses until none arrives for `quiet`.
  std::vector<etcdserverpb::WatchResponse> Drain(
      std::chrono::milliseconds quiet = std::chrono::milliseconds(500));
  void CloseSend();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

etcdserverpb::WatchRequest CreateWatch(const std::string& key, const std::string& end = "",
                                       int64_t start_rev = 0, bool prev_kv = false);

}  // namespace etcdw::testing
